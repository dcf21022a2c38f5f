"""The ``[server]`` table of ``config.toml`` (read and validated by ``odfd.config.load_config``)::

[server]
address = "127.0.0.1"
port = 8080
push_tokens = ["…"]          # bearer tokens allowed to push; none configured: pushes refused
url_signing_key = "…"        # hex; HMAC key of signed object URLs (default: random per start)
url_ttl_seconds = 900        # how long a signed object URL stays valid
base_url = "https://…/"      # the public URL of this server, if behind a proxy
private = ["internal.%"]     # alias patterns of datasets served only to a read or admin token
read_tokens = ["…"]          # bearer tokens that may read private datasets
admin_tokens = ["…"]         # bearer tokens for the console's actions (sync now, audit now)
flight_sql_port = 50050      # the daemon also serves Flight SQL here (default: it does not)
query_timeout = "10m"        # how long a query may keep the engine busy producing its result
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.identity import DatasetAlias

if TYPE_CHECKING:
    from aiohttp import web

    from protocol.identity import DatasetAliasPattern


@dataclass(frozen=True, slots=True)
class ServerConfig:
    address: str = "127.0.0.1"
    port: int = 8080
    push_tokens: frozenset[str] = frozenset()
    url_signing_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    url_ttl_seconds: int = 900
    base_url: str | None = None
    private: tuple[DatasetAliasPattern, ...] = ()
    read_tokens: frozenset[str] = frozenset()
    admin_tokens: frozenset[str] = frozenset()
    flight_sql_port: int | None = None
    """Port of the daemon's Flight SQL server on ``address`` (0: any free port; ``None``: off)."""
    query_timeout: float = 600.0
    """Seconds a query may keep the engine busy producing its result before it is stopped."""

    def is_private(self, alias: str) -> bool:
        if not self.private:
            return False
        parsed = _alias(alias)
        return any(pattern.matches(parsed) for pattern in self.private)

    def may_read_private(self, request: web.Request) -> bool:
        """Read and admin tokens see private datasets."""
        token = bearer_token(request)
        return token is not None and (token in self.read_tokens or token in self.admin_tokens)

    def is_admin(self, request: web.Request) -> bool:
        token = bearer_token(request)
        return token is not None and token in self.admin_tokens


@functools.lru_cache(maxsize=65536)
def _alias(text: str) -> DatasetAlias:
    """Parsed once: listings check every dataset against the private patterns."""
    return DatasetAlias.parse(text)


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
