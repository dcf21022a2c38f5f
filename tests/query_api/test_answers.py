"""The application layer's query answers (``odfd.app.answers``): pinned tables, proofs that an
independent checker accepts, re-execution at the pinned blocks, limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from odfd.app import answers
from odfd.app.node import Node
from odfd.config import NodeConfig
from protocol.identity import DatasetId, Multihash
from protocol.query import QueryRequest, ResponseSigner, ResponseSigningNotConfigured, VerifyRequest
from storage.catalog import DatasetRecord
from storage.workspace import Workspace
from tests.query_api import verifier
from tests.query_api.datasets import GROWING, POPULATION, PRIVATE, TEST_KEY_SEED, add_all, grow

SIGNER = ResponseSigner(SigningKey(TEST_KEY_SEED))
POPULATION_SQL = f'select offset, city, population from "{POPULATION}" order by offset desc'


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await add_all(workspace)
        yield Node(workspace, NodeConfig())


async def ask(node: Node, request: dict[str, Any], **options: Any) -> dict[str, Any]:
    body = await answers.answer(node, QueryRequest.from_json(request), signer=SIGNER, **options)
    value: dict[str, Any] = json.loads(body)
    return value


async def test_a_proof_checks_out_independently_and_verifies(node: Node) -> None:
    answer = await ask(node, {"query": POPULATION_SQL, "include": ["Proof"]})
    assert answer["output"]["data"] == [
        {"city": "B", "offset": 1, "population": 200},
        {"city": "A", "offset": 0, "population": 100},
    ]
    record = await node.workspace.resolve(POPULATION)
    assert answer["input"]["datasets"] == [
        {"id": str(record.id), "alias": POPULATION, "blockHash": str(record.head)}
    ]
    verifier.check(answer)
    assert (await answers.verify(node, VerifyRequest.from_answer(answer))).ok


async def test_a_proof_made_before_new_data_still_verifies(node: Node) -> None:
    sql = f'select sum(value) as total from "{GROWING}"'
    before = await ask(node, {"query": sql, "include": ["Proof"]})
    await grow(node.workspace, GROWING, [10])
    after = await ask(node, {"query": sql})
    assert before["output"]["data"] == [{"total": 6}]
    assert after["output"]["data"] == [{"total": 16}]
    assert (await answers.verify(node, VerifyRequest.from_answer(before))).ok


async def test_kept_views_follow_heads_and_renames(node: Node) -> None:
    """Views are kept by dataset and block between queries: a dataset that moved is read at
    its new head, one renamed is found under its new alias, an older block stays readable."""
    sql = f'select sum(value) as total from "{GROWING}"'
    first = await ask(node, {"query": sql, "include": ["Input"]})
    again = await ask(node, {"query": sql, "include": ["Input"]})  # from the kept view
    assert first == again
    old_head = first["input"]["datasets"][0]["blockHash"]
    await grow(node.workspace, GROWING, [10])
    moved = await ask(node, {"query": sql, "include": ["Input"]})
    assert moved["output"]["data"] == [{"total": 16}]
    record = await node.workspace.resolve(GROWING)
    assert moved["input"]["datasets"][0]["blockHash"] == str(record.head) != old_head
    pinned = {"id": str(record.id), "alias": "g", "blockHash": old_head}
    at_old = await ask(node, {"query": "select sum(value) as total from g", "datasets": [pinned]})
    assert at_old["output"]["data"] == [{"total": 6}]
    await node.workspace.rename_dataset(GROWING, "renamed")
    renamed = await ask(
        node, {"query": 'select sum(value) as total from "renamed"', "include": ["Input"]}
    )
    assert renamed["output"]["data"] == [{"total": 16}]
    assert renamed["input"]["datasets"][0]["alias"] == "renamed"
    with pytest.raises(answers.BadQueryError):
        await ask(node, {"query": sql})


async def test_a_kept_plan_serves_only_the_same_tables(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query asked again over unchanged datasets runs its kept plan (no planning, no lock);
    a caller who may not read a dataset never runs a plan kept over it, even among callers who
    may asking at once; a new block is read by the next query."""
    sql = f'select value from "{PRIVATE}" order by value'
    kept = await answers._kept_session(node)
    planned: list[str] = []
    plan = kept.plan

    def counted(sql: str, tables: Any) -> Any:
        planned.append(sql)
        return plan(sql, tables)

    monkeypatch.setattr(kept, "plan", counted)
    rows = [{"value": 7}, {"value": 8}]
    for _ in range(3):
        assert (await ask(node, {"query": sql}))["output"]["data"] == rows
    assert len(planned) == 1

    def hidden(record: DatasetRecord) -> bool:
        return record.alias != PRIVATE

    async def data(visible: answers.Visible | None) -> object:
        try:
            return (await ask(node, {"query": sql}, visible=visible))["output"]["data"]
        except answers.BadQueryError as error:
            assert "not found" in str(error)
            return None

    callers = [None if i % 3 else hidden for i in range(16)]
    assert await asyncio.gather(*map(data, callers)) == [
        rows if visible is None else None for visible in callers
    ]
    assert await data(hidden) is None
    await grow(node.workspace, PRIVATE, [9])
    assert await data(None) == [*rows, {"value": 9}]


