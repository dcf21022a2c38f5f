"""``odfd block``: hash, encode and decode single metadata blocks (YAML manifests or binary)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odfd.app.block_files import decode_block_file, encode_block_file, hash_of, load_block_file


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("block", help="hash, encode and decode metadata blocks")
    commands = parser.add_subparsers(dest="block_command", metavar="ACTION", required=True)

    hash_parser = commands.add_parser("hash", help="print the block's multihash (last line)")
    hash_parser.add_argument(
        "file", type=Path, help="YAML block manifest or binary (FlatBuffers) block"
    )
    hash_parser.set_defaults(func=_hash)

    encode_parser = commands.add_parser(
        "encode", help="write the canonical binary form of a YAML block"
    )
    encode_parser.add_argument("file", type=Path, help="YAML block manifest")
    encode_parser.add_argument(
        "-o", "--output", type=Path, required=True, help="binary block to write"
    )
    encode_parser.set_defaults(func=_encode)

    decode_parser = commands.add_parser("decode", help="print a binary block as a YAML manifest")
    decode_parser.add_argument("file", type=Path, help="binary (FlatBuffers) block")
    decode_parser.set_defaults(func=_decode)


def _hash(args: argparse.Namespace) -> int:
    block, data = load_block_file(args.file)
    print(f"sequence number: {block.sequence_number}")
    print(f"event: {type(block.event).__name__}")
    print(hash_of(data))
    return 0


def _encode(args: argparse.Namespace) -> int:
    print(encode_block_file(args.file, args.output), file=sys.stderr)
    return 0


def _decode(args: argparse.Namespace) -> int:
    sys.stdout.write(decode_block_file(args.file))
    return 0
