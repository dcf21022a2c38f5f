"""The base class of the odfd layer's errors (CLI, configuration, coordinator, server, daemon)."""

from __future__ import annotations

from protocol.errors import OdfError


class OdfdError(OdfError):
    """Base class of errors raised by the node itself rather than by a lower layer."""
