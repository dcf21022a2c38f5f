"""Who is calling: the Flight SQL handshake, bearer tokens and the sessions they name.

Every call but the handshake carries ``authorization: Bearer TOKEN``; a call without one, or with
a token this server does not know (or one that expired or was revoked), is refused
(UNAUTHENTICATED). A token is one the node knows (an issued account token, ``odfd account token
create``, or one of the ``[server]`` token lists), resolved on every call to the node's one
authorization subject (:func:`odfd.app.authorization.principal_of`), or an anonymous session
token the handshake handed out. The handshake takes HTTP Basic credentials, as the ADBC and JDBC
drivers send them (the Go driver without base64 padding): user ``anonymous`` with no password
(or the password ``anonymous``, for clients that cannot send an empty one, or the reference's
deprecated ``kamu``/``kamu``) opens an anonymous session; any user with a token as the password
is that token's holder. The answer names the bearer token in the response headers. A handshake
without credentials, or with ones that do not parse, is INVALID_ARGUMENT in the reference's words.

An anonymous session token (``anon_…``) grants nothing a handshake does not give anyone, so, as
in the reference, one the server does not know (its session expired, or the server restarted)
opens a new anonymous session instead of being refused: a notebook left open keeps working.
A publisher can refuse anonymous sessions altogether (``[server] flight_sql_allow_anonymous``,
the reference's ``protocol.flight_sql.allow_anonymous``): the anonymous Basic credentials and
``anon_`` tokens are then refused in the reference's words, tokens of the node keep working.

A token's subject is kept (by the token's digest) while the node is unchanged and the token
has not expired (:mod:`storage.catalog.versioned_cache`): a client's every call would otherwise
cost a trip through the node's event loop and catalog. Revoking a token commits to the catalog,
which drops every kept subject, so the token's next call is refused.

Sessions keep their prepared statements; idle ones expire and their number is bounded, so
clients that never close cannot grow the server's memory.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from odfd.flight_sql.service import ANONYMOUS, Subject
from odfd.flight_sql.status import InvalidArgument, Unauthenticated
from storage.catalog.versioned_cache import Version, VersionedCache, unversioned
from storage.lru import Lru


@dataclass(frozen=True, slots=True)
class Grant:
    """What a bearer token is: the subject it speaks for, until when (``None``: no expiry)."""

    subject: Subject
    expires: datetime | None = None


TokenResolver = Callable[[str], Coroutine[Any, Any, Grant | None]]
"""A bearer token's grant; ``None`` for a token that is unknown or revoked; raises
:class:`TokenExpired` for an issued token past its expiry."""

INVALID_TOKEN = "Invalid access token; connect again with a token of this node"
EXPIRED_TOKEN = "Expired access token; connect again with a new token of this node"
"""A refused bearer token in the reference Flight SQL's words, then what to do."""
UNKNOWN_STATEMENT = (
    "Invalid plan token: no such prepared statement in this session (closed, expired, or never "
    "created)"
)
"""An unknown prepared statement handle, refused (UNAUTHENTICATED) in the reference's words."""
_NO_ANONYMOUS_HINT = (
    "this server takes no anonymous sessions ([server] flight_sql_allow_anonymous = false): "
    "connect with a token of this node (as the bearer token, or as the Basic password)"
)
NO_BASIC = (
    "Basic auth and anonymous access are not supported by this server. Users must authenticate "
    f"via Bearer token auth mechanism. ({_NO_ANONYMOUS_HINT})"
)
ANONYMOUS_RESTRICTED = f"Anonymous account is restricted ({_NO_ANONYMOUS_HINT})"
"""Anonymous sessions refused, in the reference's words: a Basic handshake that is no token of
the node, and a call with an anonymous session token."""


class TokenExpired(Exception):
    """The token was issued by this node and has expired (refused as expired, not invalid)."""


_RESOLVE_SECONDS = 30.0
KEPT_GRANTS = 10_000
"""Token subjects kept, at most (the least recently used goes first)."""

ANONYMOUS_USER = "anonymous"
_ANONYMOUS_CREDENTIALS = frozenset(
    {(ANONYMOUS_USER, ""), (ANONYMOUS_USER, ANONYMOUS_USER), ("kamu", "kamu")}
)
"""Basic credentials of an anonymous session, as the reference takes them (``kamu``/``kamu``:
its deprecated ones, kept for old clients)."""
_ANONYMOUS_PREFIX = "anon_"


