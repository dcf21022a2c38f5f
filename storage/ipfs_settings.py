"""Which IPFS node odfd talks to, kept apart from the clients so reading the config stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.frozen import frozen_dataclass

if TYPE_CHECKING:
    from storage.ipfs_client import IpfsClient

DEFAULT_IPFS_API = "/ip4/127.0.0.1/tcp/5001/http"
DEFAULT_IPFS_GATEWAY = "http://127.0.0.1:8080"
DEFAULT_RECORD_VALIDITY = 7 * 24 * 3600.0
"""A week: a dataset stays reachable that long after its owner was last online."""
DEFAULT_REPUBLISH_INTERVAL = 4 * 3600.0
"""Kubo's own republishing period for the records of its keys."""


@frozen_dataclass
class IpfsSettings:
    """The node odfd uses: ``$ODFD_IPFS_API`` / ``$ODFD_IPFS_GATEWAY``, else ``[ipfs]`` ``api`` /
    ``gateway`` (and ``record_validity``, ``republish_interval``) in ``config.toml``, else Kubo's defaults on loopback (``odfd.config`` reads them)."""

    api: str = DEFAULT_IPFS_API
    gateway: str = DEFAULT_IPFS_GATEWAY
    record_validity: float = DEFAULT_RECORD_VALIDITY
    """Seconds an IPNS record published under a dataset's DID stays valid."""
    republish_interval: float = DEFAULT_REPUBLISH_INTERVAL
    """Seconds between the daemon's republications of a mirrored dataset's record."""

    def client(self) -> IpfsClient:
        from storage.ipfs_client import IpfsClient  # the Kubo client pulls in requests/urllib3

        return IpfsClient(self.api)
