"""Expiring object URLs signed with HMAC-SHA256, for Smart Transfer Protocol downloads/uploads.

The signature covers the method, the transfer session (uploads) or dataset (downloads), the
object's folder, hash and size, and the expiry, so a URL grants exactly one operation on one
object until it expires, and the size bounds what an upload may send.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from protocol.identity import Multihash


class UrlSigner:
    def __init__(self, key: bytes, ttl_seconds: int) -> None:
        self._key = key
        self.ttl_seconds = ttl_seconds

    def _mac(
        self, method: str, scope: str, kind: str, hash: Multihash, size: int, expires: int
    ) -> str:
        message = "\n".join((method, scope, kind, hash.to_multibase(), str(size), str(expires)))
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def sign(
        self,
        method: str,
        scope: str,
        kind: str,
        hash: Multihash,
        size: int,
        now: float | None = None,
    ) -> tuple[dict[str, str], datetime]:
        """Query parameters to append to the object's URL, and when they expire."""
        expires = int(now if now is not None else time.time()) + self.ttl_seconds
        query = {
            "scope": scope,
            "size": str(size),
            "expires": str(expires),
            "signature": self._mac(method, scope, kind, hash, size, expires),
        }
        return query, datetime.fromtimestamp(expires, UTC)

    def verify(
        self,
        method: str,
        kind: str,
        hash: Multihash,
        query: Mapping[str, str],
        now: float | None = None,
    ) -> tuple[str, int] | None:
        """``(scope, size)`` if the query carries a valid, unexpired signature, else ``None``."""
        try:
            scope, size, expires = query["scope"], int(query["size"]), int(query["expires"])
            signature = query["signature"]
        except (KeyError, ValueError):
            return None
        if expires < (now if now is not None else time.time()):
            return None
        if not hmac.compare_digest(signature, self._mac(method, scope, kind, hash, size, expires)):
            return None
        return scope, size
