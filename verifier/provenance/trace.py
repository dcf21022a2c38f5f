"""Follows rows down a pipeline: a derivative's rows to their witnesses, recursively, and a root
dataset's rows to the ingest that added them.

Rows are explained transaction by transaction: each ``ExecuteTransform`` holding a selected row is
re-executed once with tags (``witness``), every selected row of it checked (``check``); then the
witnesses of all rows of a dataset are explained together, one level further down. A single row
narrows that run to its group or window partition (``rewrite``); a group over inputs comes back
as its input rows, which are checked as they are, without reading the inputs again.
"""

from __future__ import annotations

import asyncio
import bisect
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    DatasetKind,
    ExecuteTransform,
    FetchStepContainer,
    FetchStepEthereumLogs,
    FetchStepFilesGlob,
    FetchStepMqtt,
    FetchStepUrl,
)
from storage.dataset import Dataset
from verifier.engine.columns import Vocab
from verifier.engine.contract import Engine, QueryTable, TransformRequest
from verifier.engine.inputs import slice_paths
from verifier.engine.registry import Engines
from verifier.engine.replay import replay_request
from verifier.provenance.check import as_stored, reproduces, witness_tables
from verifier.provenance.errors import (
    ProvenanceCheckError,
    ProvenanceError,
    UnsupportedProvenanceError,
)
from verifier.provenance.model import IngestInfo, RowProvenance
from verifier.provenance.witness import (
    TaggedRun,
    Witnesses,
    compared_columns,
    locate,
    row_values,
    run_tagged,
)

#: The engine ``--where`` predicates are written for (in-process: no JVM to choose rows).
SELECT_ENGINE = "datafusion"

#: Opens a dataset of the workspace by id: the dataset and the alias to show it by.
OpenDataset = Callable[[DatasetId], Awaitable[tuple[Dataset, str]]]


@dataclass(frozen=True, slots=True)
class TraceOptions:
    depth: int | None = None
    """Levels of inputs to trace (1: the direct inputs); ``None``: down to the root datasets."""
    max_rows: int = 1000
    """Witness rows of one dataset traced further at each level (the rest listed by offset)."""
    scratch_dir: Path | None = None


@dataclass(frozen=True, slots=True)
class _DataBlock:
    start: int
    end: int
    sequence: int
    hash: Multihash
    event: AddData | ExecuteTransform


