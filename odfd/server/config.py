"""The ``[server]`` table of ``config.toml`` (read and validated by ``odfd.config.load_config``)::

[server]
address = "127.0.0.1"
port = 8080
push_tokens = ["…"]          # bearer tokens allowed to push; none configured: pushes refused
url_signing_key = "…"        # hex; HMAC key of signed object URLs (default: random per start)
url_ttl_seconds = 900        # how long a signed object URL stays valid
base_url = "https://…/"      # the public URL of this server, if behind a proxy
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ServerConfig:
    address: str = "127.0.0.1"
    port: int = 8080
    push_tokens: frozenset[str] = frozenset()
    url_signing_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    url_ttl_seconds: int = 900
    base_url: str | None = None
