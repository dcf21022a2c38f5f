"""The owner's side of signed heads: a node holding a dataset's private key signs its head
every time the head moves, and re-signs it on request (a heartbeat that lets mirrors tell a
quiet dataset from a frozen peer).

The document goes to ``refs/head.sig`` beside ``refs/head`` (served and published with the
dataset folder) and into the catalog's ``signed_heads``. Signing times strictly increase per
dataset even if the clock steps back, since mirrors order signed heads by them.
"""

from __future__ import annotations

from protocol.identity import DatasetId, Multihash
from protocol.model.timestamp import Timestamp
from protocol.transfer.signed_head import SignedHead, SignedHeadError, sign_head
from storage.catalog.signed_heads import SignedHeadTable
from storage.keys import KeyStore
from storage.layout import HEAD_REF
from storage.stores.base import RefStore


class HeadSigner:
    def __init__(self, keys: KeyStore, table: SignedHeadTable) -> None:
        self.keys = keys
        self.table = table

    def can_sign(self, dataset_id: DatasetId) -> bool:
        return self.keys.path_of(dataset_id).is_file()

    async def sign(
        self, dataset_id: DatasetId, refs: RefStore, head: Multihash, sequence_number: int
    ) -> SignedHead | None:
        """Sign ``head`` if this node holds the dataset's key (``None`` otherwise)."""
        key = self.keys.load(dataset_id)
        if key is None:
            return None
        signed_at = Timestamp.now()
        try:
            previous = await self.table.get(dataset_id)
        except SignedHeadError:
            previous = None  # a damaged row is replaced by this newer statement
        if previous is not None and signed_at.epoch_nanos <= previous.signed.signed_at.epoch_nanos:
            signed_at = Timestamp(previous.signed.signed_at.epoch_nanos + 1)
        signed = sign_head(key, dataset_id, head, sequence_number, signed_at)
        await refs.set_signature(HEAD_REF, signed.document())
        await self.table.record(signed, None)
        return signed
