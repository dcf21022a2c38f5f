"""Signing webhook deliveries by the Standard Webhooks scheme (https://www.standardwebhooks.com).

Each request carries ``webhook-id`` (unique per delivery, the same on every retry, so a receiver
can drop duplicates), ``webhook-timestamp`` (Unix seconds, so a receiver can refuse replays) and
``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` keyed by
the target's secret. A secret spelled ``whsec_<base64>`` (as Standard Webhooks libraries make them)
keys with its decoded bytes, any other secret with its UTF-8 bytes. Receivers verify with any
Standard Webhooks library, or with :func:`verify` here. HMAC comes from the standard library.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from odfd.errors import OdfdError

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
_PREFIX = "whsec_"


class SignatureError(OdfdError):
    """A delivery whose signature or timestamp does not check out."""


def secret_key(secret: str) -> bytes:
    if secret.startswith(_PREFIX):
        try:
            return base64.b64decode(secret[len(_PREFIX) :], validate=True)
        except ValueError:
            pass  # not base64 after all: the text itself is the key
    return secret.encode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, message_id, timestamp, body),
    }


def verify(
    secret: str, headers: dict[str, str], body: bytes, *, now: float, tolerance: float = 300
) -> None:
    """Raise :class:`SignatureError` unless one of the header's signatures matches and the
    timestamp is within ``tolerance`` seconds of ``now``."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        message_id = lower[ID_HEADER]
        timestamp = int(lower[TIMESTAMP_HEADER])
        given = lower[SIGNATURE_HEADER].split()
    except (KeyError, ValueError) as err:
        raise SignatureError(f"missing or malformed webhook header: {err}") from None
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"webhook-timestamp {timestamp} is outside the tolerance")
    expected = signature(secret, message_id, timestamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in given):
        raise SignatureError("no webhook-signature matches")
