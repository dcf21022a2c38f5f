"""Why a pull or push did not happen; each message says what to do about it."""

from __future__ import annotations

from dataclasses import dataclass

from odfd.errors import OdfdError
from protocol.identity import Multihash


class SyncError(OdfdError):
    """Base class of replication errors."""


class UnsupportedUrlError(SyncError):
    """The URL's scheme or form is not one odfd can pull from / push to."""


class CorruptSourceError(SyncError):
    """The remote sent something that fails verification: wrong bytes for a hash, a block that
    does not link, an object of the wrong size, an unsafe tarball. Nothing was committed."""


class AccessDeniedError(SyncError):
    """The remote refused the request (missing or invalid token)."""


class RemoteNotFoundError(SyncError, LookupError):
    """The remote has no dataset at that address."""


class TransferFlowError(SyncError):
    """The peer broke the Smart Transfer Protocol's message flow."""


@dataclass(frozen=True, slots=True)
class ChainPoint:
    hash: Multihash | None
    sequence_number: int | None

    def __str__(self) -> str:
        if self.hash is None:
            return "<empty>"
        return f"{self.hash} (#{self.sequence_number})"


class DivergedError(SyncError):
    """The two histories forked: each side has blocks the other lacks."""

    def __init__(
        self,
        what: str,
        local: ChainPoint,
        remote: ChainPoint,
        common: ChainPoint | None,
        *,
        hint: str = "use --force to replace the other side's history",
    ) -> None:
        split = (
            f"they share history up to block {common}"
            if common is not None and common.hash
            else "they share no block (different datasets or seeds)"
        )
        super().__init__(
            f"{what}: histories diverged: local head {local}, remote head {remote}; {split}; {hint}"
        )
        self.local = local
        self.remote = remote
        self.common = common


class RemoteAheadError(SyncError):
    """A push found the remote further ahead on the same history: pull first."""
