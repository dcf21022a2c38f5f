"""IPNS names, apart from the IPFS client so that naming a dataset's IPNS name (``odfd status``)
loads no HTTP client, and printing one loads neither ``multiformats`` nor protobuf (together
~0.1 s of a command that takes 0.15 s): a dataset's name is a fixed layout around its DID's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ParseError

if TYPE_CHECKING:
    from protocol.identity import DatasetId

_LIBP2P_KEY = "libp2p-key"
_CID_V1_LIBP2P_KEY = b"\x01\x72"  # CID version 1, multicodec libp2p-key
_ED25519_PUBLIC_KEY = b"\x08\x01\x12\x20"
"""libp2p's ``PublicKey`` protobuf up to its key: ``Type`` (field 1, varint) Ed25519 (1), then
``Data`` (field 2, bytes) of 32 bytes. libp2p requires this deterministic encoding of peer keys."""
_IDENTITY_MULTIHASH = b"\x00"
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class IpnsName:
    """An IPNS name: the multihash of the publishing key's public key.

    Kubo prints it as a `k51…` CID, js-ipfs as a base58btc peer id (`12D3Koo…`); both parse to
    the same name. `str()` is the CID form; requests send `peer_id`, which both nodes resolve.
    """

    key_multihash: bytes

    @classmethod
    def parse(cls, text: str) -> IpnsName:
        from multiformats import CID, multibase, multihash

        name = text.strip().removeprefix("/ipns/")
        try:
            if name.startswith(("Qm", "1")):
                raw = multibase.decode("z" + name)
            else:
                cid = CID.decode(name)
                if cid.codec.name != _LIBP2P_KEY:
                    raise ValueError(f"CID codec is {cid.codec.name}, not {_LIBP2P_KEY}")
                raw = bytes(cid.digest)
            multihash.unwrap(raw)
        except (ValueError, KeyError) as err:
            raise ParseError(
                f"{text!r} is not an IPNS name (peer id or {_LIBP2P_KEY} CID): {err}"
            ) from err
        return cls(raw)

    @property
    def peer_id(self) -> str:
        from multiformats import multibase

        return multibase.encode(self.key_multihash, "base58btc")[1:]

    def __str__(self) -> str:
        """The ``k51…`` CID (multibase base36 of the CID's bytes; they begin with 0x01, so
        there are no leading zero bytes for the multibase to spell out)."""
        number = int.from_bytes(_CID_V1_LIBP2P_KEY + self.key_multihash, "big")
        digits = []
        while number:
            number, digit = divmod(number, 36)
            digits.append(_BASE36[digit])
        return "k" + "".join(reversed(digits))


def ipns_name_of(dataset_id: DatasetId) -> IpnsName:
    """The IPNS name of a dataset: the identity multihash of its libp2p public key."""
    public_key = _ED25519_PUBLIC_KEY + dataset_id.public_key
    return IpnsName(_IDENTITY_MULTIHASH + bytes([len(public_key)]) + public_key)
