"""The pulling side of signed heads (``docs/signed-heads.md``): which head to pull to, and when to
refuse a remote's head.

A remote may serve ``refs/head.sig`` beside ``refs/head``. When it does and the signature
verifies against the dataset id, the pull goes to the *signed* head (blocks a peer appended
beyond it are not taken). It is refused, unless overridden, when:

- the signature is missing but this node has seen the dataset signed before, or it is invalid
  (malformed, bad signature, another dataset's key: key rotation is not supported) —
  ``--allow-unsigned`` or ``--force`` pull the served head as an unsigned one;
- it is older than the newest signed head this node has seen (a rollback), or another head
  signed at the same instant (a fork by the key holder) — only ``--force`` accepts it.

Datasets never seen signed (the reference does not sign) are pulled as before, "unsigned".
"""

from __future__ import annotations

from dataclasses import dataclass

from odfd.sync.errors import SyncError
from protocol.identity import DatasetId, Multihash
from protocol.transfer.signed_head import SignedHead, SignedHeadError, parse_signed_head
from storage.catalog.signed_head_records import SeenSignedHead
from storage.dataset import Dataset
from storage.layout import HEAD_REF
from storage.workspace import Workspace


class UntrustedHeadError(SyncError):
    """A remote's head failed the signed-head checks; nothing was pulled."""


class MissingSignatureError(UntrustedHeadError):
    """The dataset has been seen signed, but the remote serves no signed head."""


class InvalidSignatureError(UntrustedHeadError):
    """The remote's signed head is malformed, does not verify, or is of another key."""


class RollbackError(UntrustedHeadError):
    """The remote's signed head is older than the newest one this node has seen."""


class ForkError(UntrustedHeadError):
    """The remote's head was signed at the same instant as another head seen before."""


@dataclass(frozen=True, slots=True)
class TrustOptions:
    allow_unsigned: bool = False
    force: bool = False
    owner: DatasetId | None = None
    """The dataset the remote was reached by (a DID): its owner's signed head is required."""


@dataclass(frozen=True, slots=True)
class HeadDecision:
    """Where to pull to. ``signed`` is ``None`` for an unsigned pull."""

    head: Multihash
    signed: SignedHead | None
    note: str | None = None
    """Why the pull does not simply take the served head, or what was overridden."""

    @property
    def trust(self) -> str:
        return "signed" if self.signed is not None else "unsigned"


async def decide_head(
    workspace: Workspace,
    dataset_id: DatasetId | None,
    served_head: Multihash,
    document: bytes | None,
    where: str,
    options: TrustOptions,
) -> HeadDecision:
    """Check the remote's signed-head ``document`` (``None``: it has none) for the dataset
    ``dataset_id`` (``None`` while the dataset is new here: checked after the walk)."""
    overridable = options.allow_unsigned or options.force
    dataset_id = dataset_id or options.owner
    if options.owner is not None and document is None and not overridable:
        raise MissingSignatureError(
            f"{where} serves no signed head, but a dataset found by its DID must carry its "
            "owner's signed head; refusing it (--allow-unsigned accepts it)"
        )
    signed: SignedHead | None = None
    if document is not None:
        try:
            signed = parse_signed_head(document, f"{where} refs/head.sig")
            if dataset_id is not None and signed.dataset_id != dataset_id:
                raise SignedHeadError(
                    f"{where}: the head is signed by {signed.dataset_id}, not by the dataset's "
                    f"own key {dataset_id} (key rotation is not supported: a dataset's key is "
                    "its identity)"
                )
        except SignedHeadError as err:
            if not overridable:
                raise InvalidSignatureError(
                    f"{err}; refusing it (--allow-unsigned pulls the served head unsigned)"
                ) from None
            return HeadDecision(served_head, None, f"invalid signed head ignored: {err}")
    seen_id = dataset_id or (signed.dataset_id if signed is not None else None)
    seen = await _seen(workspace, seen_id)
    if signed is None:
        if seen is not None and document is None:
            if not overridable:
                raise MissingSignatureError(
                    f"{where} serves no signed head, but this dataset's owner has signed it "
                    f"before (newest seen: {_describe(seen.signed)}); refusing the unsigned "
                    "head (--allow-unsigned accepts it)"
                )
            return HeadDecision(served_head, None, "signed before, pulled unsigned as allowed")
        return HeadDecision(served_head, None)
    if seen is not None and not signed.same_statement(seen.signed):
        older = signed.signed_at.epoch_nanos < seen.signed.signed_at.epoch_nanos
        if older or signed.signed_at == seen.signed.signed_at:
            what = "older than" if older else "a different head signed at the same time as"
            error = RollbackError if older else ForkError
            if not options.force:
                raise error(
                    f"{where} serves {_describe(signed)}, {what} the newest signed head seen "
                    f"({_describe(seen.signed)}); refusing it (--force accepts it)"
                )
            return HeadDecision(signed.head, signed, f"{error.__name__} overridden by --force")
    note = None
    if signed.head != served_head:
        note = (
            f"{where} serves head {served_head}, beyond its signed head {signed.head}: "
            "pulled up to the signed head"
        )
    return HeadDecision(signed.head, signed, note)


def check_walked(
    decision: HeadDecision, dataset_id: DatasetId | None, sequence: int | None
) -> None:
    """After the walk: a signed head must be of the dataset walked and carry its block's
    sequence number (both are in what the signature covers)."""
    signed = decision.signed
    if signed is None:
        return
    if dataset_id is not None and signed.dataset_id != dataset_id:
        raise InvalidSignatureError(
            f"the head is signed by {signed.dataset_id}, but the history served is of "
            f"{dataset_id} (key rotation is not supported)"
        )
    if sequence is not None and sequence != signed.sequence_number:
        raise InvalidSignatureError(
            f"the signed head says block {signed.head} is #{signed.sequence_number}, "
            f"the block is #{sequence}"
        )


async def remember(
    workspace: Workspace, dataset: Dataset, decision: HeadDecision, source: str
) -> None:
    """Record a verified signed head as seen and, when the local head is the signed one, keep
    the document beside it so this node serves and publishes the owner's signature too."""
    signed = decision.signed
    if signed is None:
        return
    await workspace.signed_heads.record(signed, source)
    if await dataset.chain.head() != signed.head:
        return
    local = await dataset.refs.get_signature(HEAD_REF)
    if local is not None:
        try:
            held = parse_signed_head(local, "local refs/head.sig")
        except SignedHeadError:
            held = None
        if held is not None and not signed.is_newer_than(held):
            return  # never replace a newer statement (e.g. the owner's own)
    await dataset.refs.set_signature(HEAD_REF, signed.document())


async def _seen(workspace: Workspace, dataset_id: DatasetId | None) -> SeenSignedHead | None:
    if dataset_id is None:
        return None
    try:
        return await workspace.signed_heads.get(dataset_id)
    except SignedHeadError as err:
        raise UntrustedHeadError(
            f"the catalog's signed head of {dataset_id} is damaged ({err}); "
            "run `odfd repair` to restore it from the dataset folder"
        ) from None


def _describe(signed: SignedHead) -> str:
    return f"head {signed.head} (#{signed.sequence_number}) signed at {signed.signed_at}"