async def test_pinned_datasets_read_at_their_block_under_their_alias(node: Node) -> None:
    record = await node.workspace.resolve(GROWING)
    await grow(node.workspace, GROWING, [10])
    pinned = {"id": str(record.id), "alias": "g", "blockHash": str(record.head)}
    answer = await ask(node, {"query": "select count(*) as n from g", "datasets": [pinned]})
    assert answer["output"]["data"] == [{"n": 3}]


async def test_a_tampered_output_is_an_output_mismatch(node: Node) -> None:
    answer = await ask(node, {"query": POPULATION_SQL, "include": ["Proof"]})
    commitment = answer["commitment"]
    commitment["outputHash"] = str(Multihash.from_digest_sha3_256(b"forged"))
    commitment_value = VerifyRequest.from_answer(answer).commitment
    answer["proof"] = SIGNER.sign(commitment_value).to_json()
    result = await answers.verify(node, VerifyRequest.from_answer(answer))
    assert result.to_json()["error"]["kind"] == "VerificationFailed::OutputMismatch"


async def test_unknown_dataset_and_block(node: Node) -> None:
    missing = DatasetId.new_seeded(b"does-not-exist")
    with pytest.raises(answers.QueryDatasetNotFoundError, match=f"Dataset not found: {missing}"):
        await ask(node, {"query": "select 1", "datasets": [{"id": str(missing), "alias": "x"}]})
    record = await node.workspace.resolve(GROWING)
    block = Multihash.from_digest_sha3_256(b"does-not-exist")
    with pytest.raises(answers.QueryBlockNotFoundError):
        await ask(
            node,
            {
                "query": "select 1",
                "datasets": [{"id": str(record.id), "alias": "x", "blockHash": str(block)}],
            },
        )


async def test_limits_and_a_node_without_a_key(node: Node) -> None:
    with pytest.raises(answers.QueryRefusedError, match="cap of 10 rows"):
        await ask(node, {"query": "select 1", "limit": 11}, limits=answers.QueryLimits(max_rows=10))
    request = QueryRequest.from_json({"query": "select 1 as one", "include": ["Proof"]})
    with pytest.raises(ResponseSigningNotConfigured):
        await answers.answer(node, request)
    plain = await answers.answer(node, QueryRequest.from_json({"query": "select 1 as one"}))
    assert json.loads(plain) == {"output": {"data": [{"one": 1}], "dataFormat": "JsonAoS"}}


async def test_skip_and_limit_stop_the_stream(node: Node) -> None:
    answer = await ask(
        node, {"query": f'select value from "{GROWING}" order by value', "skip": 1, "limit": 1}
    )
    assert answer["output"]["data"] == [{"value": 2}]


async def test_the_json_functions_answer_as_in_transforms(node: Node) -> None:
    sql = "select json_get_int('{\"a\": [1, 2]}', 'a', 1) as second, '{\"b\": \"x\"}' ->> 'b' as b"
    answer = await ask(node, {"query": sql})
    assert answer["output"]["data"] == [{"second": 2, "b": "x"}]


async def test_bad_sql_in_the_reference_words(node: Node) -> None:
    with pytest.raises(answers.BadQueryError, match="^sql parser error: Expected: end of"):
        await ask(node, {"query": "select ???"})
    with pytest.raises(answers.BadQueryError, match="table 'odf.odf.does_not_exist' not found"):
        await ask(node, {"query": "select * from does_not_exist"})


async def test_spark_dialect_answers_with_proofs(tmp_path: Path, spark: object) -> None:
    """``SqlSpark`` runs on the node's Spark; its proof verifies by running Spark again."""
    from tests.fixtures.spark import TEST_ENGINES

    async with await Workspace.init(tmp_path / "ws") as workspace:
        await add_all(workspace)
        node = Node(workspace, NodeConfig(), engines=TEST_ENGINES)
        request = {
            "query": f"select value from {GROWING} order by value desc",
            "queryDialect": "SqlSpark",
            "include": ["Proof"],
            "skip": 1,
        }
        answer = await ask(node, request)
        assert answer["output"]["data"] == [{"value": 2}, {"value": 1}]
        verifier.check(answer)
        assert (await answers.verify(node, VerifyRequest.from_answer(answer))).ok
