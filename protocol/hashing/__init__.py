"""Data hashes: the logical hash of tabular data (arrow-digest) and the physical hash of files.

``logical_hash`` / ``RecordsDigest`` / ``logical_hash_parquet`` compute ``DataSlice.logicalHash``
(multicodec ``arrow0-sha3-256``; ``FileDigest`` while writing a file, ``exact_batches`` when
reading one, in the reference's batches); ``physical_hash_file`` / ``physical_hash_bytes`` compute
``DataSlice.physicalHash`` and checkpoint hashes (``sha3-256``; ``PhysicalHasher`` while writing).
"""

from protocol.hashing.errors import (
    DataFileError,
    HashingError,
    SchemaMismatchError,
    UnsupportedDataTypeError,
)
from protocol.hashing.physical import PhysicalHasher, physical_hash_bytes, physical_hash_file
from protocol.hashing.records_digest import (
    PARQUET_BATCH_ROWS,
    FileDigest,
    RecordsDigest,
    exact_batches,
    logical_hash,
    logical_hash_parquet,
)

__all__ = [
    "PARQUET_BATCH_ROWS",
    "DataFileError",
    "FileDigest",
    "HashingError",
    "PhysicalHasher",
    "RecordsDigest",
    "SchemaMismatchError",
    "UnsupportedDataTypeError",
    "exact_batches",
    "logical_hash",
    "logical_hash_parquet",
    "physical_hash_bytes",
    "physical_hash_file",
]
