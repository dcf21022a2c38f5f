"""Single metadata blocks in files (``odfd block``): a YAML manifest or the canonical binary
(FlatBuffers) form, read, hashed, encoded and decoded as kamu-cli's chain stores them."""

from __future__ import annotations

from pathlib import Path

from odfd.errors import OdfdError
from protocol.codec import yaml as block_yaml
from protocol.codec.flatbuffers import block_hash, decode_block, encode_block
from protocol.errors import DecodeError
from protocol.identity import Multihash
from protocol.model import MetadataBlock


class BlockFileError(OdfdError):
    """A block file cannot be read."""


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise BlockFileError(f"cannot read {path}: {error.strerror or error}") from None


def load_block_file(path: Path) -> tuple[MetadataBlock, bytes]:
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


def hash_of(data: bytes) -> Multihash:
    """The multihash of a block's canonical bytes (what the chain names it by)."""
    return block_hash(data)


def encode_block_file(path: Path, output: Path) -> Multihash:
    """Writes the canonical binary form of the YAML block in ``path`` to ``output``; its hash."""
    data = encode_block(block_yaml.load_block(_read(path), source=str(path)))
    try:
        output.write_bytes(data)
    except OSError as error:
        raise BlockFileError(f"cannot write {output}: {error.strerror or error}") from None
    return block_hash(data)


def decode_block_file(path: Path) -> str:
    """The binary block in ``path`` as a YAML manifest."""
    data = _read(path)
    try:
        block = decode_block(data)
    except DecodeError as error:
        raise DecodeError(f"{path}: {error}") from None
    return block_yaml.dump_block(block)
