"""The seam between odfd and its query engines: what every engine is asked and answers.

An engine runs one transaction of a derivative transform (the ODF engine contract: a
:class:`TransformRequest` in; a slice, watermark and checkpoint out) and a raw query over
Parquet files (``odfd sql``, provenance, a preprocess step of another engine). An engine that
can also ingest (:class:`IngestEngine`) turns one input file into a root dataset's next slice:
read, preprocess, merge with the history, order, write. What differs between engines that
callers must know (the SQL dialect provenance rewrites queries in, how a table name is quoted)
is a property of the engine, never a test of its name.

Engines are handed out already configured by :class:`verifier.engine.registry.Engines`, built
once per process; each lives in a package of its own (``verifier/engine/<name>/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import pyarrow as pa

from protocol.frozen import frozen_dataclass
from protocol.identity import DatasetId, Multihash
from protocol.model import Checkpoint, SqlQueryStep, Timestamp, TransformSql, Watermark
from verifier.engine.columns import Vocab
from verifier.engine.errors import TransformError, UnsupportedTransformError

if TYPE_CHECKING:
    from verifier.engine.output import WrittenSlice


@frozen_dataclass
class QueryTable:
    """A table a raw query reads: Parquet files (oldest first) registered under ``name``."""

    name: str
    paths: tuple[Path, ...]
    schema: pa.Schema | None
    """The table's schema (files lacking some of its columns read them as nulls); ``None``
    lets the engine take it from the files."""


@frozen_dataclass
class TransformInputSlice:
    """What one input contributes to a transaction."""

    dataset_id: DatasetId
    alias: str
    vocab: Vocab
    schema: pa.Schema | None
    """The input's data schema (from its SetDataSchema); ``None`` if it has never had data."""
    data_paths: tuple[Path, ...]
    """Slice files holding the offsets below, oldest first."""
    offset_interval: tuple[int, int] | None
    """Closed offset interval to read, ``None`` when no new records arrived."""
    explicit_watermarks: tuple[Watermark, ...] = ()


@frozen_dataclass
class TransformRequest:
    dataset_alias: str
    transform: TransformSql
    vocab: Vocab
    system_time: Timestamp
    next_offset: int
    inputs: tuple[TransformInputSlice, ...]
    prev_checkpoint: Path | None
    out_dir: Path
    """Where the data and checkpoint files are written (the caller moves them into the dataset)."""
    prev_watermark: Timestamp | None = None
    spill_dir: str | None = None
    dataset_schema: pa.Schema | None = None
    """The dataset's schema so far (``None`` before its first slice): a column it declares keeps
    the nullability it was declared with, so datasets written before an engine decided
    nullability from its plan keep their schema."""


@frozen_dataclass
class WrittenCheckpoint:
    """A checkpoint file an engine wrote, and what the block says about it."""

    path: Path
    physical_hash: Multihash
    size: int

    def as_checkpoint(self) -> Checkpoint:
        """The ``newCheckpoint`` of the block that commits this checkpoint."""
        return Checkpoint(physical_hash=self.physical_hash, size=self.size)


@frozen_dataclass
class TransformResult:
    schema: pa.Schema
    new_data: WrittenSlice | None
    new_watermark: Timestamp | None
    new_checkpoint: WrittenCheckpoint | None


@frozen_dataclass
class IngestInput:
    """The file an ingest reads, as the engine receives it.

    JSON documents, GeoJSON and shapefiles arrive already rewritten as one JSON object per line
    (``odfd.ingest.read``); ``path`` is then that file and ``source`` the one fetched or pushed,
    which errors name."""

    path: Path
    source: Path
    record_unit: str | None = None
    """What a converted file's lines are ("record", "feature"): a malformed one is named by
    number, since its line in ``source`` is unknown; ``None`` for a file read as it is."""


