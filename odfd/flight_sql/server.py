"""The Flight SQL server: Flight RPCs in, :class:`~odfd.flight_sql.service.QueryService` calls out.

``pyarrow.flight`` runs each call on one of gRPC's threads; the service's coroutines run on the
node's event loop, handed over with :func:`asyncio.run_coroutine_threadsafe`. While a call waits
it watches the client: a client that went away (or whose own deadline passed) cancels its query,
and so does a server that is shutting down.

Statement queries are planned by GetFlightInfo, whose ticket carries the SQL and a digest of
the announced schema; DoGet runs the plan GetFlightInfo kept for the ticket
(:mod:`odfd.flight_sql.tickets`), or plans the SQL again over the datasets as they are then and
refuses to stream a result whose schema is not the one announced. Results stream batch by batch, the next batch computed while the current one is
sent: the server holds two batches per query, never the whole result.

Plans are kept by subject, SQL and parameters while the node is unchanged
(:mod:`odfd.flight_sql.versioned`): the ADBC driver prepares every statement it runs and then
asks for its FlightInfo, and a dashboard asks the same queries again and again; each of those
would otherwise plan on the node's loop, through the catalog and the authorization decision.
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
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from odfd.flight_sql import catalog, messages, sql_info, status
from odfd.flight_sql.auth import Authenticator, Caller, Sessions, TokenResolver
from odfd.flight_sql.parameters import MixedPlaceholdersError, numbered
from odfd.flight_sql.service import (
    DataUnavailableError,
    InvalidQueryError,
    PlannedQuery,
    QueryFailedError,
    QueryService,
    QueryStream,
    QueryTimeoutError,
    Subject,
    UnknownTableError,
)
from odfd.flight_sql.tickets import PlannedTickets
from odfd.flight_sql.versioned import Version, VersionedCache, unversioned

log = logging.getLogger(__name__)

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
)


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
    ) -> None:
        """``version``: the node's version now, which the server's caches of plans and token
        subjects are kept by (default: nothing is cached)."""
        status.install()
        self._service = service
        self._loop = loop
        self._time_limit_of = time_limit if callable(time_limit) else lambda: time_limit
        """The query time limit now (a daemon's reload changes it)."""
        self._sessions = sessions or Sessions()
        self._closing = threading.Event()
        self._cancel_lock = threading.Lock()
        self._cancelled: OrderedDict[bytes, None] = OrderedDict()
        self._tickets = PlannedTickets()
        self._version = version
        self._plans: VersionedCache[_PlanKey, _Plan] = VersionedCache(KEPT_PLANS)
        super().__init__(
            location,
            auth_handler=_AcceptHandshake(),
            middleware={Authenticator.KEY: Authenticator(self._sessions, resolve, loop, version)},
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
            ticket_bytes = ticket.ticket
            sql, digest, parameters = _decode_handle(message.statement_handle)
            stream = self._wait(
                context,
                self._service.execute(
                    caller.subject,
                    sql,
                    _bound(parameters),
                    time_limit=self._time_limit_of(),
                    planned=self._tickets.take(ticket_bytes, caller.subject),
                ),
                ticket=ticket_bytes,
            )
            if _digest(stream.schema) != digest:
                self._wait(context, stream.close())
                raise status.InvalidArgument(
                    "the datasets this query reads changed their schema since it was planned; "
                    "run it again"
                )
            return flight.GeneratorStream(
                stream.schema, self._stream(context, stream, ticket_bytes)
            )
        if name in _CATALOG_COMMANDS:
            return flight.RecordBatchStream(self._catalog_result(context, caller, name, message))
        raise _not_offered(name)

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
        raise status.Unimplemented(
            f"action '{action.type}' is not offered by this read-only server (it offers "
            + ", ".join(name for name, _ in self.list_actions(context))
            + ")"
        )

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [
            (_CREATE_PREPARED, "prepare a query; its handle runs it with GetFlightInfo"),
            (_CLOSE_PREPARED, "forget a prepared statement"),
            (_CLOSE_SESSION, "end this session and forget its prepared statements"),
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
            if name in messages.UNSUPPORTED_COMMANDS:
                raise status.Unimplemented(
                    f"{name} is not offered: this server is read-only (no updates or ingest)"
                )
            raise status.InvalidArgument(f"DoPut takes a CommandPreparedStatementQuery, not {name}")
        caller = _caller(context)
        handle = message.prepared_statement_handle
        self._sessions.statement(caller.token, handle)  # NOT_FOUND before reading the data
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
        raise status.Unimplemented("DoExchange is not offered by this server")

    def list_flights(self, context: Any, criteria: Any) -> Iterator[flight.FlightInfo]:
        raise status.Unimplemented("ListFlights is not offered; use CommandGetTables")

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
            raise _not_offered(name)
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
                self._cancelled[ticket] = None
            while len(self._cancelled) > _KEPT_CANCELLATIONS:
                self._cancelled.popitem(last=False)
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
            return catalog.tables(message, infos)
        return catalog.table_types()

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
            except (InvalidQueryError, QueryFailedError) as err:
                raise status.InvalidArgument(str(err)) from None
            except UnknownTableError as err:
                raise status.NotFound(str(err)) from None
            except QueryTimeoutError as err:
                raise status.DeadlineExceeded(str(err)) from None
            except DataUnavailableError as err:
                raise status.Unavailable(str(err)) from None
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

    def _stream(
        self, context: flight.ServerCallContext, stream: QueryStream, ticket: bytes
    ) -> Iterator[pa.RecordBatch]:
        """The stream's batches; the next is computed while one is being sent. Empty batches are
        skipped (JDBC reads a result with some as empty) but an empty result sends one."""
        pending = asyncio.run_coroutine_threadsafe(stream.next_batch(), self._loop)
        sent = False
        try:
            while True:
                batch = self._result(context, pending, ticket=ticket)
                if batch is None:
                    break
                pending = asyncio.run_coroutine_threadsafe(stream.next_batch(), self._loop)
                if batch.num_rows:
                    sent = True
                    yield batch
            if not sent:
                yield pa.RecordBatch.from_pylist([], stream.schema)
        finally:  # the client's answer is complete: the query is released behind it
            pending.cancel()
            closing = asyncio.run_coroutine_threadsafe(stream.close(), self._loop)
            closing.add_done_callback(_log_failure)


def _log_failure(done: concurrent.futures.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("closing a Flight SQL query failed", exc_info=done.exception())


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
    return catalog.TABLE_TYPES_SCHEMA


def _not_offered(name: str) -> Exception:
    if name in messages.UNSUPPORTED_COMMANDS:
        return status.Unimplemented(f"{name} is not offered by this read-only server")
    return status.InvalidArgument(f"{name} is not a command this server knows")


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
