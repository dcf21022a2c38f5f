"""What the transports need from the node's configuration, handed to them by whoever built the
node (the transports, like the rest of ``odfd.sync``, never read ``config.toml``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from storage.ipfs_settings import IpfsSettings
from storage.s3_settings import S3Settings
from storage.stores.http_limits import HttpLimits

if TYPE_CHECKING:
    from odfd.config import NodeConfig


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """HTTP time-outs for every peer, the IPFS node, S3 credentials, and bearer tokens by URL
    prefix. The defaults are a node without configuration: Kubo on loopback, S3 credentials
    from the ``AWS_*`` variables or profile only, no tokens, no limit on a whole pull."""

    limits: HttpLimits = HttpLimits()
    operation_timeout: float | None = None
    """A whole pull running longer is abandoned (``[sync] operation_timeout``); ``None``: no
    limit."""
    ipfs: IpfsSettings = IpfsSettings()
    s3: S3Settings = S3Settings()
    tokens: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """URL prefix -> bearer token (``[sync.tokens]`` and the node URLs of ``odfd login``; the
    longest matching prefix wins)."""

    @classmethod
    def from_config(
        cls, config: NodeConfig, logins: Mapping[str, str] | None = None
    ) -> TransportSettings:
        """The settings of ``config``, with ``logins`` (node URL -> token, as ``odfd login``
        stored them) beside ``[sync.tokens]``, a login winning over the same prefix there."""
        return cls(
            limits=config.sync.limits(),
            operation_timeout=config.sync.pull_timeout(),
            ipfs=config.ipfs.settings(),
            s3=config.s3.settings(),
            tokens=MappingProxyType({**config.sync.tokens, **(logins or {})}),
        )

    def token_for(self, url: str) -> str | None:
        best = max((p for p in self.tokens if url.startswith(p)), key=len, default=None)
        return None if best is None else self.tokens[best]