class Tracer:
    """Answers provenance questions about the datasets ``open_dataset`` can open."""

    def __init__(self, open_dataset: OpenDataset, engines: Engines, options: TraceOptions) -> None:
        """Transactions are re-executed in ``engines`` (each in the one its transform names)."""
        self.open_dataset = open_dataset
        self.engines = engines
        self.options = options
        self._blocks: dict[DatasetId, list[_DataBlock]] = {}
        self._ingests: dict[Multihash, IngestInfo] = {}
        self._tagged: dict[tuple[Multihash, int | None], TaggedRun] = {}
        """Tagged re-executions by block (and row, when focused on one): a transaction is
        re-executed once per question."""
        self._values: dict[tuple[DatasetId, int], dict[str, Any]] = {}
        """Witness rows already read (for the check), so they are not read again to show."""

    async def explain(self, dataset_id: DatasetId, offsets: Sequence[int]) -> list[RowProvenance]:
        """Why-provenance of the rows at ``offsets`` of a derivative dataset, each checked."""
        dataset, alias = await self.open_dataset(dataset_id)
        state = await dataset.chain.state()
        if state.kind != DatasetKind.DERIVATIVE:
            raise ProvenanceError(
                f"{alias} is a root dataset: its rows were ingested, not derived from other rows "
                f"(provenance traces the rows of derivative datasets; `odfd log {alias}` lists "
                "its ingests)"
            )
        blocks = await self._index(dataset)
        for offset in offsets:
            if self._block_of(blocks, offset) is None:
                span = f"its rows run 0..{blocks[-1].end}" if blocks else "it has no rows yet"
                raise ProvenanceError(f"{alias} has no row at offset {offset} ({span})")
        found = await self._derived(dataset, alias, list(offsets), self.options.depth)
        return [found[offset] for offset in offsets]

    async def select_offsets(self, dataset_id: DatasetId, predicate: str) -> list[int]:
        """Offsets of the dataset's rows matching a SQL ``predicate`` in the dialect of
        :data:`SELECT_ENGINE`, in order."""
        from verifier.engine.inputs import all_slices, arrow_schema_of

        engine = self.engines.named(SELECT_ENGINE)
        quote_identifier = engine.quote_identifier

        dataset, alias = await self.open_dataset(dataset_id)
        state = await dataset.chain.state()
        offset = Vocab.of(state.vocab).offset
        schema = arrow_schema_of(state.schema) if state.schema is not None else None
        paths = await slice_paths(dataset, await all_slices(dataset))
        query = (
            f"SELECT {quote_identifier(offset)} FROM {quote_identifier(alias)} "
            f"WHERE {predicate} ORDER BY {quote_identifier(offset)}"
        )
        from protocol.model import SqlQueryStep

        try:
            table = await asyncio.to_thread(
                engine.query,
                [SqlQueryStep(query=query)],
                [QueryTable(alias, paths, schema)],
            )
        except ProvenanceError:
            raise
        except Exception as err:
            raise ProvenanceError(f"--where: {_first_line(err)}") from err
        return [int(v) for v in table.column(0).to_pylist()]

    # --- derivative rows --------------------------------------------------------------------

    async def _derived(
        self, dataset: Dataset, alias: str, offsets: list[int], depth: int | None
    ) -> dict[int, RowProvenance]:
        blocks = await self._index(dataset)
        by_block: dict[int, list[int]] = {}
        for offset in offsets:
            block = self._block_of(blocks, offset)
            assert block is not None, "offsets are checked against the chain first"
            by_block.setdefault(block, []).append(offset)
        rows: dict[int, RowProvenance] = {}
        wanted: dict[DatasetId, set[int]] = {}
        pending: dict[int, list[tuple[DatasetId, int]]] = {}
        for number, chosen in by_block.items():
            explained = await self._explain_block(dataset, alias, blocks[number], chosen)
            for offset, (row, input_ids, witnesses) in explained.items():
                rows[offset] = row
                pending[offset] = [(input_ids[k], o) for k, ids in witnesses.items() for o in ids]
                for k, ids in witnesses.items():
                    wanted.setdefault(input_ids[k], set()).update(ids)
        deeper = None if depth is None else depth - 1
        resolved: dict[tuple[DatasetId, int], RowProvenance] = {}
        for input_id, input_offsets in wanted.items():
            found = await self._rows_of(input_id, sorted(input_offsets), deeper)
            for offset, row in found.items():
                resolved[(input_id, offset)] = row
        for offset, row in rows.items():
            row.inputs = [resolved[key] for key in pending[offset]]
        return rows

    async def _explain_block(
        self, dataset: Dataset, alias: str, block: _DataBlock, offsets: list[int]
    ) -> dict[int, _Explained]:
        scratch_root = self.options.scratch_dir
        if scratch_root is not None:
            scratch_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="odfd-provenance-", dir=scratch_root) as tmp:
            scratch = Path(tmp)
            request = await replay_request(
                dataset, block.hash, self._open_input, scratch / "replay"
            )
            engine = self.engines.named(request.transform.engine, alias)
            assert block.event.new_data is not None
            path = (await slice_paths(dataset, [block.event.new_data.physical_hash]))[0]
            recorded = pq.read_table(path)
            skip = (request.vocab.offset, request.vocab.system_time)
            kept = [c for c in recorded.schema.names if c not in skip]
            answer = _Answer(alias, block, request, engine, recorded, kept, scratch)
            focus = None
            if len(offsets) == 1:  # one row: its group or window partition is enough
                focus = row_values(recorded, offsets[0] - block.start, recorded.schema.names)
            tagged = await self._tagged_run(
                answer, offsets[0] if focus is not None else None, focus
            )
            if tagged.group is not None:
                found = await asyncio.to_thread(answer.from_group, offsets[0], tagged.group)
                if found is not None:
                    self._remember(request, found[1])
                    return {offsets[0]: answer.row(offsets[0], tagged, found[0])}
            elif tagged.focused:
                try:
                    return await self._from_tags(answer, tagged, offsets)
                except ProvenanceCheckError:
                    pass  # not found equal, or not checked, in the narrowed run
            # the whole transaction tagged (a focused run's fallback): checked, or refused
            return await self._from_tags(
                answer, await self._tagged_run(answer, None, None), offsets
            )

    async def _from_tags(
        self, answer: _Answer, tagged: TaggedRun, offsets: list[int]
    ) -> dict[int, _Explained]:
        """Each row's witnesses read off its tags in ``tagged``, cut out of the inputs, checked."""
        request, recorded = answer.request, answer.recorded
        skip = (request.vocab.offset, request.vocab.system_time)
        columns = compared_columns(recorded.schema, tagged.table.schema, skip)
        positions = [offset - answer.block.start for offset in offsets]
        tags = await asyncio.to_thread(locate, tagged.table, recorded, positions, columns)
        explained = {}
        for offset, tag in zip(offsets, tags, strict=True):
            if tag is None:
                raise ProvenanceCheckError(
                    f"{answer.what(offset)}: re-executing its transaction with tags gives no "
                    "row equal to it, so no witnesses can be given"
                )
            witnesses = await asyncio.to_thread(tagged.witnesses, tag)
            tables = await asyncio.to_thread(witness_tables, request, witnesses)
            if not await asyncio.to_thread(answer.check, offset, tables):
                raise ProvenanceCheckError(
                    f"{answer.what(offset)}: the {sum(map(len, witnesses.values()))} witness "
                    "row(s) found do not reproduce it when the transform re-runs on them "
                    "alone; no answer is given rather than a wrong one"
                )
            self._remember(request, tables)
            explained[offset] = answer.row(offset, tagged, witnesses)
        return explained

    async def _tagged_run(
        self, answer: _Answer, offset: int | None, focus: dict[str, Any] | None
    ) -> TaggedRun:
        """The transaction run with tags (narrowed to the row at ``offset`` when it can be),
        once per question: a run that was not narrowed serves every row of the transaction."""
        whole = (answer.block.hash, None)
        tagged = self._tagged.get((answer.block.hash, offset)) or self._tagged.get(whole)
        if tagged is None:
            try:
                tagged = await asyncio.to_thread(run_tagged, answer.request, answer.engine, focus)
            except UnsupportedProvenanceError as err:
                raise UnsupportedProvenanceError(f"{answer.alias}: {err}") from err
            self._tagged[(answer.block.hash, offset) if tagged.focused else whole] = tagged
        return tagged

    def _remember(self, request: TransformRequest, tables: dict[int, pa.Table]) -> None:
        """Keeps the witness rows read for a check, so they are not read again to be shown."""
        for k, table in tables.items():
            offset_column = request.inputs[k].vocab.offset
            for values in table.to_pylist():
                self._values[(request.inputs[k].dataset_id, int(values[offset_column]))] = values

    async def _rows_of(
        self, dataset_id: DatasetId, offsets: list[int], depth: int | None
    ) -> dict[int, RowProvenance]:
        """Input rows: traced further (derivatives within depth and limit) or described."""
        dataset, alias = await self.open_dataset(dataset_id)
        state = await dataset.chain.state()
        blocks = await self._index(dataset)
        traced: dict[int, RowProvenance] = {}
        if state.kind == DatasetKind.DERIVATIVE and (depth is None or depth > 0):
            chosen = offsets[: self.options.max_rows]
            traced = await self._derived(dataset, alias, chosen, depth)
        rest = [o for o in offsets if o not in traced]
        unread = [o for o in rest if (dataset_id, o) not in self._values]
        if unread:  # local files of every slice, for the thread below to read
            await slice_paths(
                dataset, [b.event.new_data.physical_hash for b in blocks if b.event.new_data]
            )
        values = await asyncio.to_thread(_values_at, dataset, blocks, unread, state.vocab)
        values.update({o: self._values[(dataset_id, o)] for o in rest if o not in values})
        rows = dict(traced)
        for offset in rest:
            number = self._block_of(blocks, offset)
            if number is None:
                raise ProvenanceError(f"{alias} has no row at offset {offset}")
            block = blocks[number]
            row = RowProvenance(
                dataset=alias,
                offset=offset,
                block_sequence=block.sequence,
                block_hash=str(block.hash),
                values=values.get(offset),
                derived=state.kind == DatasetKind.DERIVATIVE,
            )
            if isinstance(block.event, AddData):
                if block.hash not in self._ingests:
                    self._ingests[block.hash] = await _ingest_info(dataset, block)
                row.ingest = self._ingests[block.hash]
            rows[offset] = row
        return rows

    async def _open_input(self, dataset_id: DatasetId) -> Dataset:
        return (await self.open_dataset(dataset_id))[0]

    async def _index(self, dataset: Dataset) -> list[_DataBlock]:
        assert dataset.id is not None
        if dataset.id not in self._blocks:
            blocks: list[_DataBlock] = []
            async for hash, block in dataset.chain.iter_blocks():
                event = block.event
                if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
                    interval = event.new_data.offset_interval
                    blocks.append(
                        _DataBlock(interval.start, interval.end, block.sequence_number, hash, event)
                    )
            blocks.reverse()
            self._blocks[dataset.id] = blocks
        return self._blocks[dataset.id]

    @staticmethod
    def _block_of(blocks: list[_DataBlock], offset: int) -> int | None:
        number = bisect.bisect_right([b.start for b in blocks], offset) - 1
        if number < 0 or offset > blocks[number].end:
            return None
        return number


