"""Answering query requests and checking proofs of answers (the node's ``/query`` and
``/verify``, ``odfd sql -o json``): the use cases under ``protocol.query``'s wire format.

A request names its tables by alias (every dataset of that alias the caller may see, at its
head) or pins them (``datasets: [{id, alias, blockHash}]``: that dataset, registered under that
alias, at that block). ``SqlDataFusion`` runs in-process and streams, so only ``skip + limit``
rows are ever produced; ``SqlSpark`` runs on the node's Spark (its local session, Connect server
or cluster). Either way the answer records the block each dataset was read at, which is what a
proof commits to and what ``verify`` re-executes at, so a proof made before new data arrived
still checks out.

Every query has a time limit and a cap on the rows it may return (``QueryLimits``, from
``[server]``); both refuse with a ``QueryRefusedError`` rather than letting one request hold the
node. Rendering and hashing are CPU-bound and run off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import re
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from odfd.app.batch_feed import BatchFeed
from odfd.app.projections import ProjectionError
from odfd.app.query import projected_tables, table_hint
from odfd.app.query_tables import read_aliases
from odfd.app.resource_types import PROJECTION
from odfd.coordinator.query import DatasetView, dataset_view
from odfd.errors import OdfdError
from protocol.errors import OdfError
from protocol.model import SqlQueryStep
from protocol.query import (
    DataFormat,
    DatasetBlockNotFound,
    DatasetNotFound,
    DatasetState,
    Include,
    QueryDialect,
    QueryRequest,
    QueryResponseWriter,
    ResponseSigner,
    ResponseSigningNotConfigured,
    SchemaFormat,
    VerifyRequest,
    VerifyResponse,
    check_commitment,
    check_output,
    output_hash,
    render_query_response,
    render_tail_output,
)
from storage.catalog.versioned_cache import VersionedCache
from storage.lru import Lru
from verifier.engine import errors as engine_errors
from verifier.engine.contract import QueryTable

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.config import ServerConfig
    from protocol.identity import DatasetId, Multihash
    from storage.catalog import DatasetRecord
    from storage.catalog.reader import CatalogReader
    from storage.workspace import Workspace
    from verifier.engine.datafusion.session import PlannedQuery, StreamingQuery

T = TypeVar("T")

Visible = Callable[["DatasetRecord"], bool]
"""Which datasets exist for the caller (a private dataset does not, without a read token)."""

DEFAULT_TIME_LIMIT = 600.0
DEFAULT_MAX_ROWS = 1_000_000

_ENGINE_OF = {QueryDialect.SQL_DATAFUSION: "datafusion", QueryDialect.SQL_SPARK: "spark"}
_UNKNOWN_TABLE = re.compile(r"table '[^']*' not found")
_PARSER_ERROR = re.compile(r'SQL error: ParserError\("(.*)"\)', re.DOTALL)
_PLANNING_PREFIXES = ("Schema error: ", "Error during planning: ")


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """What one query may cost: seconds of engine time and rows in its answer."""

    time_limit: float = DEFAULT_TIME_LIMIT
    max_rows: int = DEFAULT_MAX_ROWS


class AnswerError(OdfdError):
    """A query request this node cannot answer; the message is for the client."""


class BadQueryError(AnswerError):
    """The SQL does not parse or plan (syntax, unknown table, column or function), or the
    dialect is not one this node runs."""


class QueryRefusedError(AnswerError):
    """The query asks for more than this node allows (rows) or ran past its time limit."""


class QueryFailedError(AnswerError):
    """The engine accepted the query but failed running it (a bad cast, unreadable data)."""


class QueryDatasetNotFoundError(AnswerError):
    """A pinned dataset is not on this node (or not visible to the caller)."""

    def __init__(self, dataset_id: DatasetId) -> None:
        self.dataset_id = dataset_id
        super().__init__(f"Dataset not found: {dataset_id}")


class QueryBlockNotFoundError(AnswerError):
    """A pinned dataset does not hold the pinned block."""

    def __init__(self, dataset_id: DatasetId, block_hash: Multihash) -> None:
        self.dataset_id = dataset_id
        self.block_hash = block_hash
        super().__init__(f"Dataset {dataset_id} does not have a block {block_hash}")


SMALL_ANSWER_VALUES = 4_096
"""Values (rows x columns) of an answer small enough to render on the event loop."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A query's result: the rows the request asked for (after ``skip``, at most ``limit``),
    their schema and the datasets as the query read them."""

    request: QueryRequest
    datasets: tuple[DatasetState, ...]
    schema: pa.Schema
    batches: tuple[pa.RecordBatch, ...]
    rest: RowStream | None = None
    """The rows after ``batches`` when they are still being produced (``execute``'s
    ``stream_after``): only :func:`body_stream` renders such an answer, and closes it."""

    @property
    def num_rows(self) -> int:
        return sum(batch.num_rows for batch in self.batches)

    @property
    def is_small(self) -> bool:
        """Whether rendering it is well under a millisecond of work, cheaper than a trip to a
        worker thread: it may be rendered on the event loop."""
        values = self.num_rows * max(len(self.schema), 1)
        return self.rest is None and values <= SMALL_ANSWER_VALUES

    def render(self, signer: ResponseSigner | None = None) -> bytes:
        """The response body (``protocol.query.response``), signed when the request asks for a
        proof. Blocking and CPU-bound."""
        return render_query_response(
            self.request,
            datasets=self.datasets,
            schema=self.schema,
            batches=self.batches,
            signer=signer,
        )

    def render_output(self) -> bytes:
        """The ``output`` object alone (``{"data", "dataFormat", "schema", "schemaFormat"}``,
        what ``/{dataset}/tail`` answers, rows' keys in schema order as the reference's are
        there). Blocking and CPU-bound."""
        request = replace(self.request, include=frozenset()).with_implications()
        return render_tail_output(request, schema=self.schema, batches=self.batches)


@functools.cache
def _renderers() -> ThreadPoolExecutor:
    """The threads large answers' chunks are rendered in, one per core, shared by all answers
    (so concurrent exports never render on more threads than there are cores): rendering is
    mostly Arrow and numpy work that releases the GIL, so an answer rendered on every core
    keeps up with an engine that writes JSON on every core."""
    return ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="odfd-render")


async def body_stream(
    answer: Answer, signer: ResponseSigner | None = None, *, piece_bytes: int = 1 << 20
) -> AsyncGenerator[bytes | memoryview, None]:
    """The response body of ``answer`` as the writer's buffers, rendered off the event loop in
    pieces of about ``piece_bytes`` each while the piece before is sent (and, for an answer
    still being produced, while the engine produces the next rows), so a large answer is sent
    while the rest is still being computed and written. A piece's buffers are handed on as
    they are, never joined: the HTTP layer copies each into its chunked framing anyway, and
    joining them first would copy every byte of the answer once more. Errors that can be answered with a status (no signer, a result that
    cannot be rendered, a query that fails or runs out of time before the first piece) are
    raised before the first piece; after it, the body ends early with the error raised.

    A small answer (``Answer.is_small``) is written at once on the event loop: two thread trips
    would cost more than rendering it."""
    if answer.is_small:
        yield answer.render(signer)
        return
    feed = None if answer.rest is None else BatchFeed()
    producing = None if feed is None else asyncio.create_task(_produce(answer, feed))
    try:
        writer = await asyncio.to_thread(
            QueryResponseWriter,
            answer.request,
            datasets=answer.datasets,
            schema=answer.schema,
            signer=signer,
        )
        batches = answer.batches if feed is None else itertools.chain(answer.batches, feed)
        chunks = iter(writer.chunks(batches, _renderers()))

        def next_piece() -> list[bytes | memoryview]:
            pieces: list[bytes | memoryview] = []
            size = 0
            for chunk in chunks:
                pieces.append(chunk)
                size += memoryview(chunk).nbytes
                if size >= piece_bytes:
                    break
            return pieces

        def render_next() -> asyncio.Future[list[bytes | memoryview]]:
            future = asyncio.ensure_future(asyncio.to_thread(next_piece))
            future.add_done_callback(_retrieve)
            return future

        pending = render_next()
        try:
            while piece := await pending:
                pending = render_next()  # the next piece is rendered while this one is sent
                for buffer in piece:
                    yield buffer
        finally:
            pending.cancel()  # a client gone: the piece being rendered is dropped
    finally:
        if feed is not None and producing is not None:
            feed.stop()  # a thread waiting for rows gives up
            producing.cancel()
            await asyncio.gather(producing, return_exceptions=True)


async def _produce(answer: Answer, feed: BatchFeed) -> None:
    """Reads the rest of ``answer`` into ``feed``, then closes it (stopping the engine when it
    is given up early)."""
    assert answer.rest is not None
    try:
        while (batch := await answer.rest.next()) is not None:
            await feed.put(batch)
        feed.end()
    except AnswerError as error:
        feed.fail(error)
    finally:
        await answer.rest.close()


def _retrieve(future: asyncio.Future[list[bytes | memoryview]]) -> None:
    """Marks a piece's failure seen (it is raised where the piece is awaited, if it is)."""
    if not future.cancelled():
        future.exception()


