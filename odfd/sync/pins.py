"""Releasing the IPFS pin a mirror holds on its dataset's folder, once the mirror is gone: by
``odfd mirror remove`` and by the daemon when a sync pinned a newer folder meanwhile."""

from __future__ import annotations

from odfd.config import IpfsConfig
from odfd.errors import OdfdError
from protocol.errors import ParseError
from storage.ipfs_client import IpfsClient, IpfsError, IpfsNotFoundError, parse_cid

UNPIN_TIMEOUT = 30.0
"""Seconds to wait for the IPFS node when releasing a pin (removing a mirror must not hang)."""


class PinReleaseError(OdfdError):
    """A removed mirror's pin is still in the IPFS node: the node was unreachable or refused."""


async def release_pin(ipfs: IpfsConfig, cid: str) -> None:
    """Unpin the dataset folder a mirror pinned, once the mirror is gone (a pin already removed by
    hand is fine). ``PinReleaseError`` names the CID, the node and the command that removes it."""
    try:
        await IpfsClient(ipfs.api, timeout=UNPIN_TIMEOUT).pin_rm(parse_cid(cid))
    except IpfsNotFoundError:
        return
    except (IpfsError, ParseError) as err:
        raise PinReleaseError(
            f"could not unpin ipfs://{cid}: {err}; it stays pinned until removed "
            f"by hand (`ipfs pin rm {cid}`)"
        ) from err
