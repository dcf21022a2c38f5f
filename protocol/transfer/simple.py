"""Simple Transfer Protocol (RFC-007): the object keys under a dataset's base URL.

The protocol is "read an object by key": ``refs/head`` holds the head block's multibase hash,
``blocks/<hash>`` the block bytes, ``data/<hash>`` and ``checkpoints/<hash>`` the object files.
A dataset folder, an HTTP server and an IPFS directory all serve the same keys, so clients walk
any of them the same way. Keys use the canonical base16 multibase names of the spec's layout.
"""

from __future__ import annotations

from enum import Enum

from protocol.errors import ParseError
from protocol.identity import Multihash

HEAD_REF = "head"
MAX_REF_BYTES = 256
"""A ref holds one multibase hash; anything longer is not a ref."""


class ObjectKind(Enum):
    """The folders of content-addressed objects; values are the key prefixes."""

    BLOCK = "blocks"
    DATA = "data"
    CHECKPOINT = "checkpoints"


def ref_key(name: str = HEAD_REF) -> str:
    if not name or "/" in name or name.startswith("."):
        raise ParseError(f"invalid ref name {name!r}")
    return f"refs/{name}"


def object_key(kind: ObjectKind, hash: Multihash) -> str:
    return f"{kind.value}/{hash.to_multibase()}"


def parse_ref(body: bytes, where: str) -> Multihash:
    """The hash a ref file or ``GET refs/head`` answer holds (surrounding whitespace allowed)."""
    if len(body) > MAX_REF_BYTES:
        raise ParseError(f"{where}: a ref is at most {MAX_REF_BYTES} bytes, got {len(body)}")
    try:
        text = body.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ParseError(f"{where}: ref is not ASCII text") from None
    try:
        return Multihash.from_multibase(text)
    except ParseError as err:
        raise ParseError(f"{where}: ref does not hold a multihash: {err}") from None
