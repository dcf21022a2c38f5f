"""The base class of the odfd layer's errors (CLI, configuration, coordinator, server, daemon)."""

from __future__ import annotations

from protocol.errors import OdfError


class OdfdError(OdfError):
    """Base class of errors raised by the node itself rather than by a lower layer."""


class ManifestError(OdfdError):
    """A manifest (a ``DatasetSnapshot`` for ``odfd add``, a resource for ``odfd apply``) cannot
    be read or is invalid; the message names the file, URL or stdin, the document and the field."""