def node_signer(node: Node) -> ResponseSigner | None:
    """The signer of the node's answers: the key ``[server] node_key`` names, else the
    workspace's identity key (``odfd init`` creates it); ``None`` on a node without one (it
    answers, but without proofs). Raises ``StorageError`` naming an unreadable key file."""
    from storage.keys import load_signing_key

    configured = node.config.server.node_key
    path = Path(configured) if configured is not None else node.keys.node_key_path
    try:
        stat = path.stat()
    except OSError:
        if configured is not None:
            load_signing_key(path)  # raises the StorageError naming the file
        return None
    version = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    kept = _SIGNERS.get(path)
    if kept is None or kept[0] != version:
        kept = _SIGNERS[path] = (version, ResponseSigner(load_signing_key(path)))
    return kept[1]


_SIGNERS: dict[Path, tuple[tuple[int, int, int], ResponseSigner]] = {}
"""Signers by key file, with the file's identity when read: a key replaced on disk is read
again, an unchanged one is not read per request."""


def limits_of(config: ServerConfig) -> QueryLimits:
    """The limits ``[server] query_timeout`` and ``query_max_rows`` set."""
    return QueryLimits(config.query_timeout, config.query_max_rows)


async def answer(
    node: Node,
    request: QueryRequest,
    *,
    signer: ResponseSigner | None = None,
    visible: Visible | None = None,
    limits: QueryLimits = QueryLimits(),
) -> bytes:
    """The response body of ``request`` over the datasets ``visible`` allows.

    Raises ``ResponseSigningNotConfigured`` (before running anything) when a proof is asked
    of a node without ``signer``, and the ``AnswerError``s."""
    if request.wants_proof and signer is None:
        raise ResponseSigningNotConfigured()
    result = await execute(node, request, visible=visible, limits=limits)
    return await asyncio.to_thread(result.render, signer)


