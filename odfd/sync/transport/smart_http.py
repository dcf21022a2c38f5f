"""``http(s)://`` and ``odf+http(s)://`` with the Smart Transfer Protocol: a pull takes one
metadata tarball and the objects from the server's signed download URLs, falling back to the
Simple Transfer Protocol (``simple_http``, whose reading this transport shares) when the server
does not speak it, unless the URL says ``odf+`` or ``--protocol smart``; a push sends the
tarball and uploads the objects to the server's signed upload URLs, authorised by the bearer
token, and the server verifies and commits atomically or reports divergence (``smart_push``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.sync.transport.base import SmartEndpoint
from odfd.sync.transport.simple_http import SimpleHttpTransport

if TYPE_CHECKING:
    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget


@dataclass(frozen=True, slots=True)
class SmartHttpTransport(SimpleHttpTransport):
    required: bool = False
    """The Smart Transfer Protocol or nothing (``odf+http(s)://``, ``--protocol smart``)."""

    @property
    def smart(self) -> SmartEndpoint | None:
        return SmartEndpoint(self.http_base, self.token, self.required)

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.smart_push import push_smart

        return await push_smart(self, target, options, progress)
