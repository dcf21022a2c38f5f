"""Which IPFS node odfd talks to, kept apart from the clients so reading the config stays cheap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.ipfs_client import IpfsClient

DEFAULT_IPFS_API = "/ip4/127.0.0.1/tcp/5001/http"
DEFAULT_IPFS_GATEWAY = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class IpfsSettings:
    """The node odfd uses: ``$ODFD_IPFS_API`` / ``$ODFD_IPFS_GATEWAY``, else ``[ipfs]`` ``api`` /
    ``gateway`` in ``config.toml``, else Kubo's defaults on loopback (``odfd.config`` reads them)."""

    api: str = DEFAULT_IPFS_API
    gateway: str = DEFAULT_IPFS_GATEWAY

    def client(self) -> IpfsClient:
        from storage.ipfs_client import IpfsClient  # the Kubo client pulls in requests/urllib3

        return IpfsClient(self.api)