async def verify(
    node: Node,
    request: VerifyRequest,
    *,
    visible: Visible | None = None,
    limits: QueryLimits = QueryLimits(),
) -> VerifyResponse:
    """Check a proof: its hashes and signature, then the output, by running its input again
    at the blocks it pins. A dataset or block this node does not have is an answer
    (``DatasetNotFound``, ``DatasetBlockNotFound``), not an error.

    Raises ``UnsupportedProofTypeError`` for a proof type other than ed25519, and the
    ``AnswerError``s of running the query."""
    problem = check_commitment(request)
    if problem is not None:
        return VerifyResponse(problem)
    reproduce = request.input.to_reproduce()
    try:
        result = await execute(node, reproduce, visible=visible, limits=limits)
    except QueryDatasetNotFoundError as error:
        return VerifyResponse(DatasetNotFound.of(error.dataset_id))
    except QueryBlockNotFoundError as error:
        return VerifyResponse(DatasetBlockNotFound.of(error.dataset_id, error.block_hash))
    actual = await asyncio.to_thread(
        output_hash, reproduce, schema=result.schema, batches=result.batches
    )
    return VerifyResponse(check_output(request, actual))


async def execute(
    node: Node,
    request: QueryRequest,
    *,
    visible: Visible | None = None,
    limits: QueryLimits = QueryLimits(),
    stream_after: int | None = None,
) -> Answer:
    """Run ``request``'s query: the rows it asks for and the datasets as read. With
    ``stream_after``, a DataFusion answer of more values (rows x columns) than that comes back
    with the rows read so far and the rest still to read (``Answer.rest``)."""
    engine = _ENGINE_OF.get(request.query_dialect)
    if engine is None:
        raise BadQueryError(
            f"query dialect {request.query_dialect.value} is not supported by this node "
            f"(it runs {', '.join(dialect.value for dialect in _ENGINE_OF)})"
        )
    if request.limit > limits.max_rows:
        raise QueryRefusedError(
            f"limit {request.limit} is above this node's cap of {limits.max_rows} rows per "
            "query ([server] query_max_rows); page through the result with skip and limit"
        )
    states, tables = await _tables(node, request, engine, visible)
    rest = None
    try:
        if request.query_dialect is QueryDialect.SQL_DATAFUSION:  # in-process: streamed
            schema, batches, rest = await _datafusion(
                node,
                request.query,
                tables,
                request.skip,
                request.limit,
                limits.time_limit,
                stream_after,
            )
        else:
            plain = [table for table, _ in tables]
            schema, batches = await _engine(node, engine, request, plain, limits.time_limit)
    except BadQueryError as error:
        raise await _with_table_hint(node, error, request, visible) from None
    return Answer(request, tuple(states), schema, tuple(batches), rest)