@dataclass(frozen=True, slots=True)
class _Answer:
    """What answering for rows of one transaction needs: its request, engine and output slice."""

    alias: str
    block: _DataBlock
    request: TransformRequest
    engine: Engine
    recorded: pa.Table
    kept: list[str]
    """The output columns a re-execution must reproduce (offset and system time aside)."""
    scratch: Path

    def what(self, offset: int) -> str:
        return f"{self.alias} offset {offset} (block #{self.block.sequence})"

    def check(self, offset: int, witnesses: dict[int, pa.Table]) -> bool:
        """Whether the transform, re-run on ``witnesses`` alone, gives the row again (blocking)."""
        folder = Path(tempfile.mkdtemp(prefix=f"check-{offset}-", dir=self.scratch))
        row = row_values(self.recorded, offset - self.block.start, self.kept)
        return reproduces(self.request, self.engine, witnesses, row, folder)

    def from_group(
        self, offset: int, group: dict[int, pa.Table]
    ) -> tuple[Witnesses, dict[int, pa.Table]] | None:
        """The witnesses of the row at ``offset`` and their rows, from a tagged run that listed
        its group's input rows, if the check passes on them (blocking)."""
        witnesses = {
            k: tuple(rows.column(self.request.inputs[k].vocab.offset).to_pylist())
            for k, rows in sorted(group.items())
            if rows.num_rows
        }
        if not witnesses:
            return None  # a key literal that matched nothing
        stored = {k: as_stored(self.request.inputs[k], group[k]) for k in witnesses}
        tables = {k: rows for k, rows in stored.items() if rows is not None}
        if len(tables) < len(stored):
            tables = witness_tables(self.request, witnesses)
        return (witnesses, tables) if self.check(offset, tables) else None

    def row(self, offset: int, tagged: TaggedRun, witnesses: Witnesses) -> _Explained:
        request = self.request
        where = {
            out: f"{request.inputs[k].alias}.{column}"
            for out, (k, column) in tagged.origins.items()
        }
        row = RowProvenance(
            dataset=self.alias,
            offset=offset,
            block_sequence=self.block.sequence,
            block_hash=str(self.block.hash),
            values=row_values(self.recorded, offset - self.block.start, self.recorded.schema.names),
            derived=True,
            columns=where,
            checked=True,
            traced=True,
        )
        return row, [i.dataset_id for i in request.inputs], witnesses


