"""``odfd data``: inspect data files; ``odfd data hash`` prints the hashes a DataSlice records."""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="inspect data files")
    commands = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    hash_parser = commands.add_parser(
        "hash",
        help="print a Parquet file's logical (arrow-digest) and physical (SHA3-256) hashes",
    )
    hash_parser.add_argument("file", type=Path, help="Parquet data file")
    hash_parser.set_defaults(func=_hash)


def _hash(args: argparse.Namespace) -> int:
    # One read of the file; its bytes and its columns are hashed on every core at once. The read
    # and the physical hash need only hashlib: they start before Arrow and NumPy are imported
    # (a third of a second of CPU), so that the imports overlap them.
    from protocol.hashing.lanes import available_cores
    from protocol.hashing.physical import read_whole

    with ThreadPoolExecutor(available_cores(), thread_name_prefix="odfd-hash") as pool:
        reading = read_whole(args.file, pool)
        from protocol.hashing.parquet_files import hash_parquet_file

        hashes = hash_parquet_file(args.file, pool, reading)
    print(f"logicalHash: {hashes.logical}")
    print(f"physicalHash: {hashes.physical}")
    return 0