async def _with_table_hint(
    node: Node, error: BadQueryError, request: QueryRequest, visible: Visible | None
) -> BadQueryError:
    """``error`` with what to write instead when it names no table because a dataset's alias
    was written without its double quotes (``odfd sql``'s hint: ``did you mean
    "match.scores"?``), naming only datasets the caller may read."""
    if request.datasets is not None:
        aliases: list[str] = [pinned.alias for pinned in request.datasets]
    else:
        listing = await (await _kept_session(node)).catalog(node.workspace)
        aliases = [r.alias for r in listing.records if visible is None or visible(r)]
    hint = table_hint(str(error), aliases)
    return error if hint is None else BadQueryError(f"{error}; {hint}")


async def tail(
    node: Node,
    record: DatasetRecord,
    *,
    skip: int = 0,
    limit: int = 100,
    data_format: DataFormat = DataFormat.JSON_AOS,
    schema_format: SchemaFormat | None = None,
    limits: QueryLimits = QueryLimits(),
) -> Answer:
    """The dataset's last ``limit`` records after skipping the newest ``skip``, oldest first
    (``GET /{dataset}/tail``); a dataset without data has no rows and an empty schema."""
    from verifier.engine.datafusion.engine import quote_identifier

    if limit > limits.max_rows:
        raise QueryRefusedError(
            f"limit {limit} is above this node's cap of {limits.max_rows} rows per query "
            "([server] query_max_rows)"
        )
    view = await dataset_view(node.workspace.open_dataset(record.id))
    request = QueryRequest(
        query="", data_format=data_format, schema_format=schema_format, limit=limit
    )
    if view.head is None or view.schema is None:
        return Answer(request, (), pa.schema([]), ())
    table = quote_identifier(view.alias)
    offset = quote_identifier(view.vocab.offset)
    sql = (
        f"SELECT * FROM (SELECT * FROM {table} ORDER BY {offset} DESC LIMIT {limit} "
        f"OFFSET {skip}) ORDER BY {offset}"
    )
    tables = [(QueryTable(view.alias, view.paths, view.schema), str(view.head))]
    schema, batches, _ = await _datafusion(node, sql, tables, 0, limit, limits.time_limit)
    state = DatasetState(record.id, view.alias, view.head)
    return Answer(replace(request, query=sql), (state,), schema, tuple(batches))


async def _tables(
    node: Node, request: QueryRequest, engine: str, visible: Visible | None
) -> tuple[list[DatasetState], list[tuple[QueryTable, str]]]:
    """The tables the query reads, each with the block it is read at (pinned datasets as
    pinned; else the tables it names, parsed in ``engine``'s dialect, at their heads; and the
    ``Projection``s it names, over the same views of their inputs: ``odfd.app.query``'s
    registration), and the datasets read, directly or through a projection (what a proof pins,
    so ``/verify`` computes a projection at the same blocks)."""
    kept = await _kept_session(node)
    views_at = kept.views
    states: list[DatasetState] = []
    views: list[DatasetView] = []
    listing = await kept.catalog(node.workspace)
    if request.datasets is None:
        records = {
            record.alias: record for record in listing.records if visible is None or visible(record)
        }
        dialect = await _sql_dialect(node, engine)
        for alias in listing.read_aliases(request.query, dialect, tuple(records)):
            record = records[alias]
            if record.head is None:
                continue  # no data yet: no table
            view = await views_at.view(node.workspace, record.id, record.head)
            views.append(replace(view, alias=alias))
            states.append(DatasetState(record.id, alias, view.head))
        readable: Collection[str] = records.keys()
    else:
        records = {}
        for pinned in request.datasets:
            view = await _pinned_view(node, pinned, visible, views_at)
            views.append(replace(view, alias=pinned.alias))
            states.append(DatasetState(pinned.id, pinned.alias, view.head))
        readable = {view.alias for view in views}
    try:
        projected = (
            await projected_tables(
                node, request.query, readable, engine=engine, views={v.alias: v for v in views}
            )
            if listing.names_projection(request.query)
            else []
        )
    except ProjectionError as error:
        raise QueryFailedError(str(error)) from None
    read = {state.alias for state in states}
    for table in projected:
        for view in table.inputs:
            if view.alias not in read and view.head is not None and view.alias in records:
                read.add(view.alias)
                states.append(DatasetState(records[view.alias].id, view.alias, view.head))
    tables = [
        (QueryTable(view.alias, view.paths, view.schema), str(view.head))
        for view in views
        if view.head is not None
    ]
    return states, tables + [(table.table, table.version) for table in projected]


