"""Whether the node's IPFS daemon answers, and who it is: what the console's node page shows."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from protocol.errors import OdfError
from storage.ipfs_client import IpfsClient

#: How long the IPFS node has to answer: the page waits for it.
IPFS_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class IpfsStatus:
    api: str
    """The Kubo RPC address asked."""
    error: str | None = None
    """Why it did not answer (its first words, at most 200 characters); None: online."""
    peer_id: str | None = None
    agent: str | None = None
    addresses: tuple[str, ...] = ()
    """Its first five addresses."""


async def ipfs_status(api: str) -> IpfsStatus:
    """Asks the IPFS node at ``api`` who it is, with a short timeout."""
    try:
        client = IpfsClient(api, timeout=IPFS_TIMEOUT)
        info = await asyncio.wait_for(client.id(), IPFS_TIMEOUT + 1)
    except (OdfError, TimeoutError, OSError) as err:
        message = str(err) or type(err).__name__
        return IpfsStatus(api, error=message.split(": HTTP")[0][:200])
    return IpfsStatus(api, None, info.peer_id, info.agent_version, tuple(info.addresses[:5]))
