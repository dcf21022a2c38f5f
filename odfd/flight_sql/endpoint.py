"""Starting and stopping the Flight SQL server on the running event loop (``odfd sql server``
and the daemon's ``[server] flight_sql_port``)."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pyarrow as pa

from odfd.errors import OdfdError
from odfd.flight_sql.auth import TokenResolver
from odfd.flight_sql.server import FlightSqlServer
from odfd.flight_sql.service import QueryService
from storage.catalog.versioned_cache import Version, unversioned

_ENGINE_SETTLE_SECONDS = 0.2
"""After the last query closed, how long the engine's threads get to hand their last results
to the loop: DataFusion's async streams finish on threads of their own, and an interpreter that
exits while one still holds it aborts the process."""


class FlightSqlStartError(OdfdError):
    """The Flight SQL server cannot listen where it was asked to."""


@dataclass
class FlightSqlEndpoint:
    server: FlightSqlServer
    address: str
    port: int
    release: Callable[[], Awaitable[None]] | None = None
    """What the server used that outlives it otherwise (its catalog connection), released
    once it stopped."""

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"grpc://{host}:{self.port}"

    async def stop(self) -> None:
        """Cancels running queries, waits for calls to end and the engine to settle."""
        await asyncio.to_thread(self.server.close)
        await asyncio.sleep(_ENGINE_SETTLE_SECONDS)
        if self.release is not None:
            await self.release()


async def start(
    service: QueryService,
    *,
    address: str,
    port: int,
    resolve: TokenResolver,
    time_limit: float | Callable[[], float] = 600.0,
    version: Version = unversioned,
    release: Callable[[], Awaitable[None]] | None = None,
    allow_anonymous: Callable[[], bool] = lambda: True,
) -> FlightSqlEndpoint:
    """Serves ``service`` on ``address:port`` (0: a free port) from the running loop;
    ``time_limit`` may be read anew for each query (a callable); ``version`` keeps the server's
    caches (:class:`FlightSqlServer`); ``release`` runs once the server stopped;
    ``allow_anonymous`` says at each call whether anonymous sessions are served."""
    host = f"[{address}]" if ":" in address else address
    loop = asyncio.get_running_loop()
    try:
        server = await asyncio.to_thread(
            FlightSqlServer,
            f"grpc://{host}:{port}",
            service,
            loop,
            resolve=resolve,
            time_limit=time_limit,
            version=version,
            allow_anonymous=allow_anonymous,
        )
    except pa.ArrowException:  # gRPC says only that it did not start; the OS says why
        raise FlightSqlStartError(
            f"cannot listen on {address}:{port} for Flight SQL: {_bind_failure(address, port)}"
        ) from None
    return FlightSqlEndpoint(server, address, server.port, release)


def _bind_failure(address: str, port: int) -> str:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, port))
    except OSError as err:
        reason = err.strerror or str(err)
        if err.errno == errno.EACCES:
            reason += " (ports below 1024 need privileges; pick another port)"
        return reason
    except (OverflowError, ValueError) as err:
        return str(err)
    return os.strerror(errno.EADDRNOTAVAIL) + " (gRPC refused the address)"