async def _pinned_view(
    node: Node, pinned: DatasetState, visible: Visible | None, views_at: _Views
) -> DatasetView:
    record = await node.workspace.try_resolve(str(pinned.id))
    if record is None or (visible is not None and not visible(record)):
        raise QueryDatasetNotFoundError(pinned.id)
    dataset = node.workspace.open_dataset(record.id)
    block = pinned.block_hash
    if block is None:
        block = record.head
    elif not views_at.holds(record.id, block) and not await dataset.blocks.contains(block):
        raise QueryBlockNotFoundError(pinned.id, block)
    try:
        if block is None:
            return await dataset_view(dataset)
        return await views_at.view(node.workspace, record.id, block)
    except OdfError as error:
        raise QueryFailedError(f"dataset {record.alias} cannot be read: {error}") from None


_DIALECTS: dict[str, str] = {}
"""Each engine's SQL dialect (``Engine.sql_dialect``), known once the engine was first built."""


async def _sql_dialect(node: Node, engine: str) -> str:
    dialect = _DIALECTS.get(engine)
    if dialect is None:  # in a worker thread: the engine's first use imports its library
        built = await asyncio.to_thread(node.engines.named, engine)
        dialect = _DIALECTS[engine] = built.sql_dialect
    return dialect


_KEPT_VIEWS = 256


class _Views:
    """What queries see of datasets at given blocks, kept between queries (reading a view walks
    the dataset's metadata chain: milliseconds, most of a small query's work).

    A view at a block never changes: the block's hash fixes the chain below it, hence the
    schema and the data files. So views are kept by dataset and block, and a dataset that moved
    is looked up at its new head, never served from an older one. The alias is the caller's to
    set (a dataset may be renamed, or pinned under another alias)."""

    def __init__(self, size: int = _KEPT_VIEWS) -> None:
        self._kept: Lru[tuple[DatasetId, Multihash], DatasetView] = Lru(size)

    def holds(self, dataset_id: DatasetId, block: Multihash) -> bool:
        """Whether the view of the dataset at ``block`` is kept (so the dataset has the block)."""
        return (dataset_id, block) in self._kept

    async def view(
        self, workspace: Workspace, dataset_id: DatasetId, block: Multihash
    ) -> DatasetView:
        """The dataset ``dataset_id`` at ``block`` (which it must hold)."""
        key = (dataset_id, block)
        view = self._kept.get(key)
        if view is not None:
            return view
        view = await dataset_view(workspace.open_dataset(dataset_id), pinned_block=block)
        if view.head == block:  # else the dataset lacks the block: nothing to keep
            self._kept.put(key, view)
        return view


_KEPT_READS = 256
_KEPT_SQL_CHARS = 4_096
"""Longer query texts are lexed each time (the kept ones stay small)."""


