"""The errors every engine raises, whatever it is: callers catch these, never an engine's own.

Transforms and queries fail as :class:`TransformError` (its kinds say why); an ingest fails as
:class:`IngestError`, naming the file, record or field at fault. A failure of the engine's own
machinery that it could not turn into one of these is an :class:`EngineFailureError`, so no
caller needs to know which library an engine is built on.
"""

from __future__ import annotations

from verifier.errors import VerifierError


class EngineStartError(VerifierError):
    """An engine could not be started, or was asked to restart with different settings."""


class EngineFailureError(VerifierError):
    """The engine's own machinery failed in a way it has no better error for."""

    def __init__(self, engine: str, reason: str) -> None:
        super().__init__(f"{engine} failed: {reason}")
        self.engine = engine
        self.reason = reason


class TransformError(VerifierError):
    """The transform cannot run or its result is not a valid slice."""


class UnsupportedTransformError(TransformError):
    """The transform needs an engine or a feature odfd does not have."""


class EngineNotAvailableError(UnsupportedTransformError):
    """The transform names an engine odfd does not have (Flink, RisingWave, anything unknown)."""

    def __init__(self, message: str, engine: str) -> None:
        super().__init__(message)
        self.engine = engine


class InvalidQueryError(TransformError):
    """The engine rejected a query (syntax, unknown table or column, types...)."""


class NonDeterministicQueryError(VerifierError):
    """A transform query uses a function whose result is not reproducible."""


class QueryExecutionError(VerifierError):
    """The engine accepted a query but failed while running it (a bad cast, an overflow...)."""


class CheckpointError(VerifierError):
    """A checkpoint file is not one this engine wrote."""


class IngestError(VerifierError):
    """Ingest could not complete; the dataset is left as it was."""


class UnsupportedError(IngestError):
    """The source uses a step, format or option odfd cannot run."""


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
