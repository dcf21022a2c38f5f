"""The hashes a DataSlice records for a Parquet file (``odfd data hash``): its logical
(arrow-digest) and physical (SHA3-256) hashes, from one read of the file hashed on every core."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocol.hashing.parquet_files import FileHashes


def hash_data_file(path: Path) -> FileHashes:
    """Both hashes of the Parquet file at ``path``. The read and the physical hash need only
    hashlib: they start before Arrow and NumPy are imported (a third of a second of CPU), so
    that the imports overlap them."""
    from protocol.hashing.lanes import available_cores
    from protocol.hashing.physical import read_whole

    with ThreadPoolExecutor(available_cores(), thread_name_prefix="odfd-hash") as pool:
        reading = read_whole(path, pool)
        from protocol.hashing.parquet_files import hash_parquet_file

        return hash_parquet_file(path, pool, reading)
