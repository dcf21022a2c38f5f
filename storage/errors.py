"""Typed errors of the storage layer; every message names the dataset, object, ref or block."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from protocol.errors import OdfError

if TYPE_CHECKING:
    from protocol.identity import Multihash


class StorageError(OdfError):
    """Base class of storage errors."""


class ObjectNotFoundError(StorageError, LookupError):
    """A content-addressed object is not in the store."""

    def __init__(self, store: str, hash: Multihash) -> None:
        super().__init__(f"object {hash} not found in {store}")
        self.store = store
        self.hash = hash


class HashMismatchError(StorageError):
    """Bytes offered under a hash (or read back from a store) hash to something else."""

    def __init__(self, where: str, expected: Multihash, actual: Multihash) -> None:
        super().__init__(f"{where}: content hashes to {actual}, expected {expected}")
        self.expected = expected
        self.actual = actual


class SizeMismatchError(StorageError):
    """A file's size differs from the size a block records for it."""

    def __init__(self, where: str, expected: int, actual: int) -> None:
        super().__init__(f"{where}: size is {actual} bytes, block records {expected}")
        self.expected = expected
        self.actual = actual


class RefCasError(StorageError):
    """A reference was not at the expected value: someone else moved it first."""

    def __init__(self, where: str, expected: Multihash | None, actual: Multihash | None) -> None:
        super().__init__(
            f"{where} moved meanwhile: another write won (expected {expected or '<unset>'}, "
            f"found {actual or '<unset>'}); this one was not recorded, run it again"
        )
        self.expected = expected
        self.actual = actual


class CorruptRefError(StorageError):
    """A reference file does not hold a multihash."""


class DatasetNotFoundError(StorageError, LookupError):
    """No dataset matches a reference in this workspace."""


class DatasetExistsError(StorageError):
    """A dataset with the same id or alias is already in the workspace."""


class WorkspaceError(StorageError):
    """The workspace is missing, already exists, or is malformed."""


class InvalidSnapshotError(StorageError):
    """A DatasetSnapshot manifest cannot be turned into a dataset."""


class ChainRuleError(StorageError):
    """A block breaks a rule of the metadata chain.

    ``rule`` is a stable identifier (``prev-offset``, ``seed-first``, ...) that tests and callers
    can match; the message names the block by sequence number and hash.
    """

    def __init__(
        self,
        rule: str,
        message: str,
        *,
        sequence_number: int | None = None,
        block_hash: Multihash | None = None,
    ) -> None:
        where = "block"
        if sequence_number is not None:
            where += f" #{sequence_number}"
        if block_hash is not None:
            where += f" {block_hash}"
        super().__init__(f"{where} breaks rule [{rule}]: {message}")
        self.rule = rule
        self.sequence_number = sequence_number
        self.block_hash = block_hash


class DiskFullError(StorageError):
    """A write failed because the file system is full (or over quota); what was being written
    was removed again, so nothing half-written is visible."""


def disk_full(err: OSError, where: object) -> DiskFullError | None:
    """``err`` as a ``DiskFullError`` naming ``where`` if it is ENOSPC / EDQUOT, else ``None``."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(f"no space left on device writing {where}")
    return None
