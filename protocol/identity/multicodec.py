"""Multicodec codes ODF uses (https://github.com/multiformats/multicodec/blob/master/table.csv).

The public codes match the multiformats table. ``ARROW0_SHA3_256``, ``ODF_METADATA_BLOCK`` and
``ODF_DATASET_SNAPSHOT`` are ODF's own codes, absent from that table, with the values the reference
assigns them; they are defined here rather than registered in the ``multiformats`` package's global
table, which nothing in odfd consults.
"""

from __future__ import annotations

from enum import IntEnum

from protocol.errors import ParseError


class Multicodec(IntEnum):
    """A multicodec code; ``str()`` gives the table's name (e.g. ``sha3-256``)."""

    CIDV1 = 0x01
    SHA2_256 = 0x12
    SHA3_256 = 0x16
    ED25519_PUB = 0xED
    MULTIDID = 0x0D1D
    ARROW0_SHA3_256 = 0x30_0016
    ODF_METADATA_BLOCK = 0x40_0000
    ODF_DATASET_SNAPSHOT = 0x40_0001

    def __str__(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> Multicodec:
        """Look a code up by its table name, as the reference's text forms spell it."""
        try:
            return _BY_NAME[name]
        except KeyError:
            raise ParseError(f"unsupported multicodec name {name!r}") from None


_NAMES = {
    Multicodec.CIDV1: "cidv1",
    Multicodec.SHA2_256: "sha2-256",
    Multicodec.SHA3_256: "sha3-256",
    Multicodec.ED25519_PUB: "ed25519-pub",
    Multicodec.MULTIDID: "multidid",
    Multicodec.ARROW0_SHA3_256: "arrow0-sha3-256",
    Multicodec.ODF_METADATA_BLOCK: "odf-metadata-block",
    Multicodec.ODF_DATASET_SNAPSHOT: "odf-dataset-snapshot",
}
_BY_NAME = {name: code for code, name in _NAMES.items()}
