"""The gRPC statuses the server answers with, each with a message for the person who asked.

``pyarrow.flight`` maps a handler's exception to a status code by its type (``ValueError`` ->
INVALID_ARGUMENT, ``KeyError`` -> NOT_FOUND, ``NotImplementedError`` -> UNIMPLEMENTED; its own
``Flight*Error`` types to the rest) and appends the exception's rendering to the message: for a
Python exception that is a full traceback of the server's code (Arrow's C++ ``PythonErrorDetail``
renders it with ``traceback.format_exception``). A client must read what went wrong, not the
server's insides, so the errors here are rendered by their status name alone (:func:`install`);
every other exception renders as before.

Why a patch of ``traceback.format_exception`` and not a supported mechanism: pyarrow has none
for these three codes. Its ``Flight*Error`` types, which carry no traceback, cover only INTERNAL,
DEADLINE_EXCEEDED, CANCELLED, UNAUTHENTICATED, PERMISSION_DENIED, UNAVAILABLE and UNKNOWN; a
middleware sees a call's exception but cannot change its status; and Arrow's maintainers leave
"intentional errors without a traceback" to a future redesign (apache/arrow#34251, #45555).
The patch is narrow: it changes the rendering of this module's three exception types only (no
other code raises them), delegates everything else unchanged, and is installed once, by the
server. ``tests/flight_sql/test_messages.py`` checks both halves, so a pyarrow that renders
differently fails a test rather than leaking tracebacks again.
"""

from __future__ import annotations

import traceback
from typing import Any

import pyarrow.flight as flight


class InvalidArgument(ValueError):
    """INVALID_ARGUMENT: the request (SQL, command, ticket) cannot be answered as it is."""


class NotFound(KeyError):
    """NOT_FOUND: a table or prepared statement that does not exist (for this client)."""

    def __str__(self) -> str:  # KeyError's own quotes its message
        return str(self.args[0]) if self.args else ""


class Unimplemented(NotImplementedError):
    """UNIMPLEMENTED: a Flight SQL command or action this read-only server does not offer."""


_STATUS_ERRORS = (InvalidArgument, NotFound, Unimplemented)

#: The rest map to pyarrow's own types, which never carry a traceback.
Unauthenticated = flight.FlightUnauthenticatedError
DeadlineExceeded = flight.FlightTimedOutError
Cancelled = flight.FlightCancelledError
Unavailable = flight.FlightUnavailableError
Internal = flight.FlightInternalError

_SENTINEL: Any = object()


def install() -> None:
    """Makes the status errors above render without a traceback in the status message; other
    exceptions render as before. Idempotent."""
    if getattr(traceback.format_exception, "_odfd_flight_sql", False):
        return
    original = traceback.format_exception

    def format_exception(
        exc: Any, /, value: Any = _SENTINEL, tb: Any = _SENTINEL, **options: Any
    ) -> list[str]:
        shown = exc if value is _SENTINEL else value
        if isinstance(shown, _STATUS_ERRORS):
            return [type(shown).__name__]
        given = [arg for arg in (value, tb) if arg is not _SENTINEL]
        return original(exc, *given, **options)

    format_exception._odfd_flight_sql = True  # type: ignore[attr-defined]
    # The stdlib types it as an overload of two call forms; the wrapper takes both.
    traceback.format_exception = format_exception  # type: ignore[assignment]
