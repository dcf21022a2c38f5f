"""``odfd data``: inspect data files; ``odfd data hash`` prints the hashes a DataSlice records."""

from __future__ import annotations

import argparse
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
    from odfd.app.file_hashes import hash_data_file

    hashes = hash_data_file(args.file)
    print(f"logicalHash: {hashes.logical}")
    print(f"physicalHash: {hashes.physical}")
    return 0
