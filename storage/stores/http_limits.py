"""Time-outs for talking to a peer, kept apart from the HTTP client so reading the config stays
cheap (``odfd.config`` builds them before any command knows whether it talks to a peer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.frozen import frozen_dataclass

if TYPE_CHECKING:
    import aiohttp


@frozen_dataclass
class HttpLimits:
    """Time-outs for talking to a peer (seconds; ``min_rate`` in bytes per second, 0: none)."""

    connect: float = 10.0
    first_byte: float = 30.0
    """Longest wait for an answer to start, and for the next bytes of one that stopped."""
    min_rate: int = 1024
    rate_window: float = 30.0
    """A transfer receiving less than ``min_rate * rate_window`` bytes in a window stalled."""

    def client_timeout(self) -> aiohttp.ClientTimeout:
        import aiohttp

        return aiohttp.ClientTimeout(
            total=None, sock_connect=self.connect, sock_read=self.first_byte
        )
