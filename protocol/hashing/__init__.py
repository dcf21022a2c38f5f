"""Data hashes: the logical hash of tabular data (arrow-digest) and the physical hash of files.

``logical_hash`` / ``RecordsDigest`` / ``logical_hash_parquet`` compute ``DataSlice.logicalHash``
(multicodec ``arrow0-sha3-256``; ``FileDigest`` while writing a file; ``open_parquet`` and
``hashing_batches`` read one as the hash needs); ``physical_hash_file`` / ``physical_hash_bytes``
compute ``DataSlice.physicalHash`` and checkpoint hashes (``sha3-256``; ``PhysicalHasher`` while
writing); ``hash_parquet_file`` computes both from one read. Given an executor, the hashes run on
its threads, several columns at once.

Names load on first use: the physical hash needs only ``hashlib``, so a caller can start reading
and SHA3-ing a file (``physical.read_whole``) while Arrow and NumPy load for the logical hash.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol.hashing.errors import (
        DataFileError,
        HashingError,
        SchemaMismatchError,
        UnsupportedDataTypeError,
    )
    from protocol.hashing.lanes import available_cores
    from protocol.hashing.parquet_files import (
        FileHashes,
        hash_parquet_file,
        hashing_batches,
        logical_hash_parquet,
        open_parquet,
    )
    from protocol.hashing.physical import (
        PhysicalHasher,
        physical_hash_bytes,
        physical_hash_file,
    )
    from protocol.hashing.records_digest import (
        PARQUET_BATCH_ROWS,
        FileDigest,
        RecordsDigest,
        exact_batches,
        logical_hash,
    )

_MODULES = {
    "errors": ("DataFileError", "HashingError", "SchemaMismatchError", "UnsupportedDataTypeError"),
    "lanes": ("available_cores",),
    "parquet_files": (
        "FileHashes",
        "hash_parquet_file",
        "hashing_batches",
        "logical_hash_parquet",
        "open_parquet",
    ),
    "physical": ("PhysicalHasher", "physical_hash_bytes", "physical_hash_file"),
    "records_digest": (
        "PARQUET_BATCH_ROWS",
        "FileDigest",
        "RecordsDigest",
        "exact_batches",
        "logical_hash",
    ),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "PARQUET_BATCH_ROWS",
    "DataFileError",
    "FileDigest",
    "FileHashes",
    "HashingError",
    "PhysicalHasher",
    "RecordsDigest",
    "SchemaMismatchError",
    "UnsupportedDataTypeError",
    "available_cores",
    "exact_batches",
    "hash_parquet_file",
    "hashing_batches",
    "logical_hash",
    "logical_hash_parquet",
    "open_parquet",
    "physical_hash_bytes",
    "physical_hash_file",
]
