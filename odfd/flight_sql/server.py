"""The Flight SQL server: Flight RPCs in, :class:`~odfd.flight_sql.service.QueryService` calls out.

``pyarrow.flight`` runs each call on one of gRPC's threads; the service's coroutines run on the
node's event loop, handed over with :func:`asyncio.run_coroutine_threadsafe`. While a call waits
it watches the client: a client that went away (or whose own deadline passed) cancels its query,
and so does a server that is shutting down.

Statement queries are planned by GetFlightInfo, whose ticket carries the SQL and a digest of
the announced schema; DoGet runs the plan GetFlightInfo kept for the ticket
(:mod:`odfd.flight_sql.tickets`), or plans the SQL again over the datasets as they are then and
refuses to stream a result whose schema is not the one announced. Results stream batch by
batch: one coroutine on the loop opens the query and hands its batches to the call's thread
(:mod:`odfd.flight_sql.channel`), computing the next while one is sent; the server holds at most
four batches per query, never the whole result.

Plans are kept by subject, SQL and parameters while the node is unchanged
(:mod:`storage.catalog.versioned_cache`): the ADBC driver prepares every statement it runs and
then asks for its FlightInfo, and a dashboard asks the same queries again and again; each of
those would otherwise plan on the node's loop, through the catalog and the authorization
decision.
A kept plan is the one the node would make now (any catalog commit or settings reload drops
them all), so its schema is the one the stream will have.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import hashlib
import json
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from odfd.flight_sql import catalog, messages, session_options, sql_info, status
from odfd.flight_sql.auth import Authenticator, Caller, Sessions, TokenResolver
from odfd.flight_sql.channel import Channel, Pending
from odfd.flight_sql.parameters import MixedPlaceholdersError, numbered
from odfd.flight_sql.service import (
    DataUnavailableError,
    PlannedQuery,
    QueryError,
    QueryService,
    QueryStream,
    QueryTimeoutError,
    Subject,
    TableInfo,
    UnknownTableError,
)
from odfd.flight_sql.tickets import PlannedTickets
from storage.catalog.versioned_cache import Version, VersionedCache, unversioned
from storage.lru import Lru

T = TypeVar("T")

_POLL_SECONDS = 0.05
"""How often a waiting call looks whether its client went away."""

_CREATE_PREPARED = "CreatePreparedStatement"
_CLOSE_PREPARED = "ClosePreparedStatement"
_CLOSE_SESSION = "CloseSession"
_CANCEL_FLIGHT_INFO = "CancelFlightInfo"
_CANCEL_QUERY = "CancelQuery"
_KEPT_CANCELLATIONS = 10_000
"""Cancelled tickets remembered (a DoGet of one after its cancel answers CANCELLED)."""
KEPT_PLANS = 1_000
"""Plans kept for statements asked again (the least recently used goes first)."""
_CATALOG_COMMANDS = (
    "CommandGetSqlInfo",
    "CommandGetCatalogs",
    "CommandGetDbSchemas",
    "CommandGetTables",
    "CommandGetTableTypes",
    "CommandGetPrimaryKeys",
    "CommandGetExportedKeys",
    "CommandGetImportedKeys",
)
_READ_ONLY = "this server is read-only (no updates, ingest or transactions)"
_HINTS = {
    "CommandGetCrossReference": "datasets declare no keys",
    "CommandGetXdbcTypeInfo": "the types are in each table's schema (CommandGetTables)",
    "CommandStatementSubstraitPlan": "this server takes SQL (CommandStatementQuery)",
    "CreatePreparedSubstraitPlan": "this server takes SQL (CreatePreparedStatement)",
}
"""What odfd adds to the reference's words for a command or action it does not offer."""


