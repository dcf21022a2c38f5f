"""An independent checker of a query answer's proof, in a few lines on hashlib, base58 and
PyNaCl: nothing of odfd's encodings, so a proof it accepts is one any client can check."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import base58
from nacl.signing import VerifyKey


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, ASCII with escapes (enough for answers without floats)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def sha3_multihash(data: bytes) -> str:
    return "f1620" + hashlib.sha3_256(data).hexdigest()


def check(answer: dict[str, Any]) -> None:
    """Raises unless the answer's commitment holds for its parts and its signature holds."""
    commitment = answer["commitment"]
    for part, name in (
        ("input", "inputHash"),
        ("output", "outputHash"),
        ("subQueries", "subQueriesHash"),
    ):
        assert commitment[name] == sha3_multihash(canonical(answer[part])), name
    did = answer["proof"]["verificationMethod"]
    key = base58.b58decode(did.removeprefix("did:key:z"))
    assert key[:2] == b"\xed\x01", "not an ed25519 did:key"
    value = answer["proof"]["proofValue"]
    signature = base64.urlsafe_b64decode(value[1:] + "=" * (-len(value[1:]) % 4))
    VerifyKey(key[2:]).verify(canonical(commitment), signature)
