"""Decentralized identifiers of datasets: ``did:odf`` and its twin ``did:key``.

Both wrap an ed25519 public key. The canonical binary form, stored in FlatBuffers
(``Seed.datasetId``, ``ExecuteTransformInput.datasetId``), is the ``ed25519-pub`` multicodec
varint (``ed 01``) followed by the 32 key bytes. ``did:odf`` differs from ``did:key`` only in its
canonical text encoding: base16 (``did:odf:fed01…``) rather than base58btc (``did:key:z6Mk…``);
both parse from any final multibase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

if TYPE_CHECKING:
    from nacl.signing import SigningKey

from protocol.errors import DecodeError
from protocol.identity import multibase
from protocol.identity._errors import InvalidText
from protocol.identity.multibase import Multibase
from protocol.identity.multicodec import Multicodec
from protocol.identity.varint import encode_varint

ED25519_PUBLIC_KEY_SIZE = 32
_KEY_PREFIX = encode_varint(Multicodec.ED25519_PUB)
_MAX_MULTIBASE_LEN = 128
"""Far above the longest key we accept in any final multibase (base16: 1 + 2 * 34)."""


@dataclass(frozen=True, slots=True, order=True, repr=False)
class _Ed25519Did:
    """What ``did:odf`` and ``did:key`` share; ordered by key bytes like the reference."""

    public_key: bytes

    METHOD: ClassVar[str]
    DEFAULT_ENCODING: ClassVar[Multibase]

    def __post_init__(self) -> None:
        if not isinstance(self.public_key, bytes):
            raise TypeError(
                f"a did:{self.METHOD} public key is bytes, got {type(self.public_key).__name__}"
            )
        if len(self.public_key) != ED25519_PUBLIC_KEY_SIZE:
            raise DecodeError(
                f"a did:{self.METHOD} ed25519 public key has {ED25519_PUBLIC_KEY_SIZE} bytes, "
                f"got {len(self.public_key)}"
            )

    @classmethod
    def from_public_key(cls, public_key: bytes) -> Self:
        """Wrap raw ed25519 public key bytes."""
        return cls(bytes(public_key))

    @classmethod
    def new_generated(cls) -> tuple[SigningKey, Self]:
        """A fresh key pair from the OS CSPRNG and the identifier of its public key."""
        from nacl.signing import SigningKey  # here: reading datasets needs no nacl

        key = SigningKey.generate()
        return key, cls(bytes(key.verify_key))

    @classmethod
    def new_seeded(cls, seed: bytes) -> Self:
        """A deterministic identifier for tests, equal to the reference's ``new_seeded_ed25519``.

        Like the reference it fills the "public key" with PRNG output (no signing key exists), so
        seeded ids in kamu-cli's test fixtures reproduce here.
        """
        return cls(_seeded_random_bytes(seed, ED25519_PUBLIC_KEY_SIZE))

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Read the canonical binary form (``ed 01`` + 32 key bytes)."""
        data = bytes(data)
        try:
            return cls(_key_of(data))
        except _Invalid as error:
            raise DecodeError(
                f"bytes {data.hex()!r} are not a valid did:{cls.METHOD}: {error}"
            ) from None

    def to_bytes(self) -> bytes:
        """The canonical binary form, as stored in FlatBuffers."""
        return _KEY_PREFIX + self.public_key

    @property
    def key_type(self) -> Multicodec:
        return Multicodec.ED25519_PUB

    @classmethod
    def from_multibase(cls, text: str) -> Self:
        """Parse the part after ``did:<method>:``, in any final multibase."""
        try:
            return cls(_key_of_multibase(text))
        except _Invalid as error:
            raise InvalidText(text, f"did:{cls.METHOD} key", str(error)) from None

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``did:<method>:<multibase>``."""
        prefix = f"did:{cls.METHOD}:"
        if not text.startswith(prefix):
            raise InvalidText(text, f"did:{cls.METHOD}", f"it must start with {prefix!r}")
        try:
            return cls(_key_of_multibase(text[len(prefix) :]))
        except _Invalid as error:
            raise InvalidText(text, f"did:{cls.METHOD}", str(error)) from None

    def to_multibase(self, encoding: Multibase | None = None) -> str:
        """The DID without ``did:<method>:``, by default in the method's canonical encoding."""
        return multibase.encode(self.to_bytes(), encoding or self.DEFAULT_ENCODING)

    def to_did_string(self, encoding: Multibase | None = None) -> str:
        """``did:<method>:<multibase>``; ``str()`` gives the canonical encoding."""
        return f"did:{self.METHOD}:{self.to_multibase(encoding)}"

    def __str__(self) -> str:
        return self.to_did_string()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class DidKey(_Ed25519Did):
    """A W3C ``did:key`` identifier of an ed25519 public key (canonical text: base58btc)."""

    METHOD: ClassVar[str] = "key"
    DEFAULT_ENCODING: ClassVar[Multibase] = Multibase.BASE58_BTC

    def as_dataset_id(self) -> DatasetId:
        return DatasetId(self.public_key)


