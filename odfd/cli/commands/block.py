"""``odfd block``: hash, encode and decode single metadata blocks (YAML manifests or binary)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odfd.errors import OdfdError
from protocol.codec import yaml as block_yaml
from protocol.codec.flatbuffers import block_hash, decode_block, encode_block
from protocol.errors import DecodeError
from protocol.model import MetadataBlock


class BlockFileError(OdfdError):
    """A block file cannot be read."""


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


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise BlockFileError(f"cannot read {path}: {error.strerror or error}") from None


def _load(path: Path) -> tuple[MetadataBlock, bytes]:
    """The block in ``path`` and its canonical bytes, whichever form the file holds."""
    data = _read(path)
    if _looks_binary(data):
        try:
            return decode_block(data), data
        except DecodeError as error:
            raise DecodeError(f"{path}: {error}") from None
    block = block_yaml.load_block(data, source=str(path))
    return block, encode_block(block)


def _looks_binary(data: bytes) -> bool:
    """A FlatBuffers block starts with a small root offset and is rarely valid UTF-8 text."""
    if b"\0" in data[:64]:
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return True
    return False


def _hash(args: argparse.Namespace) -> int:
    block, data = _load(args.file)
    print(f"sequence number: {block.sequence_number}")
    print(f"event: {type(block.event).__name__}")
    print(block_hash(data))
    return 0


def _encode(args: argparse.Namespace) -> int:
    block = block_yaml.load_block(_read(args.file), source=str(args.file))
    data = encode_block(block)
    try:
        args.output.write_bytes(data)
    except OSError as error:
        raise BlockFileError(f"cannot write {args.output}: {error.strerror or error}") from None
    print(block_hash(data), file=sys.stderr)
    return 0


def _decode(args: argparse.Namespace) -> int:
    data = _read(args.file)
    try:
        block = decode_block(data)
    except DecodeError as error:
        raise DecodeError(f"{args.file}: {error}") from None
    sys.stdout.write(block_yaml.dump_block(block))
    return 0
