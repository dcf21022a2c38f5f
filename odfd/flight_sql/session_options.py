"""Flight's session options, as far as a read-only server over one catalog has any: the current
catalog and schema, which ADBC drivers read as the connection's ``current_catalog`` and
``current_db_schema`` (and tools show as where a connection is), always ``odf`` and ``odf``.

``GetSessionOptions`` answers both. ``SetSessionOptions`` accepts them set to what they are (a
driver may set them on connecting) and answers any other name or value with the protocol's
per-option error, which the driver reports naming the option.
"""

from __future__ import annotations

from typing import Final

from odfd.flight_sql import messages
from odfd.flight_sql.catalog import CATALOG, DB_SCHEMA

GET: Final = "GetSessionOptions"
SET: Final = "SetSessionOptions"

CURRENT: Final = {"catalog": CATALOG, "schema": DB_SCHEMA}
"""Option name -> its value (the names the ADBC drivers use)."""

INVALID_NAME: Final = 1
INVALID_VALUE: Final = 2
"""``SetSessionOptionsResult.ErrorValue``s."""


def get_result() -> bytes:
    """The ``GetSessionOptionsResult`` (unwrapped, as Flight's own actions answer)."""
    entries = [
        messages.new(
            "SessionOptionEntry",
            key=name,
            value=messages.new("SessionOptionValue", string_value=value).SerializeToString(),
        ).SerializeToString()
        for name, value in CURRENT.items()
    ]
    return messages.new("GetSessionOptionsResult", session_options=entries).SerializeToString()


def set_result(body: bytes) -> bytes:
    """The ``SetSessionOptionsResult`` for the ``SetSessionOptionsRequest`` in ``body``: no
    error for an option set to its value, else ``INVALID_NAME`` or ``INVALID_VALUE``. Raises
    ``messages.MessageError`` for bytes that are no such request."""
    request = messages.parse("SetSessionOptionsRequest", body)
    errors = []
    for raw in request.session_options:
        entry = messages.parse("SessionOptionEntry", raw)
        value = messages.parse("SessionOptionValue", entry.value)
        if entry.key not in CURRENT:
            error = INVALID_NAME
        elif not value.HasField("string_value") or value.string_value != CURRENT[entry.key]:
            error = INVALID_VALUE
        else:
            continue
        encoded = messages.new("SetSessionOptionsError", value=error).SerializeToString()
        errors.append(
            messages.new("SessionOptionEntry", key=entry.key, value=encoded).SerializeToString()
        )
    return messages.new("SetSessionOptionsResult", errors=errors).SerializeToString()
