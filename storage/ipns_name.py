"""IPNS names, apart from the IPFS client so that naming a dataset's IPNS name (``odfd status``)
loads no HTTP client."""

from __future__ import annotations

from dataclasses import dataclass

from multiformats import CID, multibase, multihash

from protocol.errors import ParseError

_LIBP2P_KEY = "libp2p-key"


@dataclass(frozen=True, slots=True)
class IpnsName:
    """An IPNS name: the multihash of the publishing key's public key.

    Kubo prints it as a `k51…` CID, js-ipfs as a base58btc peer id (`12D3Koo…`); both parse to
    the same name. `str()` is the CID form; requests send `peer_id`, which both nodes resolve.
    """

    key_multihash: bytes

    @classmethod
    def parse(cls, text: str) -> IpnsName:
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
        return multibase.encode(self.key_multihash, "base58btc")[1:]

    def __str__(self) -> str:
        return str(CID("base36", 1, _LIBP2P_KEY, self.key_multihash))
