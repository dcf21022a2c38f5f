"""FetchStep::EthereumLogs: the logs of a block range, from an Ethereum node's ``eth_getLogs``.

As the reference does: the filter clause becomes the request's filter (the signature adds its
``topic0``), the range runs from the filter's first block (or the block after the last one
scanned) to its last block (or the chain's latest), scanned in pages of ``block_stride`` blocks;
a pull stops after ``records_per_slice`` logs or ``blocks_per_slice`` blocks and says there is
more. The logs are written as a Parquet file (see ``odfd.ingest.ethereum.logs`` for the columns;
the source's read step is ``Parquet``). The source state is an ETag ``<block>@<hash>`` of the last
block scanned, so the next pull starts after it.

A node that refuses a page (many limit ranges to a few thousand blocks or the answer to so many
logs) gets the page again in halves, down to single blocks; the smaller size is kept for the rest
of the pull. Chain reorganisations are not detected (nor by the reference): bound the range below
the chain's head when that matters.
"""

from __future__ import annotations

import urllib.parse
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from odfd.ingest.errors import IngestError, UnsupportedError
from odfd.ingest.ethereum.filter import LogFilter, parse_filter
from odfd.ingest.ethereum.logs import RawLog, logs_table, parse_signature
from odfd.ingest.ethereum.rpc import METHOD_NOT_FOUND, EthRpc, RpcError, shown
from odfd.ingest.fetch.base import KIND_ETAG, POLLING_SOURCE_NAME, Fetched
from odfd.ingest.template import render
from protocol.model import FetchStepEthereumLogs, SourceState, Timestamp


@dataclass(frozen=True)
class EthereumLogsFetcher:
    """Fetches ``FetchStepEthereumLogs`` sources; the limits are the reference's defaults."""

    block_stride: int = 100_000
    records_per_slice: int = 10_000
    blocks_per_slice: int = 1_000_000

    def fetch(
        self,
        step: FetchStepEthereumLogs,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        if not step.node_url:
            raise UnsupportedError(
                "fetch.nodeUrl is not set: odfd needs the node's URL (it has no default nodes "
                "per chainId)"
            )
        rpc = EthRpc(render(step.node_url, "fetch.nodeUrl"))
        scheme = urllib.parse.urlsplit(rpc.url).scheme.lower()
        if scheme not in ("http", "https"):
            raise UnsupportedError(
                f"fetch.nodeUrl: scheme '{scheme}' is not supported (http, https: JSON-RPC over "
                "HTTP; WebSocket endpoints are not)"
            )
        signature = None
        if step.signature:
            signature = parse_signature(step.signature, "fetch.signature")
            signature.check_decodable("fetch.signature")
        log_filter = parse_filter(step.filter)
        if signature is not None:
            text = f"the signature's topic0 = eth_event_selector('{signature.name}(...)')"
            log_filter = log_filter.restricted("topic0", frozenset([signature.selector]), text)
        if step.chain_id is not None:
            chain = rpc.chain_id()
            if chain != step.chain_id:
                raise IngestError(
                    f"fetch.chainId is {step.chain_id} but the node at {shown(rpc.url)} "
                    f"serves chain {chain}"
                )
        resume = _last_scanned(prev_state)
        latest = rpc.block_number()
        first = log_filter.from_block if resume is None else max(resume + 1, log_filter.from_block)
        last = latest if log_filter.to_block is None else min(log_filter.to_block, latest)
        if first > last:
            return None
        logs, last_scanned = self._scan(rpc, log_filter, first, last)
        state = SourceState(
            source_name=POLLING_SOURCE_NAME,
            kind=KIND_ETAG,
            value=f"{last_scanned}@{rpc.block_hash(last_scanned).hex()}",
        )
        work_dir.mkdir(parents=True, exist_ok=True)
        path = work_dir / f"fetch-{uuid.uuid4().hex}.parquet"
        pq.write_table(logs_table(logs, signature), path)
        return Fetched(path, True, state, None, has_more=last_scanned < last)

    def _scan(
        self, rpc: EthRpc, log_filter: LogFilter, first: int, last: int
    ) -> tuple[list[RawLog], int]:
        """The logs of blocks ``first`` .. (at most) ``last`` and the last block scanned."""
        logs: list[RawLog] = []
        stride = self.block_stride
        start = first
        while start <= last:
            end = min(last, start + stride - 1)
            try:
                page = rpc.get_logs(log_filter.rpc_params(start, end))
            except RpcError as err:
                if end == start or err.code == METHOD_NOT_FOUND:
                    raise
                stride = max(1, (end - start + 1) // 2)  # the node limits ranges: halve, retry
                continue
            logs.extend(page)
            start = end + 1
            if len(logs) >= self.records_per_slice or start - first >= self.blocks_per_slice:
                break
        return logs, start - 1


def _last_scanned(state: SourceState | None) -> int | None:
    """The last block a previous pull scanned, from its ``<block>@<hash>`` ETag."""
    if state is None:
        return None
    number, at, _ = state.value.partition("@")
    if state.kind != KIND_ETAG or not at or not number.isdigit():
        raise IngestError(
            f"source state {state.kind} {state.value!r} is not the <block>@<hash> ETag an "
            "EthereumLogs source keeps"
        )
    return int(number)
