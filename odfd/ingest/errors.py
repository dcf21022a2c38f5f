"""The errors an ingest raises; each message names the source, file, record or field at fault.

Fetching, preparing and choosing a source are odfd's own steps (their errors are defined here);
reading, preprocessing and merging run in the engine, whose errors share the base
:class:`~verifier.engine.errors.IngestError` and are listed here too, so a caller catches any
ingest failure from this one module.
"""

from __future__ import annotations

from verifier.engine.errors import BadInputError, IngestError, MergeError, UnsupportedError

__all__ = [
    "BadInputError",
    "FetchError",
    "IngestError",
    "MergeError",
    "PrepareError",
    "SourceError",
    "UnsupportedError",
]


class FetchError(IngestError):
    """The data could not be obtained from its source (missing file, HTTP error, ...)."""


class PrepareError(IngestError):
    """A prepare step (decompress, pipe) failed."""


class SourceError(IngestError):
    """The dataset has no usable source (none defined, disabled, or ambiguous)."""
