"""What a user is told when a node cannot be reached over HTTP, and how a node's refusal is
read: one wording for ``odfd pull``/``push``, ``odfd sql --remote``, ``odfd login`` and answer
checks (not aiohttp's ``Cannot connect to host … ssl:default [Connect call failed …]``). A
node's refusal is read by ``storage.stores.http.refusal_message`` (both shapes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp

_PLAIN_HTTP_REASONS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST")
"""What OpenSSL says when the other end answers a TLS hello in plain HTTP."""


def cannot_reach(base: str, err: aiohttp.ClientConnectorError, *, node: bool = True) -> str:
    """What to say when the node at ``base`` does not answer, and what to check. A TLS failure
    is named as one (the node answered, but not as a trusted TLS server). ``node=False``: any
    web server (``odfd add URL``), not told to run ``odfd serve``."""
    import ssl

    import aiohttp

    where = f"the node at {base}" if node else base

    if isinstance(err, aiohttp.ClientSSLError):
        cause = err.os_error if isinstance(err.os_error, ssl.SSLError) else None
        reason = getattr(cause, "reason", None) or ""
        if isinstance(err, aiohttp.ClientConnectorCertificateError):
            return (
                f"cannot reach {where}: its TLS certificate is not trusted here "
                f"({err.certificate_error})"
            )
        if reason in _PLAIN_HTTP_REASONS:
            return (
                f"cannot reach {where}: TLS failed ({reason}), it answers plain "
                "HTTP there: use an http:// URL, or serve it over TLS"
            )
        return f"cannot reach {where}: TLS failed ({reason or cause or err})"
    refused = isinstance(err.os_error, ConnectionRefusedError)
    reason = "connection refused" if refused else err.os_error.strerror or str(err)
    if not node:
        return f"cannot reach {where} ({reason})"
    return (
        f"cannot reach {where} ({reason}): is it serving "
        "(`odfd serve`, `odfd daemon`) at that address?"
    )


def connector_error(err: BaseException) -> aiohttp.ClientConnectorError | None:
    """The connection failure behind ``err`` (its cause or context), if it is one."""
    import aiohttp

    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, aiohttp.ClientConnectorError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