@dataclass(frozen=True, slots=True)
class _Listing:
    """What a query may name: the workspace's datasets and the names of its projections; and,
    while they are unchanged, which of them each query text read (lexing it is a tenth of a
    small query's time on the event loop)."""

    records: list[DatasetRecord]
    projections: tuple[str, ...]
    version: int | None
    """The catalog's data version listed (``None``: unknown, nothing kept)."""
    _reads: VersionedCache[tuple[str, str, tuple[str, ...]], list[str]] = field(
        default_factory=lambda: VersionedCache(_KEPT_READS)
    )

    def read_aliases(self, sql: str, dialect: str, aliases: tuple[str, ...]) -> list[str]:
        """``query_tables.read_aliases`` of ``aliases`` (those of the listed datasets the
        caller may see), kept by the query's text."""
        if len(sql) > _KEPT_SQL_CHARS:
            return read_aliases(sql, dialect, aliases)
        key = (sql, dialect, aliases)
        read = self._reads.get(key, self.version)
        if read is None:
            read = read_aliases(sql, dialect, aliases)
            self._reads.put(key, self.version, read)
        return list(read)

    def names_projection(self, sql: str) -> bool:
        """Whether ``sql``'s text holds a projection's name (else it reads none: the test
        ``read_aliases`` starts with)."""
        text = sql.lower()
        return any(name.lower() in text for name in self.projections)


_IN_MEMORY_BYTES = 1 << 20
"""Tables of a query whose files are this small are held in memory while the kept session
holds them (it holds only the tables of the query at hand)."""


class _KeptSession:
    """The node's DataFusion session for answers, kept between queries (a new session and its
    registrations cost milliseconds; planning in a kept one, tens of microseconds).

    It holds exactly the tables of the query being planned: a table is registered again only
    when the query reads it at another block (or another dataset under that alias), and tables
    the query does not read are dropped first, so no query sees a table another caller was
    allowed to read or pinned. Registering and planning are serialised by ``lock``; a query asked
    again over the same tables takes its kept plan without it (``kept_plan``), and building the
    physical plans and running them happen outside it, concurrently, each query on the files it
    was planned over. (A physical plan is not kept: in this DataFusion, executing one again
    can answer no rows.)"""

    def __init__(self) -> None:
        from verifier.engine.datafusion.session import QuerySession

        self.session = QuerySession(in_memory_bytes=_IN_MEMORY_BYTES)
        self.lock = asyncio.Lock()
        self.views = _Views()
        self._reader: CatalogReader | None = None
        self._listing: tuple[int, _Listing] | None = None

    async def catalog(self, workspace: Workspace) -> _Listing:
        """The workspace's datasets and projections, listed again only when the catalog
        changed: a commit by any connection moves the data version, which a connection of its
        own reads on the event loop in microseconds (a round trip to the catalog's thread costs
        two wake-ups)."""
        from storage.catalog.reader import CatalogReader

        if self._reader is None:
            self._reader = await CatalogReader.open(workspace.catalog.path)
        version = self._reader.data_version()
        if version is None or self._listing is None or self._listing[0] != version:
            records = await workspace.list_datasets()
            projections = [name for name, _ in await self._reader.specs(PROJECTION.schema)]
            listing = _Listing(records, tuple(projections), version)
            self._listing = None if version is None else (version, listing)
            return listing
        return self._listing[1]

    def plan(self, sql: str, tables: Sequence[tuple[QueryTable, str]]) -> PlannedQuery:
        """Blocking (registering reads the files' footers); call with ``lock`` held."""
        versions = {table.name: version for table, version in tables}
        for name in self.session.names - versions.keys():
            self.session.deregister(name)
        for table, version in tables:
            if self.session.version(table.name) != _registered_as(table, version):
                self.session.register(table, _registered_as(table, version))
        return self.session.plan(sql)

    def kept_plan(self, sql: str, tables: Sequence[tuple[QueryTable, str]]) -> PlannedQuery | None:
        """The plan of ``sql`` when the session holds exactly ``tables`` (no other, each at its
        version) and has planned ``sql`` since: a lookup on the event loop, without the lock or
        a worker thread (the common case of a query asked again over unchanged datasets).
        ``None`` while ``lock`` is held: the session may be half way through a change."""
        if self.lock.locked() or len(tables) != len(self.session.names):
            return None
        for table, version in tables:
            if self.session.version(table.name) != _registered_as(table, version):
                return None
        return self.session.kept_plan(sql)


def _registered_as(table: QueryTable, version: str) -> str:
    """What identifies a registration: the block and the files (a pinned alias may name
    another dataset at the same alias)."""
    return f"{version} {[str(path) for path in table.paths]}"


_SESSIONS: weakref.WeakKeyDictionary[Workspace, asyncio.Future[_KeptSession]] = (
    weakref.WeakKeyDictionary()
)