@dataclass(frozen=True, slots=True, order=True, repr=False)
class DatasetId(_Ed25519Did):
    """The globally unique, self-issued identity of a dataset: ``did:odf:fed01…``."""

    METHOD: ClassVar[str] = "odf"
    DEFAULT_ENCODING: ClassVar[Multibase] = Multibase.BASE16

    def as_did_key(self) -> DidKey:
        """The same key as ``did:key``, for frameworks that only know that method."""
        return DidKey(self.public_key)


class _Invalid(Exception):
    """Why bytes or text are not a DID; re-raised with context as a typed error."""


def _key_of(data: bytes) -> bytes:
    if not data.startswith(_KEY_PREFIX):
        raise _Invalid(f"expected the ed25519-pub multicodec prefix {_KEY_PREFIX.hex()}")
    key = data[len(_KEY_PREFIX) :]
    if len(key) != ED25519_PUBLIC_KEY_SIZE:
        raise _Invalid(f"an ed25519 public key has {ED25519_PUBLIC_KEY_SIZE} bytes, got {len(key)}")
    return key


def _key_of_multibase(text: str) -> bytes:
    if len(text) > _MAX_MULTIBASE_LEN:
        raise _Invalid("too long")
    try:
        _, data = multibase.decode(text)
    except InvalidText as error:
        raise _Invalid(error.reason) from None
    return _key_of(data)


_MASK64 = (1 << 64) - 1


def _rotl64(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (64 - shift))) & _MASK64


def _seeded_random_bytes(seed: bytes, size: int) -> bytes:
    """Bytes from xoshiro256++ seeded as the reference's PRNG (Rust ``rand`` 0.9 ``SmallRng``).

    The seed is zero-padded to 32 bytes and read as four little-endian u64 words; an all-zero
    state is replaced by SplitMix64 expansion of 0. Output is ``next_u64`` words, little-endian.
    """
    if len(seed) > 32:
        raise ValueError(f"a seed has at most 32 bytes, got {len(seed)}")
    padded = bytes(seed).ljust(32, b"\0")
    state = [int.from_bytes(padded[i : i + 8], "little") for i in range(0, 32, 8)]
    if not any(state):
        state = _splitmix64_state(0)
    s0, s1, s2, s3 = state
    out = bytearray()
    while len(out) < size:
        result = (_rotl64((s0 + s3) & _MASK64, 23) + s0) & _MASK64
        t = (s1 << 17) & _MASK64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _rotl64(s3, 45)
        out += result.to_bytes(8, "little")
    return bytes(out[:size])


def _splitmix64_state(seed: int) -> list[int]:
    state = []
    for _ in range(4):
        seed = (seed + 0x9E3779B97F4A7C15) & _MASK64
        z = seed
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        state.append(z ^ (z >> 31))
    return state
