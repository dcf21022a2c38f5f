"""The volumes' typed error, importable without the S3 client."""

from __future__ import annotations

from odfd.errors import OdfdError


class VolumeError(OdfdError):
    """A volume this node cannot use; ``code`` names the condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
