"""A request body read as JSON the way the reference's serde_json reads it (``POST /query``,
``POST /verify``), with an error that says what the route takes when the body is empty or is
not JSON at all (a form, as ``curl -d 'query=…'`` sends)."""

from __future__ import annotations

from typing import Any

from protocol.query import RequestError
from protocol.query.json_text import loads


def json_body(body: bytes, route: str, expected: str) -> Any:
    """``body`` parsed; ``route`` (``POST /query``) and ``expected`` name what was wanted."""
    if not body.strip():
        raise RequestError("", f"the request body is empty: {route} takes {expected}")
    if body.lstrip()[:1] not in (b"{", b"["):
        try:
            loads(body)
        except RequestError as error:
            reason = f"the request body is not JSON ({error.reason}): {route} takes {expected}"
            raise RequestError("", reason) from None
    return loads(body)