@frozen_dataclass
class IngestRequest:
    """One ingest transaction's engine work: a file in, the root dataset's next slice out."""

    dataset_alias: str
    input: IngestInput
    read: object
    """The source's read step (``ReadStep*``): format, options, declared schema."""
    preprocess: TransformSql | None
    preprocess_engine: Engine | None
    """The engine ``preprocess`` names (the registry's), when there is a preprocess step."""
    merge: object
    """The source's merge strategy (``MergeStrategy*``)."""
    vocab: Vocab
    dataset_schema: pa.Schema | None
    """The dataset's schema so far (``None`` before its first slice): its required columns stay
    required."""
    history: tuple[Path, ...]
    """The dataset's slice files, oldest first (empty when the merge strategy needs none)."""
    start_offset: int
    system_time: Timestamp
    source_event_time: Timestamp
    """The event time of records that carry none."""
    out_path: Path
    work: Path
    """The transaction's folder for intermediate files."""


@frozen_dataclass
class IngestResult:
    schema: pa.Schema
    """The slice's schema (an input without records still defines it)."""
    new_data: WrittenSlice | None


class Engine(Protocol):
    """A query engine odfd can run transforms and queries in. Its methods block: call them from
    a worker thread."""

    @property
    def name(self) -> str:
        """What a transform's ``engine`` field calls it (lower case)."""
        ...

    @property
    def sql_dialect(self) -> str:
        """The SQL dialect its queries are written in, as provenance's rewrite names it."""
        ...

    def quote_identifier(self, name: str) -> str:
        """``name`` as a table or column identifier of its SQL, kept exactly (dots, slashes)."""
        ...

    def run_transform(self, request: TransformRequest) -> TransformResult:
        """Runs one transaction; writes its slice and checkpoint under ``request.out_dir``."""
        ...

    def query(self, steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
        """Runs the query steps (named ones become views) over ``tables``; the result of the
        unnamed last step, rows in the order the engine produced them."""
        ...

    def start(self) -> None:
        """Starts what the engine runs on now rather than on first use (a daemon warming up)."""
        ...

    @property
    def running(self) -> bool:
        """Whether the engine holds process-wide resources (a JVM, a server session)."""
        ...

    def stop(self) -> None:
        """Releases them; the next use starts the engine again."""
        ...


@runtime_checkable
class IngestEngine(Engine, Protocol):
    """An engine that also ingests files into root datasets."""

    def ingest(self, request: IngestRequest) -> IngestResult | None:
        """Reads, preprocesses and merges ``request.input`` and writes the new slice at
        ``request.out_path``; ``None`` for an empty file whose columns nothing declares."""
        ...


def query_steps(transform: TransformSql) -> tuple[SqlQueryStep, ...]:
    """The ordered query steps of a transform (``query`` is shorthand for one unnamed step)."""
    if transform.queries:
        return tuple(transform.queries)
    if transform.query:
        return (SqlQueryStep(query=transform.query),)
    raise TransformError("the transform has neither `query` nor `queries`")


def validate_transform(
    transform: object, dataset: str, *, engine: str | None = None
) -> TransformSql:
    """Checks the transform is something odfd's engines run and, given ``engine`` (the name of
    the engine asked to run it), that it names that one; returns it typed. (Whether odfd has the
    engine it names is the registry's question.)"""
    if not isinstance(transform, TransformSql):
        raise UnsupportedTransformError(
            f"{dataset}: transform kind {type(transform).__name__} is not supported"
        )
    if engine is not None and transform.engine.lower() != engine:
        raise UnsupportedTransformError(
            f"{dataset}: the transform uses engine '{transform.engine}', but this engine runs "
            f"only '{engine}' transforms"
        )
    if transform.temporal_tables:
        names = ", ".join(t.name for t in transform.temporal_tables)
        raise UnsupportedTransformError(
            f"{dataset}: temporal tables ({names}) are a Flink feature that odfd's engines cannot run"
        )
    steps = query_steps(transform)
    if steps[-1].alias:
        raise TransformError(
            f"{dataset}: the last query step must have no alias (it is the output)"
        )
    return transform


def step_name(steps: Sequence[SqlQueryStep], number: int) -> str:
    """How errors name query step ``number`` (1-based): just "query" when there is one."""
    if len(steps) == 1:
        return "query"
    alias = steps[number - 1].alias
    return f"query step {number}" + (f" ({alias})" if alias else "")
