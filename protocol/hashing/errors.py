"""Typed errors of the data hashes; each names the column, file or field at fault."""

from __future__ import annotations

from protocol.errors import ProtocolError


class HashingError(ProtocolError):
    """Base class of errors raised while computing a logical or physical data hash."""


class UnsupportedDataTypeError(HashingError, TypeError):
    """A column's Arrow type has no encoding in arrow-digest ``RecordsDigestV0``.

    The reference (kamu-cli) cannot hash such data either, so inventing an encoding would give
    hashes no other implementation can check.
    """

    def __init__(self, column: str, data_type: object, reason: str = "") -> None:
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"column '{column}' has type {data_type}, which the arrow-digest logical hash "
            f"does not support{detail}"
        )
        self.column = column
        self.data_type = data_type
        self.reason = reason


class SchemaMismatchError(HashingError, ValueError):
    """A record batch does not have the schema the digest was created for."""


class DataFileError(HashingError, OSError):
    """A data file cannot be read, or is not a Parquet file."""
