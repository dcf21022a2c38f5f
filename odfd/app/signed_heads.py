"""A dataset's signed head as a server keeps it (``GET``/``PUT /{dataset}/refs/head.sig``,
``docs/signed-heads.md``): the document served as stored, and a pushed one kept only if it
verifies against the dataset's id, names the current head and is newer than the one held, so a
server never serves a statement that does not match what it serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.errors import OdfdError
from protocol.transfer.signed_head import SignedHeadError, parse_signed_head
from storage.layout import HEAD_REF

if TYPE_CHECKING:
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


class SignedHeadRefusedError(OdfdError):
    """A pushed signed head is not kept; the message names the dataset and why."""


class InvalidSignedHeadError(SignedHeadRefusedError):
    """The document is malformed, does not verify, or is signed for another dataset."""


class StaleSignedHeadError(SignedHeadRefusedError):
    """The document names another head than the served one, or is not newer than the one held."""


async def head_signature(workspace: Workspace, record: DatasetRecord) -> bytes | None:
    """The dataset's ``refs/head.sig`` document as stored (``None``: unsigned here)."""
    document: bytes | None = await workspace.open_dataset(record.id).refs.get_signature(HEAD_REF)
    return document


async def store_signed_head(workspace: Workspace, record: DatasetRecord, body: bytes) -> None:
    """Keeps the pushed document ``body`` as the dataset's signed head and records it as seen;
    the same statement again is kept as it is. Raises ``InvalidSignedHeadError`` or
    ``StaleSignedHeadError``."""
    where = f"signed head for {record.alias}"
    try:
        signed = parse_signed_head(body, where)
    except SignedHeadError as err:
        raise InvalidSignedHeadError(str(err)) from None
    if signed.dataset_id != record.id:
        raise InvalidSignedHeadError(
            f"{where}: it is signed for {signed.dataset_id}, not {record.id}"
        )
    dataset = workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if signed.head != head:
        raise StaleSignedHeadError(
            f"{where}: it names head {signed.head}, this server's head is {head}"
        )
    current = await workspace.signed_heads.get(record.id)
    if current is not None and not signed.is_newer_than(current.signed):
        if current.signed.same_statement(signed):
            return
        raise StaleSignedHeadError(
            f"{where}: signed at {signed.signed_at}, not newer than the one held "
            f"(signed at {current.signed.signed_at})"
        )
    await dataset.refs.set_signature(HEAD_REF, signed.document())
    await workspace.signed_heads.record(signed, "push")
