"""What the transports without a Smart Transfer Protocol endpoint share: their URL is the text
the user gave, their default dataset name is that URL's last segment, and those reached through
the IPFS node count against that one node as their peer. A mixin of plain properties (no fields,
no ``__slots__`` of its own) so each transport stays a frozen, slotted dataclass."""

from __future__ import annotations

from odfd.sync.transport.base import SmartEndpoint, name_from_url
from protocol.identity import DatasetName

IPFS_PEER = "ipfs"
"""Every ``ipfs://``, ``ipns://`` and DID remote is fetched through the one IPFS node."""


class PlainTransport:
    """``url``, ``smart`` and ``default_name`` of a remote named by a URL and read file by file."""

    __slots__ = ()
    text: str
    """The URL as given, without a trailing slash."""

    @property
    def url(self) -> str:
        return self.text

    @property
    def smart(self) -> SmartEndpoint | None:
        return None

    def default_name(self) -> DatasetName | None:
        return name_from_url(self.url)


class ThroughIpfsNode(PlainTransport):
    """A plain transport whose every request goes through the IPFS node (``peer_key``)."""

    __slots__ = ()

    def peer_key(self) -> str:
        return IPFS_PEER