async def _kept_session(node: Node) -> _KeptSession:
    """The workspace's kept session, built in a worker thread the first time: building it
    imports DataFusion (a second of imports the event loop must not wait through). Requests
    arriving meanwhile wait for the same one."""
    building = _SESSIONS.get(node.workspace)
    if building is None or (building.done() and building.exception() is not None):
        building = asyncio.ensure_future(asyncio.to_thread(_KeptSession))
        _SESSIONS[node.workspace] = building
    return await asyncio.shield(building)


async def warm_up(node: Node) -> None:
    """Do in worker threads what a node's first query would otherwise do on the event loop:
    build the kept session, load the engine (its SQL dialect) and the SQL parser, and render a
    small answer of the common column types (their renderers' lazy imports). A server starts
    this when it starts, so its first query costs what any other does."""
    await _kept_session(node)
    await _sql_dialect(node, _ENGINE_OF[QueryDialect.SQL_DATAFUSION])
    await asyncio.to_thread(_render_sample)


def _render_sample() -> None:
    """Read the tables of a query and render an answer of one row of the common types."""
    read_aliases('SELECT * FROM (SELECT 1) AS "warm"', "datafusion", ["warm"])
    row = {
        "offset": pa.array([0], pa.int64()),
        "event_time": pa.array([0], pa.timestamp("ms", tz="UTC")),
        "price": pa.array([1.5], pa.float64()),
        "amount": pa.array([1], pa.decimal128(10, 2)),
        "name": pa.array(["warm"], pa.string()),
        "day": pa.array([0], pa.date32()),
    }
    batch = pa.RecordBatch.from_pydict(row)
    for data_format, schema_format in zip(DataFormat, SchemaFormat, strict=False):
        request = QueryRequest(
            "SELECT 1",
            data_format=data_format,
            include=frozenset({Include.SCHEMA}),
            schema_format=schema_format,
        )
        Answer(request, (), batch.schema, (batch,)).render()