class _AcceptHandshake(flight.ServerAuthHandler):
    """Lets every handshake through to :class:`Authenticator`, which reads its headers (without
    an auth handler pyarrow answers the handshake UNIMPLEMENTED)."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> bytes:
        return b""


class FlightSqlServer(flight.FlightServerBase):
    """Serves ``service`` at ``location`` (``grpc://host:port``) until :meth:`close`."""

    def __init__(
        self,
        location: str,
        service: QueryService,
        loop: asyncio.AbstractEventLoop,
        *,
        resolve: TokenResolver,
        time_limit: float | Callable[[], float] = 600.0,
        sessions: Sessions | None = None,
        version: Version = unversioned,
        allow_anonymous: Callable[[], bool] = lambda: True,
    ) -> None:
        """``version``: the node's version now, which the server's caches of plans and token
        subjects are kept by (default: nothing is cached); ``allow_anonymous``: whether
        anonymous sessions are served now."""
        status.install()
        self._service = service
        self._loop = loop
        self._time_limit_of = time_limit if callable(time_limit) else lambda: time_limit
        """The query time limit now (a daemon's reload changes it)."""
        self._sessions = sessions or Sessions()
        self._closing = threading.Event()
        self._cancel_lock = threading.Lock()
        self._cancelled: Lru[bytes, bool] = Lru(_KEPT_CANCELLATIONS)
        self._tickets = PlannedTickets()
        self._version = version
        self._plans: VersionedCache[_PlanKey, _Plan] = VersionedCache(KEPT_PLANS)
        super().__init__(
            location,
            auth_handler=_AcceptHandshake(),
            middleware={
                Authenticator.KEY: Authenticator(
                    self._sessions, resolve, loop, version, allow_anonymous
                )
            },
        )

    def close(self) -> None:
        """Stops serving: running queries are cancelled, then calls drain (blocking)."""
        self._closing.set()
        self.shutdown()

    # --- RPCs ------------------------------------------------------------------------------------

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        schema, ticket = self._describe(context, descriptor)
        endpoint = flight.FlightEndpoint(ticket, [])
        return flight.FlightInfo(schema, descriptor, [endpoint], -1, -1)

    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        return flight.SchemaResult(self._describe(context, descriptor, fetched=False)[0])

    def do_get(
        self, context: flight.ServerCallContext, ticket: flight.Ticket
    ) -> flight.FlightDataStream:
        name, message = _unpack(ticket.ticket, "ticket")
        caller = _caller(context)
        if name == "TicketStatementQuery":
            sql, digest, parameters = _decode_handle(message.statement_handle)
            return self._run(context, caller, ticket.ticket, sql, parameters, digest)
        if name == "CommandPreparedStatementQuery":  # a prepared statement's own ticket
            statement = self._sessions.statement(caller.token, message.prepared_statement_handle)
            return self._run(context, caller, ticket.ticket, statement.sql, statement.parameters)
        if name in _CATALOG_COMMANDS:
            return flight.RecordBatchStream(self._catalog_result(context, caller, name, message))
        raise _unimplemented(name, messages.UNIMPLEMENTED_GET, "do_get")

    def _run(
        self,
        context: flight.ServerCallContext,
        caller: Caller,
        ticket: bytes,
        sql: str,
        parameters: pa.RecordBatch | None,
        digest: str | None = None,
    ) -> flight.FlightDataStream:
        """Streams ``sql``'s result: the plan GetFlightInfo kept for ``ticket``, or planned
        now; refused when ``digest`` (of the schema announced) no longer matches."""
        opening = self._service.execute(
            caller.subject,
            sql,
            _bound(parameters),
            time_limit=self._time_limit_of(),
            planned=self._tickets.take(ticket, caller.subject),
        )
        channel: Channel[_Produced] = Channel(self._loop)
        producing = asyncio.run_coroutine_threadsafe(_produce(opening, channel), self._loop)
        try:
            opened = self._take(context, channel, ticket)
            assert isinstance(opened, _Opened)
            stream = opened.stream
            if digest is not None and _digest(stream.schema) != digest:
                raise status.InvalidArgument(
                    "the datasets this query reads changed their schema since it was "
                    "planned; run it again"
                )
        except BaseException:
            producing.cancel()
            raise
        batches = self._stream(context, channel, producing, stream.schema, ticket)
        weakref.finalize(batches, producing.cancel)  # a stream never read stops too
        return flight.GeneratorStream(stream.schema, batches)

    def do_action(
        self, context: flight.ServerCallContext, action: flight.Action
    ) -> Iterator[flight.Result]:
        caller = _caller(context)
        body = action.body.to_pybytes() if action.body is not None else b""
        if action.type == _CREATE_PREPARED:
            request = _expect(body, "ActionCreatePreparedStatementRequest")
            sql = _numbered(request.query)
            planned = self._plan(context, caller, sql).query
            handle = self._sessions.add_statement(caller.token, sql)
            result = messages.new(
                "ActionCreatePreparedStatementResult",
                prepared_statement_handle=handle,
                dataset_schema=planned.schema.serialize().to_pybytes(),
                parameter_schema=(  # none: empty, as the protocol says
                    planned.parameters.serialize().to_pybytes() if planned.parameters else b""
                ),
            )
            return iter([flight.Result(messages.pack(result))])
        if action.type == _CLOSE_PREPARED:
            request = _expect(body, "ActionClosePreparedStatementRequest")
            self._sessions.remove_statement(caller.token, request.prepared_statement_handle)
            return iter([])
        if action.type == _CLOSE_SESSION:
            self._sessions.close(caller.token)
            return iter([])
        if action.type == session_options.GET:
            return iter([flight.Result(session_options.get_result())])
        if action.type == session_options.SET:
            try:
                return iter([flight.Result(session_options.set_result(body))])
            except messages.MessageError as err:
                raise status.InvalidArgument(f"the action body is {err}") from None
        if action.type == _CANCEL_FLIGHT_INFO:
            request = _parse("CancelFlightInfoRequest", body)
            outcome = self._cancel(request.info)
            result = messages.new("CancelFlightInfoResult", status=outcome)
            return iter([flight.Result(result.SerializeToString())])
        if action.type == _CANCEL_QUERY:
            request = _expect(body, "ActionCancelQueryRequest")
            outcome = self._cancel(request.info)
            return iter(
                [
                    flight.Result(
                        messages.pack(messages.new("ActionCancelQueryResult", result=outcome))
                    )
                ]
            )
        reference = messages.UNIMPLEMENTED_ACTIONS.get(action.type)
        if reference is not None:
            hint = _HINTS.get(action.type, _READ_ONLY)
            raise status.Unimplemented(f"{reference}; {hint}")
        raise status.InvalidArgument(  # the reference's words first
            f"do_action: The defined request is invalid: {json.dumps(action.type)}; the actions "
            "offered are " + ", ".join(name for name, _ in self.list_actions(context))
        )

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [
            (_CREATE_PREPARED, "prepare a query; its handle runs it with GetFlightInfo"),
            (_CLOSE_PREPARED, "forget a prepared statement"),
            (_CLOSE_SESSION, "end this session and forget its prepared statements"),
            (session_options.GET, "the current catalog and schema (odf, odf)"),
            (session_options.SET, "accepts the current catalog and schema as they are"),
            (_CANCEL_FLIGHT_INFO, "stop a query whose FlightInfo this server answered"),
            (_CANCEL_QUERY, "stop a query (Flight SQL's older form of CancelFlightInfo)"),
        ]

    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        """Binds parameters to a prepared statement (one row: its placeholders' values)."""
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise status.InvalidArgument("expected a Flight SQL command descriptor, got a path")
        name, message = _unpack(descriptor.command, "command")
        if name != "CommandPreparedStatementQuery":
            raise _unimplemented(name, messages.UNIMPLEMENTED_PUT, "do_put")
        caller = _caller(context)
        handle = message.prepared_statement_handle
        self._sessions.statement(caller.token, handle)  # refused before reading the data
        try:
            table = reader.read_all()
        except pa.ArrowException as err:
            raise status.InvalidArgument(f"the parameters cannot be read: {err}") from None
        if table.num_rows > 1:
            raise status.InvalidArgument(
                f"bind one row of parameters per execution of a query, not {table.num_rows}"
            )
        batches = table.combine_chunks().to_batches()
        self._sessions.bind(caller.token, handle, batches[0] if table.num_rows else None)
        result = messages.new("DoPutPreparedStatementResult", prepared_statement_handle=handle)
        writer.write(pa.py_buffer(result.SerializeToString()))  # unwrapped, as clients read it

    def do_exchange(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        raise status.Unimplemented("Not yet implemented (DoExchange is not offered)")

    def list_flights(self, context: Any, criteria: Any) -> Iterator[flight.FlightInfo]:
        raise status.Unimplemented("Not yet implemented (ListFlights: use CommandGetTables)")

    # --- describing and answering commands -------------------------------------------------------

    def _describe(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        *,
        fetched: bool = True,
    ) -> tuple[pa.Schema, bytes]:
        """The schema of what a command answers, and the ticket that fetches it (its plan kept
        for the DoGet when the ticket will be ``fetched``)."""
        if descriptor.descriptor_type != flight.DescriptorType.CMD:
            raise status.InvalidArgument("expected a Flight SQL command descriptor, got a path")
        name, message = _unpack(descriptor.command, "command")
        caller = _caller(context)
        parameters = None
        if name == "CommandStatementQuery":
            planned = self._plan(context, caller, _numbered(message.query))
        elif name == "CommandPreparedStatementQuery":
            statement = self._sessions.statement(caller.token, message.prepared_statement_handle)
            parameters = statement.parameters
            planned = self._plan(context, caller, statement.sql, parameters)
        elif name in _CATALOG_COMMANDS:
            return _catalog_schema(name, message), descriptor.command
        else:
            raise _unimplemented(name, messages.UNIMPLEMENTED_INFO, "get_flight_info")
        handle = _encode_handle(planned, parameters)
        ticket = messages.pack(messages.new("TicketStatementQuery", statement_handle=handle))
        if fetched:
            self._tickets.keep(ticket, caller.subject, planned.query)
        return planned.query.schema, ticket

    def _plan(
        self,
        context: flight.ServerCallContext,
        caller: Caller,
        sql: str,
        parameters: pa.RecordBatch | None = None,
    ) -> _Plan:
        """``sql`` planned for ``caller``: kept from an earlier call while the node is
        unchanged, else planned on the node's loop."""
        bound = _bound(parameters)
        key = (caller.subject, sql, _parameters_key(bound))
        version = self._version()
        kept = self._plans.get(key, version)
        if kept is not None:
            return kept
        query = self._wait(
            context,
            self._service.plan(caller.subject, sql, bound),
            time_limit=self._time_limit_of(),
        )
        planned = _Plan(query, _digest(query.schema))
        self._plans.put(key, version, planned)
        return planned

    def _system_schema(
        self, context: flight.ServerCallContext, caller: Caller, table: str, command: Any
    ) -> pa.Schema:
        """The schema of ``information_schema``'s view ``table`` as the engine plans it, when
        ``command`` asks for schemas (planned once while the node is unchanged)."""
        if not command.include_schema:
            return pa.schema([])
        sql = f"select * from {catalog.INFORMATION_SCHEMA}.{table}"
        return self._plan(context, caller, sql).query.schema

    def _cancel(self, info: bytes) -> int:
        """Marks the tickets of a FlightInfo this server answered as cancelled: a running query
        of theirs stops, a later DoGet of them answers CANCELLED."""
        try:
            endpoints = flight.FlightInfo.deserialize(info).endpoints
        except (pa.ArrowException, ValueError, TypeError):
            raise status.InvalidArgument("the request holds no FlightInfo") from None
        tickets = [endpoint.ticket.ticket for endpoint in endpoints]
        if not tickets or not all(_is_statement(ticket) for ticket in tickets):
            return messages.NOT_CANCELLABLE
        with self._cancel_lock:
            for ticket in tickets:
                self._cancelled.put(ticket, True)
        return messages.CANCELLED

    def _catalog_result(
        self, context: flight.ServerCallContext, caller: Caller, name: str, message: Any
    ) -> pa.Table:
        if name == "CommandGetSqlInfo":
            return sql_info.sql_info(message.info, int(self._sessions.idle_timeout * 1000))
        if name == "CommandGetCatalogs":
            return catalog.catalogs()
        if name == "CommandGetDbSchemas":
            return catalog.db_schemas(message)
        if name == "CommandGetTables":
            infos = self._wait(context, self._service.tables(caller.subject))
            system = [
                TableInfo(table, self._system_schema(context, caller, table, message))
                for table in catalog.system_tables(message)
            ]
            return catalog.tables(message, infos, system)
        if name == "CommandGetTableTypes":
            return catalog.table_types()
        return catalog.no_keys(_catalog_schema(name, message))

    # --- waiting on the event loop ---------------------------------------------------------------

    def _wait(
        self,
        context: flight.ServerCallContext,
        work: Coroutine[Any, Any, T],
        *,
        time_limit: float | None = None,
        ticket: bytes | None = None,
    ) -> T:
        """``work``'s result on the node's loop; gives up (cancelling it) when the client goes
        away, the server closes, ``time_limit`` passes or ``ticket`` is cancelled. Service
        errors become statuses."""
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        return self._result(context, future, time_limit, ticket)

    def _result(
        self,
        context: flight.ServerCallContext,
        future: concurrent.futures.Future[T],
        time_limit: float | None = None,
        ticket: bytes | None = None,
    ) -> T:
        deadline = None if time_limit is None else time.monotonic() + time_limit
        while True:
            try:
                return future.result(timeout=_POLL_SECONDS)
            except concurrent.futures.TimeoutError:
                pass
            except concurrent.futures.CancelledError:
                raise status.Cancelled("the query was cancelled") from None
            except QueryError as err:
                raise _status_of(err, _caller(context).subject) from None
            if context.is_cancelled():
                future.cancel()
                raise status.Cancelled("the client cancelled the call or went away")
            if ticket is not None and ticket in self._cancelled:
                future.cancel()
                raise status.Cancelled("the query was cancelled (CancelFlightInfo)")
            if self._closing.is_set():
                future.cancel()
                raise status.Unavailable("the server is shutting down")
            if deadline is not None and time.monotonic() > deadline:
                future.cancel()
                raise status.DeadlineExceeded(
                    f"planning the query took longer than its time limit of {time_limit:g} s"
                )

    def _take(
        self, context: flight.ServerCallContext, channel: Channel[_Produced], ticket: bytes
    ) -> _Produced:
        """The next thing the query's producer put, waiting for it as :meth:`_result` waits."""
        while True:
            try:
                item = channel.take(_POLL_SECONDS)
            except (asyncio.CancelledError, concurrent.futures.CancelledError):
                raise status.Cancelled("the query was cancelled") from None
            except QueryError as err:
                raise _status_of(err, _caller(context).subject) from None
            if not isinstance(item, Pending):
                return item
            if context.is_cancelled():
                raise status.Cancelled("the client cancelled the call or went away")
            if ticket in self._cancelled:
                raise status.Cancelled("the query was cancelled (CancelFlightInfo)")
            if self._closing.is_set():
                raise status.Unavailable("the server is shutting down")

    def _stream(
        self,
        context: flight.ServerCallContext,
        channel: Channel[_Produced],
        producing: concurrent.futures.Future[None],
        schema: pa.Schema,
        ticket: bytes,
    ) -> Iterator[pa.RecordBatch]:
        """The query's batches as its producer puts them. Empty batches are skipped (JDBC
        reads a result with some as empty) but an empty result sends one."""
        sent = False
        try:
            while True:
                batch = self._take(context, channel, ticket)
                if batch is None:
                    break
                assert isinstance(batch, pa.RecordBatch)
                if batch.num_rows:
                    sent = True
                    yield batch
            if not sent:
                yield pa.RecordBatch.from_pylist([], schema)
        finally:  # the client's answer is complete or abandoned: the query is released
            producing.cancel()


@dataclass(frozen=True, slots=True)
class _Opened:
    stream: QueryStream


_Produced: TypeAlias = "_Opened | pa.RecordBatch | None"
"""What a query's producer puts: the opened stream, then its batches, then ``None``."""


async def _produce(opening: Coroutine[Any, Any, QueryStream], channel: Channel[_Produced]) -> None:
    """Opens the query, puts its stream and then its batches into ``channel`` as the consumer
    takes them (see :mod:`odfd.flight_sql.channel`); closes the query when it ends, fails or
    is cancelled."""
    stream = None
    try:
        stream = await opening
        channel.put(_Opened(stream))
        while True:
            await channel.space()
            batch = await stream.next_batch()
            channel.put(batch)
            if batch is None:
                return
    except QueryError as err:  # the consumer answers it as a status
        channel.fail(err)
    except BaseException as err:  # cancelled (the consumer has gone), or a bug
        channel.fail(err)
        raise
    finally:
        if stream is not None:
            await stream.close()


ANONYMOUS_NOT_FOUND = (
    "; this session is anonymous: a private dataset is a table only for a token that may read "
    "it (one of `odfd account token create` on the node), sent as kamu.connect(URL, "
    "token=TOKEN) sends it, or as the password of any user"
)
"""Added to an anonymous caller's "table not found", whatever the name (a private dataset's or
none): it never tells whether a private dataset of that name exists."""


def _status_of(err: QueryError, subject: Subject) -> Exception:
    """The gRPC status of a service error; an anonymous caller's unknown table says how a
    private dataset is read, unless the message already names the readable table meant."""
    if isinstance(err, UnknownTableError):
        message = str(err)
        if subject.account is None and not err.suggested:
            message += ANONYMOUS_NOT_FOUND
        return status.NotFound(message)
    if isinstance(err, QueryTimeoutError):
        return status.DeadlineExceeded(str(err))
    if isinstance(err, DataUnavailableError):
        return status.Unavailable(str(err))
    return status.InvalidArgument(str(err))  # InvalidQueryError, QueryFailedError


def _caller(context: flight.ServerCallContext) -> Caller:
    middleware = context.get_middleware(Authenticator.KEY)
    assert middleware is not None  # the authenticator refuses calls it cannot attribute
    caller: Caller = middleware.caller
    return caller


def _unpack(data: bytes, what: str) -> tuple[str, Any]:
    try:
        return messages.unpack(data)
    except messages.MessageError as err:
        raise status.InvalidArgument(f"the {what} is {err}") from None


def _expect(body: bytes, name: str) -> Any:
    found, message = _unpack(body, "action body")
    if found != name or message is None:
        raise status.InvalidArgument(f"the action body must be a {name}, not a {found}")
    return message


def _catalog_schema(name: str, message: Any) -> pa.Schema:
    if name == "CommandGetSqlInfo":
        return sql_info.SCHEMA
    if name == "CommandGetCatalogs":
        return catalog.CATALOGS_SCHEMA
    if name == "CommandGetDbSchemas":
        return catalog.DB_SCHEMAS_SCHEMA
    if name == "CommandGetTables":
        return catalog.tables_schema(message)
    if name == "CommandGetTableTypes":
        return catalog.TABLE_TYPES_SCHEMA
    if name == "CommandGetPrimaryKeys":
        return catalog.PRIMARY_KEYS_SCHEMA
    return catalog.KEYS_SCHEMA  # exported and imported keys


def _unimplemented(name: str, known: dict[str, str], call: str) -> Exception:
    """UNIMPLEMENTED for a command ``call`` does not take, in the reference's words: its own for
    the commands it names, else its server library's (the command's type URL), then odfd's."""
    reference = known.get(name)
    if reference is not None:
        return status.Unimplemented(f"{reference}; {_HINTS.get(name, _READ_ONLY)}")
    return status.Unimplemented(
        f"{call}: The defined request is invalid: {messages.type_url(name)}; {name} is not a "
        f"command {call} takes"
    )


_PlanKey = tuple[Subject, str, tuple[tuple[str, str], ...]]
"""Who plans, the SQL, and its parameters (by their values' text, types included)."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """A plan, and the digest of its schema its tickets carry."""

    query: PlannedQuery
    digest: str


def _parameters_key(parameters: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, repr(value)) for name, value in (parameters or {}).items()))


def _encode_handle(planned: _Plan, parameters: pa.RecordBatch | None) -> bytes:
    """A statement ticket's handle: the SQL, its bound parameters (Arrow IPC), its announced
    schema's digest and a nonce that tells two tickets of one query apart (for cancelling).
    Opaque to the client; a forged one is only another query, checked like any other."""
    document = {"sql": planned.query.sql, "schema": planned.digest, "id": secrets.token_hex(8)}
    if parameters is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, parameters.schema) as writer:
            writer.write_batch(parameters)
        document["parameters"] = base64.b64encode(sink.getvalue().to_pybytes()).decode()
    return json.dumps(document).encode()


def _decode_handle(handle: bytes) -> tuple[str, str, pa.RecordBatch | None]:
    try:
        document = json.loads(handle)
        sql, digest = document["sql"], document["schema"]
        if not isinstance(sql, str) or not isinstance(digest, str):
            raise ValueError
        parameters = None
        if "parameters" in document:
            data = base64.b64decode(document["parameters"], validate=True)
            parameters = pa.ipc.open_stream(data).read_next_batch()
    except (ValueError, KeyError, TypeError, binascii.Error, pa.ArrowException):
        raise status.InvalidArgument("the ticket is not one this server issued") from None
    return sql, digest, parameters


def _numbered(sql: str) -> str:
    try:
        return numbered(sql)
    except MixedPlaceholdersError as err:
        raise status.InvalidArgument(str(err)) from None


def _is_statement(ticket: bytes) -> bool:
    try:
        name, message = messages.unpack(ticket)
    except messages.MessageError:
        return False
    return name == "TicketStatementQuery" and message is not None


def _bound(parameters: pa.RecordBatch | None) -> dict[str, Any] | None:
    """A row of parameters as the engine takes them: ``$1`` is the first column's value."""
    if parameters is None:
        return None
    return {str(number): column[0] for number, column in enumerate(parameters.columns, start=1)}


def _parse(name: str, body: bytes) -> Any:
    try:
        return messages.parse(name, body)
    except messages.MessageError as err:
        raise status.InvalidArgument(f"the action body is {err}") from None


def _digest(schema: pa.Schema) -> str:
    """A schema's fingerprint: names, types, nullability and metadata."""
    return hashlib.sha256(schema.serialize().to_pybytes()).hexdigest()
