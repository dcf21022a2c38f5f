"""FetchStep::EthereumLogs against a real in-process EVM behind a JSON-RPC endpoint on loopback.

Contracts emit real logs (``tests/pipeline/evm_node.py``); the source polls them by block range,
decodes them by the event signature, resumes after the last block scanned, copes with a node that
limits range sizes, and refuses a broken node in one line without committing anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from aiohttp import web
from eth_utils import keccak

from odfd.coordinator.ingest import pull_root
from odfd.ingest.errors import FetchError, IngestError, UnsupportedError
from odfd.ingest.ethereum.filter import LogFilter, parse_filter
from odfd.ingest.ethereum.logs import logs_table, parse_signature
from odfd.ingest.fetch import registry
from odfd.ingest.fetch.ethereum import EthereumLogsFetcher
from protocol.model import FetchStepEthereumLogs, SourceState, Timestamp
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, read_all, rows
from tests.pipeline.evm_node import EvmNode
from verifier.audit import VerifyOptions, verify

MINTED = """Minted(
    address indexed to, uint64 indexed batch, uint256 amount, int64 delta, string memo,
    bytes payload, bool ok, uint32 small, int256 signed)"""
MINTED_TOPIC = keccak(text="Minted(address,uint64,uint256,int64,string,bytes,bool,uint32,int256)")
BURNED_TOPIC = keccak(text="Burned(address,uint64,uint256)")
BODY = ["uint256", "int64", "string", "bytes", "bool", "uint32", "int256"]
HOLDER = bytes.fromhex("7e5f4552091a69125d5dfcb7b8c2659029395bdf")


def word(value: bytes | int) -> bytes:
    """A 32-byte topic holding an address or a number."""
    return value.rjust(32, b"\0") if isinstance(value, bytes) else value.to_bytes(32, "big")


def mint(node: EvmNode, contract: bytes, batch: int, amount: int, memo: str) -> int:
    return node.emit(
        contract,
        [MINTED_TOPIC, word(HOLDER), word(batch)],
        BODY,
        [amount, -batch, memo, memo.encode()[:2], batch % 2 == 0, batch * 7, -amount],
    )


def burn(node: EvmNode, contract: bytes, amount: int) -> int:
    return node.emit(contract, [BURNED_TOPIC, word(HOLDER), word(0)], ["uint256"], [amount])


@pytest.fixture
async def node() -> AsyncIterator[EvmNode]:
    evm = EvmNode()
    app = web.Application()
    app.router.add_post("/", evm.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    evm.url = f"http://127.0.0.1:{port}/"
    try:
        yield evm
    finally:
        await runner.cleanup()


def manifest(node: EvmNode, contract: bytes, since: int, chain_id: int | None = None) -> str:
    return f"""
kind: DatasetSnapshot
version: 1
content:
  name: mints
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: EthereumLogs
        chainId: {chain_id or node.chain_id}
        nodeUrl: {node.url}
        filter: |
          address = X'{contract.hex()}'
          and block_number >= {since}
        signature: |
{"".join("          " + line.strip() + chr(10) for line in MINTED.splitlines())}
      read:
        kind: Parquet
      merge:
        kind: Append
