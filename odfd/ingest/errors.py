"""Errors of the ingest pipeline; each message names the source, file, record or field at fault."""

from __future__ import annotations

from odfd.errors import OdfdError


class IngestError(OdfdError):
    """Ingest could not complete; the dataset is left as it was."""


class UnsupportedError(IngestError):
    """The source uses a step, format or option odfd cannot run."""


class FetchError(IngestError):
    """The data could not be obtained from its source (missing file, HTTP error, ...)."""


class PrepareError(IngestError):
    """A prepare step (decompress, pipe) failed."""


class BadInputError(IngestError):
    """The input data is malformed: names the file, the row and the column."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        record: int | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.record = record
        self.column = column


class MergeError(IngestError):
    """New data cannot be merged with the dataset's history under its merge strategy."""


class SourceError(IngestError):
    """The dataset has no usable source (none defined, disabled, or ambiguous)."""