async def _datafusion(
    node: Node,
    sql: str,
    tables: Sequence[tuple[QueryTable, str]],
    skip: int,
    limit: int,
    time_limit: float,
    stream_after: int | None = None,
) -> tuple[pa.Schema, list[pa.RecordBatch], RowStream | None]:
    """Stream the result, keeping rows ``skip`` to ``skip + limit``; the engine stops there.
    ``tables`` are the query's tables with the block each is read at. With ``stream_after``,
    once more values (rows x columns) than that were read, the rest is returned unread as a
    :class:`RowStream` (the caller's to read or close)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + time_limit
    kept = await _kept_session(node)

    def start(planned: PlannedQuery) -> StreamingQuery:
        query = planned.stream()
        try:
            query.start()
        except BaseException:
            query.close()
            raise
        return query

    planned = kept.kept_plan(sql, tables)
    if planned is None:
        await _within(kept.lock.acquire(), deadline, time_limit)
        planning = asyncio.ensure_future(asyncio.to_thread(kept.plan, sql, tables))
        planning.add_done_callback(lambda _: kept.lock.release())  # it cannot be interrupted
        try:
            planned = await _within(asyncio.shield(planning), deadline, time_limit)
        except engine_errors.TransformError as error:
            raise _bad_query(error) from None
    if planned.bounded:  # all of it in one worker-thread call, at a third of the engine's CPU
        running = asyncio.ensure_future(asyncio.to_thread(planned.collect))
        try:
            collected = await _within(asyncio.shield(running), deadline, time_limit)
        except engine_errors.QueryExecutionError as error:
            raise QueryFailedError(str(error)) from None
        return planned.schema, _rows(collected, skip, limit), None
    # Outside the lock: building the physical plan is most of a small query's engine time, and
    # queries planned over the session's tables run at once, each on its own files.
    starting = asyncio.ensure_future(asyncio.to_thread(start, planned))
    try:
        query = await _within(asyncio.shield(starting), deadline, time_limit)
    except engine_errors.TransformError as error:
        raise _bad_query(error) from None
    except QueryRefusedError:
        starting.add_done_callback(_close_planned)
        raise
    rows = RowStream(query, skip, limit, deadline, time_limit)
    read: list[pa.RecordBatch] = []
    values, width = 0, max(len(query.schema), 1)
    try:
        while (batch := await rows.next()) is not None:
            read.append(batch)
            values += batch.num_rows * width
            if stream_after is not None and values > stream_after:
                return query.schema, read, rows
    except BaseException:
        await rows.close()
        raise
    await rows.close()
    return query.schema, read, None


def _rows(batches: list[pa.RecordBatch], skip: int, limit: int) -> list[pa.RecordBatch]:
    """The rows ``skip`` to ``skip + limit`` of ``batches``."""
    kept = []
    for batch in batches:
        if limit <= 0:
            break
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        batch = batch.slice(skip, limit)
        skip = 0
        limit -= batch.num_rows
        kept.append(batch)
    return kept


class RowStream:
    """The rest of a DataFusion answer, batch by batch, within the query's time limit and its
    ``skip`` and ``limit``; :meth:`close` stops the engine (in a worker thread, unless the
    stream had ended) and must be awaited once it is no longer read."""

    def __init__(
        self, query: StreamingQuery, skip: int, limit: int, deadline: float, time_limit: float
    ) -> None:
        self._query = query
        self._skip, self._wanted = skip, limit
        self._deadline, self._time_limit = deadline, time_limit
        self._ended = False

    async def next(self) -> pa.RecordBatch | None:
        """The next batch of the answer's rows, ``None`` after the last. Raises
        ``QueryRefusedError`` past the time limit, ``QueryFailedError`` when the engine fails."""
        while self._wanted > 0:
            try:
                batch = await _within(self._query.next_batch(), self._deadline, self._time_limit)
            except engine_errors.QueryExecutionError as error:
                raise QueryFailedError(str(error)) from None
            if batch is None:
                self._ended = True
                return None
            if self._skip >= batch.num_rows:
                self._skip -= batch.num_rows
                continue
            batch = batch.slice(self._skip, self._wanted)
            self._skip = 0
            self._wanted -= batch.num_rows
            return batch
        return None

    async def close(self) -> None:
        if self._ended:
            self._query.close()  # nothing left running to stop
        else:
            await asyncio.to_thread(self._query.close)


async def _within(work: Awaitable[T], deadline: float, time_limit: float) -> T:
    """``work``'s result, or ``QueryRefusedError`` once the query's deadline has passed
    (awaited in this task: no task of its own per step, as ``wait_for`` would make)."""
    try:
        async with asyncio.timeout_at(deadline):
            return await work
    except TimeoutError:
        raise QueryRefusedError(
            f"the query ran past this node's time limit of {time_limit:g} s and was "
            "stopped ([server] query_timeout)"
        ) from None


def _close_planned(planning: asyncio.Future[StreamingQuery]) -> None:
    """Drops a query whose planning ended after its request gave up, in a worker thread (its
    execution was started: dropping it stops the engine's tasks)."""
    if not planning.cancelled() and planning.exception() is None:
        asyncio.get_running_loop().run_in_executor(None, planning.result().close)


async def _engine(
    node: Node, engine: str, request: QueryRequest, tables: list[QueryTable], time_limit: float
) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """Run the query whole on another engine (Spark) and keep the asked-for rows."""

    def run() -> pa.Table:
        return node.engines.named(engine).query([SqlQueryStep(query=request.query)], tables)

    try:
        table = await asyncio.wait_for(asyncio.to_thread(run), time_limit)
    except TimeoutError:
        raise QueryRefusedError(
            f"the query ran past this node's time limit of {time_limit:g} s "
            "([server] query_timeout)"
        ) from None
    except engine_errors.TransformError as error:
        raise _bad_query(error) from None
    except engine_errors.VerifierError as error:
        raise QueryFailedError(str(error)) from None
    table = table.slice(request.skip, request.limit)
    return table.schema, table.to_batches()


def _bad_query(error: engine_errors.TransformError) -> AnswerError:
    """The engine's complaint in the reference's words (DataFusion's category prefixes off)."""
    text = str(error).removeprefix("query is invalid: ")
    parser = _PARSER_ERROR.fullmatch(text)
    if parser:
        text = f"sql parser error: {parser.group(1)}"
    for prefix in _PLANNING_PREFIXES:
        text = text.removeprefix(prefix)
    if isinstance(error, engine_errors.InvalidQueryError) or _UNKNOWN_TABLE.search(text):
        return BadQueryError(text)
    return QueryFailedError(text)