"""


@pytest.mark.spark
async def test_first_poll_nothing_new_new_blocks_then_new_logs_and_verify(
    workspace: Workspace, node: EvmNode
) -> None:
    token, other = node.deploy(), node.deploy()
    since = node.latest()
    first_block = mint(node, token, 1, 10**30, "hello")
    burn(node, token, 5)  # another event of the same contract: not this source's
    mint(node, other, 2, 7, "other contract")  # the same event elsewhere: not this source's
    second_block = mint(node, token, 2, 3, "héllo")
    dataset = await create(workspace, manifest(node, token, since))

    [first] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 1), engines=TEST_ENGINES
    )
    assert first.num_records == 2
    [same] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 2), engines=TEST_ENGINES
    )
    assert same.up_to_date and same.reason == "the source has not changed"
    node.mine(2)  # blocks without logs: scanned and remembered, nothing to add
    [empty] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 3), engines=TEST_ENGINES
    )
    assert not empty.up_to_date and empty.num_records == 0
    third_block = mint(node, token, 3, 1, "again")
    [third] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 4), engines=TEST_ENGINES
    )
    assert third.num_records == 1

    assert await rows(dataset, "offset", "block_number", "log_index", "address", "topic0") == [
        (0, first_block, 0, token, MINTED_TOPIC),
        (1, second_block, 0, token, MINTED_TOPIC),
        (2, third_block, 0, token, MINTED_TOPIC),
    ]
    events = [e["event"] for e in (await read_all(dataset)).to_pylist()]
    assert events[0] == {
        "to": HOLDER,
        "batch": 1,
        "amount": str(10**30),
        "delta": -1,
        "memo": "hello",
        "payload": b"he",
        "ok": False,
        "small": 7,
        "signed": str(-(10**30)),
    }
    assert [e["memo"] for e in events] == ["hello", "héllo", "again"]
    stamps = [node.tester.get_block_by_number(b)["timestamp"] for b in (first_block, third_block)]
    assert [t.timestamp() for (t,) in await rows(dataset, "block_timestamp")][::2] == stamps
    states = [e.new_source_state for e in await data_events(dataset)]
    assert [s.value.split("@")[0] for s in states if s] == [
        str(second_block),
        str(second_block + 2),
        str(third_block),
    ]
    block = node.tester.get_block_by_number(third_block)
    assert states[-1] == SourceState(
        source_name="default", kind="odf/etag", value=f"{third_block}@{block['hash'][2:]}"
    )
    report = await verify(workspace, ["mints"], VerifyOptions(), engines=TEST_ENGINES)
    assert report.exit_code == 0


@pytest.mark.spark
async def test_a_node_limiting_ranges_gets_halves_and_pulls_resume_by_block(
    workspace: Workspace, node: EvmNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = node.deploy()
    since = node.latest() + 1
    blocks = [mint(node, token, n, n, f"m{n}") for n in range(1, 4)]
    node.mine(3)
    node.max_range = 2
    node.timestamps = False
    small = EthereumLogsFetcher(block_stride=5, records_per_slice=2)
    monkeypatch.setitem(registry._loaded, FetchStepEthereumLogs, small)  # the loaded instance
    dataset = await create(workspace, manifest(node, token, since))

    outcomes = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 1), engines=TEST_ENGINES
    )
    assert [o.num_records for o in outcomes] == [2, 1]
    assert [o.has_more for o in outcomes] == [True, False]
    assert await rows(dataset, "block_number", "block_timestamp") == [(b, None) for b in blocks]
    answered = [(a, b) for a, b, ok in node.ranges if ok]
    assert all(b - a + 1 <= 2 for a, b in answered)
    assert sorted(n for a, b in answered for n in range(a, b + 1)) == list(
        range(since, node.latest() + 1)
    )  # every block of the range scanned exactly once, across two transactions
    assert any(not ok for _, _, ok in node.ranges)  # wide ranges were refused, then halved


@pytest.mark.parametrize(
    "broken", ["error", "html", "bad log", "wrong chain", "node down", "websocket url"]
)
async def test_a_broken_node_fails_in_one_line_and_commits_nothing(
    workspace: Workspace, node: EvmNode, broken: str
) -> None:
    token = node.deploy()
    since = node.latest()
    mint(node, token, 1, 1, "x")
    expected = {
        "error": "eth_getLogs failed: internal error: state unavailable (code -32000)",
        "html": "eth_getLogs: the answer is not JSON: '<html><body>502 Bad Gateway",
        "bad log": "eth_getLogs: log blockNumber is not a hex quantity: 'None'",
        "wrong chain": f"fetch.chainId is 5 but the node at {node.url[:-1]} serves chain",
        "node down": "eth_chainId: the node is unreachable: [Errno 111] Connection refused",
        "websocket url": "fetch.nodeUrl: scheme 'ws' is not supported (http, https",
    }[broken]
    if broken == "node down":
        node.url = "http://127.0.0.1:9/"  # the discard port: nothing listens
    elif broken == "websocket url":
        node.url = node.url.replace("http://", "ws://")
    elif broken != "wrong chain":
        node.broken = broken
    chain_id = 5 if broken == "wrong chain" else None
    dataset = await create(workspace, manifest(node, token, since, chain_id))
    head = await dataset.chain.head()
    with pytest.raises(IngestError) as err:
        await pull_root(workspace, dataset, engines=TEST_ENGINES)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, FetchError) or broken in ("wrong chain", "websocket url")
    assert await dataset.chain.head() == head


def test_filter_clauses_as_the_reference_pushes_them_down() -> None:
    address = bytes.fromhex("ae78736cd615f374d3085123a210448e74fc6393")
    assert parse_filter(f"address = X'{address.hex()}'\nand\nblock_number > 13325304") == LogFilter(
        addresses=frozenset([address]), from_block=13325305
    )
    other = b"\x11" * 20
    found = parse_filter(
        f"(address = X'{address.hex()}' OR (address = x'{other.hex()}')) "
        "AND block_number BETWEEN 5 AND 10 AND 7 >= block_number "
        f"AND topic0 = eth_event_selector('{MINTED}') AND topic2 IN (X'{'00' * 32}', X'{'01' * 32}')"
    )
    assert found.rpc_params(5, 7) == {
        "fromBlock": "0x5",
        "toBlock": "0x7",
        "address": sorted(["0x" + address.hex(), "0x" + other.hex()]),
        "topics": [["0x" + MINTED_TOPIC.hex()], None, ["0x" + "00" * 32, "0x" + "01" * 32]],
    }
    assert (found.from_block, found.to_block) == (5, 7)
    for clause, message in [
        ("data = X'00'", "`data = X'00'` cannot be sent to the node"),
        ("block_number > 5 OR address = X'00'", "`block_number > 5 OR address = X'00'` cannot"),
        ("address = X'0011'", "address must be compared with a hex literal X'…' of 20 bytes"),
        ("block_number <> 3", "`block_number <> 3` cannot be sent"),
        ("block_number >", "expected a column or a value, found the end"),
        ("lower(address) = 'x'", "an unsupported function 'lower'"),
    ]:
        with pytest.raises(UnsupportedError, match="^fetch.filter: ") as err:
            parse_filter(clause)
        assert message in str(err.value)


def test_logs_file_schema(tmp_path: Path) -> None:
    """The fetched file has the reference's columns (position columns Int64, see logs.py)."""
    table = logs_table([], parse_signature(MINTED, "test"))
    pq.write_table(table, tmp_path / "logs.parquet")
    assert [f"{f.name}:{f.type}" for f in pq.read_schema(tmp_path / "logs.parquet")] == [
        "block_number:int64",
        "block_hash:binary",
        "block_timestamp:timestamp[ms, tz=UTC]",
        "transaction_index:int64",
        "transaction_hash:binary",
        "log_index:int64",
        "address:binary",
        "topic0:binary",
        "topic1:binary",
        "topic2:binary",
        "topic3:binary",
        "data:binary",
        "event:struct<to: binary not null, batch: uint64 not null, amount: string not null, "
        "delta: int64 not null, memo: string not null, payload: binary not null, ok: bool not "
        "null, small: uint32 not null, signed: string not null>",
    ]
