"""Ed25519 signatures and private keys in the multibase text forms the reference uses.

A signature is 64 bytes, written ``u`` + unpadded base64url (as in a query proof's
``proofValue``); a private key is the 32-byte ed25519 seed, written the same way in the
reference's configuration. Both read from any final multibase encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.identity import multibase
from protocol.identity._errors import InvalidText
from protocol.identity.multibase import Multibase

SIGNATURE_SIZE = 64
PRIVATE_KEY_SIZE = 32


@dataclass(frozen=True, slots=True, repr=False)
class Signature:
    """The 64 bytes of an ed25519 signature (``R`` then ``s``)."""

    data: bytes

    def __post_init__(self) -> None:
        if len(self.data) != SIGNATURE_SIZE:
            raise ValueError(
                f"an ed25519 signature has {SIGNATURE_SIZE} bytes, got {len(self.data)}"
            )

    @classmethod
    def from_multibase(cls, text: str) -> Signature:
        data = _decode(text, "signature")
        if len(data) != SIGNATURE_SIZE:
            raise InvalidText(
                text,
                "signature",
                f"Invalid signature length, expected {SIGNATURE_SIZE} actual {len(data)}",
            )
        return cls(data)

    def to_multibase(self, encoding: Multibase = Multibase.BASE64_URL) -> str:
        return multibase.encode(self.data, encoding)

    def __str__(self) -> str:
        return self.to_multibase()

    def __repr__(self) -> str:
        return f"Signature({self})"


def parse_private_key(text: str) -> bytes:
    """The 32-byte ed25519 seed of a multibase private key (``u…`` in the reference's config)."""
    data = _decode(text.strip(), "private key")
    if len(data) != PRIVATE_KEY_SIZE:
        raise InvalidText(
            "<hidden>",
            "private key",
            f"Invalid private key length, expected {PRIVATE_KEY_SIZE} actual {len(data)}",
        )
    return data


def private_key_to_multibase(seed: bytes) -> str:
    """The reference's text form of a private key seed (``u`` + base64url)."""
    if len(seed) != PRIVATE_KEY_SIZE:
        raise ValueError(f"an ed25519 seed has {PRIVATE_KEY_SIZE} bytes, got {len(seed)}")
    return multibase.encode(seed, Multibase.BASE64_URL)


def _decode(text: str, what: str) -> bytes:
    if len(text) > 1024:
        raise InvalidText(text[:16] + "…", what, "too long")
    try:
        return multibase.decode(text)[1]
    except InvalidText as error:
        shown = text if what == "signature" else "<hidden>"
        raise InvalidText(shown, what, error.reason) from None