#: A checked row, the ids of its transaction's inputs and its witnesses among them.
_Explained = tuple[RowProvenance, list[DatasetId], Witnesses]


def _values_at(
    dataset: Dataset, blocks: list[_DataBlock], offsets: list[int], vocab: Any
) -> dict[int, dict[str, Any]]:
    """The stored values of the rows at ``offsets`` (each slice read once, filtered)."""
    if not offsets:
        return {}
    offset_column = Vocab.of(vocab).offset
    by_slice: dict[Multihash, list[int]] = {}
    starts = [b.start for b in blocks]
    for offset in offsets:
        number = bisect.bisect_right(starts, offset) - 1
        if number >= 0 and blocks[number].event.new_data is not None:
            data = blocks[number].event.new_data
            assert data is not None
            by_slice.setdefault(data.physical_hash, []).append(offset)
    values: dict[int, dict[str, Any]] = {}
    for hash, wanted in by_slice.items():
        path = dataset.data.path_of(hash)  # type: ignore[attr-defined]  # fetched by the caller
        table = ds.dataset(str(path), format="parquet").to_table(
            filter=ds.field(offset_column).isin(pa.array(wanted, pa.int64()))
        )
        for row in table.to_pylist():
            values[int(row[offset_column])] = row
    return values


async def _ingest_info(dataset: Dataset, block: _DataBlock) -> IngestInfo:
    event = block.event
    assert isinstance(event, AddData)
    state = await dataset.chain.state(block.hash)
    source_state = event.new_source_state
    name = source_state.source_name if source_state is not None else None
    if name is not None and name in state.push_sources:
        source = f"push source '{name}'"
    elif state.polling_source is not None and (name is None or not state.push_sources):
        source = _describe_fetch(state.polling_source.fetch)
    elif len(state.push_sources) == 1:
        source = f"push source '{next(iter(state.push_sources))}'"
    elif state.push_sources:
        source = "a push source (the block does not say which)"
    else:
        source = "committed without a declared source"
    block_record = await dataset.chain.get_block(block.hash)
    return IngestInfo(
        block_sequence=block.sequence,
        block_hash=str(block.hash),
        system_time=str(block_record.system_time),
        source=source,
        source_state=None
        if source_state is None
        else {
            "sourceName": source_state.source_name,
            "kind": source_state.kind,
            "value": source_state.value,
        },
    )


def _describe_fetch(fetch: object) -> str:
    if isinstance(fetch, FetchStepUrl):
        return f"polling source: {fetch.url}"
    if isinstance(fetch, FetchStepFilesGlob):
        return f"polling source: files {fetch.path}"
    if isinstance(fetch, FetchStepContainer):
        return f"polling source: container {fetch.image}"
    if isinstance(fetch, FetchStepMqtt):
        topics = ", ".join(t.path for t in fetch.topics)
        return f"polling source: MQTT {fetch.host}:{fetch.port} topics {topics}"
    if isinstance(fetch, FetchStepEthereumLogs):
        chain = f" chain {fetch.chain_id}" if fetch.chain_id is not None else ""
        return f"polling source: Ethereum logs{chain} from {fetch.node_url or 'a node'}"
    return f"polling source: {type(fetch).__name__}"


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