@dataclass
class PreparedStatement:
    """A prepared statement: its SQL and the parameters last bound to it (DoPut)."""

    sql: str
    parameters: pa.RecordBatch | None = None


@dataclass
class _Session:
    subject: Subject
    last_used: float
    statements: Lru[bytes, PreparedStatement]
    """First made, first forgotten: reading one does not keep it longer."""


class Sessions:
    """Anonymous sessions and every session's prepared statements; thread-safe (the server's
    calls run on gRPC's threads)."""

    def __init__(
        self,
        *,
        idle_timeout: float = 3600.0,
        max_sessions: int = 10_000,
        max_statements: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_timeout = idle_timeout
        self._max_statements = max_statements
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: Lru[str, _Session] = Lru(max_sessions)

    def open_anonymous(self) -> str:
        """A new anonymous session; its bearer token."""
        token = _ANONYMOUS_PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            self._expire()
            self._sessions.put(token, self._new_session(ANONYMOUS))
        return token

    def touch(self, token: str, subject: Subject) -> Subject:
        """The subject of the session ``token`` names, marked as used; ``subject`` (the token's
        subject as resolved now) opens it if it is not open, or replaces what it was."""
        with self._lock:
            self._expire()
            session = self._sessions.get(token)
            if session is None:
                session = self._new_session(subject)
                self._sessions.put(token, session)
            else:
                session.subject = subject
            session.last_used = self._clock()
            return session.subject

    def close(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token)

    def add_statement(self, token: str, sql: str) -> bytes:
        """Keeps a prepared statement in the session; its handle. The session's oldest
        statement goes when it holds too many."""
        handle = secrets.token_bytes(16)
        with self._lock:
            statements = self._session(token).statements
            statements.put(handle, PreparedStatement(sql))
        return handle

    def statement(self, token: str, handle: bytes) -> PreparedStatement:
        """A prepared statement of this session. Raises :class:`NotFound`."""
        with self._lock:
            statement = self._session(token).statements.peek(handle)
        if statement is None:
            raise Unauthenticated(UNKNOWN_STATEMENT)
        return statement

    def bind(self, token: str, handle: bytes, parameters: pa.RecordBatch | None) -> None:
        """Binds ``parameters`` (one row; ``None`` unbinds) to a prepared statement."""
        statement = self.statement(token, handle)
        with self._lock:
            statement.parameters = parameters

    def remove_statement(self, token: str, handle: bytes) -> None:
        with self._lock:
            self._session(token).statements.pop(handle)

    def _new_session(self, subject: Subject) -> _Session:
        return _Session(subject, self._clock(), Lru(self._max_statements))

    def _session(self, token: str) -> _Session:
        session = self._sessions.peek(token)  # only ``touch`` marks it used
        if session is None:
            raise Unauthenticated("the session expired; connect again")
        return session

    def _expire(self) -> None:
        cutoff = self._clock() - self.idle_timeout
        while (oldest := self._sessions.oldest()) is not None and oldest.last_used < cutoff:
            self._sessions.pop_oldest()


@dataclass(frozen=True, slots=True)
class Caller:
    """What the server knows of a call: the subject, the session token, what to answer."""

    subject: Subject
    token: str
    reply_token: bool = False


class CallerMiddleware(flight.ServerMiddleware):
    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    def sending_headers(self) -> dict[str, str]:
        if self.caller.reply_token:
            return {"authorization": f"Bearer {self.caller.token}"}
        return {}


class Authenticator(flight.ServerMiddlewareFactory):
    """Checks each call's credentials (see the module's docstring)."""

    KEY = "auth"
    """The middleware's key: ``context.get_middleware(KEY).caller`` in a handler."""

    def __init__(
        self,
        sessions: Sessions,
        resolve: TokenResolver,
        loop: asyncio.AbstractEventLoop,
        version: Version = unversioned,
        allow_anonymous: Callable[[], bool] = lambda: True,
    ) -> None:
        """``allow_anonymous``: whether anonymous sessions are served now (read at each call:
        a daemon's reload changes it)."""
        self._sessions = sessions
        self._resolve = resolve
        self._loop = loop
        self._version = version
        self._allow_anonymous = allow_anonymous
        self._grants: VersionedCache[bytes, Subject] = VersionedCache(KEPT_GRANTS)

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[str]]) -> CallerMiddleware:
        values = headers.get("authorization", [])
        header = values[0] if values else ""
        scheme, _, credentials = header.partition(" ")
        credentials = credentials.strip()
        if info.method == flight.FlightMethod.HANDSHAKE:
            return CallerMiddleware(self._handshake(header, scheme, credentials))
        if scheme.lower() != "bearer" or not credentials:
            raise Unauthenticated(  # the reference's words first
                "Unauthenticated access is not allowed. Provide a bearer token or use basic auth "
                "and handshake endpoint to login as anonymous. (No bearer token was sent: "
                "authenticate with a token of this node, or hand shake with Basic credentials "
                "of the user 'anonymous' for an anonymous session.)"
            )
        return CallerMiddleware(Caller(self._subject(credentials), credentials))

    def _handshake(self, header: str, scheme: str, credentials: str) -> Caller:
        """The caller a handshake's ``authorization`` header (``scheme credentials``) names."""
        if scheme.lower() == "bearer" and credentials:
            return Caller(self._subject(credentials), credentials, reply_token=True)
        if not header:
            raise InvalidArgument(  # the reference's words first
                "authorization field not present (the handshake takes Basic credentials: user "
                "'anonymous' with no password, or a token of this node as the password)"
            )
        if scheme.lower() != "basic":
            raise InvalidArgument(  # the scheme only: the credentials are not echoed
                f"Auth type not implemented: {scheme} (the handshake takes Basic "
                "credentials: user 'anonymous' with no password, or a token of this node as the "
                "password)"
            )
        user, password = _basic(credentials)
        anonymous = self._allow_anonymous()
        if anonymous and (user, password) in _ANONYMOUS_CREDENTIALS:
            return Caller(ANONYMOUS, self._sessions.open_anonymous(), reply_token=True)
        if password and self._known(password) is not None:
            return Caller(self._subject(password), password, reply_token=True)
        if not anonymous:
            raise Unauthenticated(NO_BASIC)
        raise Unauthenticated(  # the reference's words first
            "Basic auth is only supported for 'anonymous' accounts with no password. "
            "Authenticated users should use Bearer token auth mechanism. (odfd also takes a "
            "token of this node as the password; this one is unknown or revoked.)"
        )

    def _subject(self, token: str) -> Subject:
        """An anonymous session's subject, or the token's as it resolves now (so a revoked or
        expired token stops working on its next call)."""
        if token.startswith(_ANONYMOUS_PREFIX):  # unknown ones open a new session
            if not self._allow_anonymous():
                self._sessions.close(token)
                raise Unauthenticated(ANONYMOUS_RESTRICTED)
            return self._sessions.touch(token, ANONYMOUS)
        subject = None
        try:
            subject = self._known(token)
        finally:
            if subject is None:  # its session (and prepared statements) end with it
                self._sessions.close(token)
        if subject is None:
            raise Unauthenticated(INVALID_TOKEN)
        return self._sessions.touch(token, subject)

    def _known(self, token: str) -> Subject | None:
        """The token's subject; ``None``: unknown or revoked. Refuses an expired token."""
        try:
            return self._principal(token)
        except TokenExpired:
            raise Unauthenticated(EXPIRED_TOKEN) from None

    def _principal(self, token: str) -> Subject | None:
        """The token's subject: kept from an earlier call while the node is unchanged and the
        token lives, else resolved on the node's loop (the calls run on gRPC's threads). Only
        known tokens are kept: an unknown one is asked about every time."""
        key = hashlib.sha256(token.encode()).digest()
        version = self._version()
        kept = self._grants.get(key, version)
        if kept is not None:
            return kept
        grant = asyncio.run_coroutine_threadsafe(self._resolve(token), self._loop).result(
            _RESOLVE_SECONDS
        )
        if grant is None or grant.subject.account is None:
            return None
        until = None if grant.expires is None else grant.expires.timestamp()
        self._grants.put(key, version, grant.subject, until=until)
        return grant.subject


def _basic(credentials: str) -> tuple[str, str]:
    """User and password of HTTP Basic credentials, padded base64 or not."""
    try:
        decoded = base64.b64decode(credentials + "=" * (-len(credentials) % 4), validate=True)
        text = decoded.decode()
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidArgument(  # the reference's words first
            "authorization not parsable (Basic credentials are base64 of UTF-8 user:password)"
        ) from None
    user, colon, password = text.partition(":")
    if not colon:
        raise InvalidArgument("Invalid authorization header (no ':' between user and password)")
    return user, password
