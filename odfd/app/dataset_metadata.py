"""A dataset's metadata aspects as the reference's ``GET /{dataset}/metadata`` answers them:
its seed, info, license, attachments, vocabulary (defaults filled in), schema (in a schema format
of the query protocol) and head ref, each only when asked for."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from protocol.codec.tree import to_tree
from protocol.model import Seed, SetAttachments, SetInfo, SetLicense, SetVocab
from protocol.query import SchemaFormat
from protocol.query.schema import render_schema

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord


class Aspect(StrEnum):
    ATTACHMENTS = "Attachments"
    INFO = "Info"
    LICENSE = "License"
    REFS = "Refs"
    SCHEMA = "Schema"
    SEED = "Seed"
    VOCAB = "Vocab"


DEFAULT_ASPECTS = frozenset({Aspect.SEED})
_SEARCHED = {
    Aspect.ATTACHMENTS: SetAttachments,
    Aspect.INFO: SetInfo,
    Aspect.LICENSE: SetLicense,
}


async def metadata(
    node: Node,
    record: DatasetRecord,
    aspects: frozenset[Aspect] = DEFAULT_ASPECTS,
    schema_format: SchemaFormat = SchemaFormat.ARROW_JSON,
) -> dict[str, Any]:
    """The ``output`` object: the asked-for aspects the dataset has (an absent event is left
    out), keys in the reference's order."""
    from verifier.engine.inputs import arrow_schema_of

    dataset = node.workspace.open_dataset(record.id)
    state = await dataset.chain.state()
    found: dict[Aspect, Any] = {}
    wanted = {aspect: kind for aspect, kind in _SEARCHED.items() if aspect in aspects}
    if wanted:
        async for _, block in dataset.chain.iter_blocks():
            for aspect, kind in list(wanted.items()):
                if isinstance(block.event, kind):
                    found[aspect] = _event_tree(block.event)
                    del wanted[aspect]
            if not wanted:
                break
    output: dict[str, Any] = {}
    for aspect in (Aspect.ATTACHMENTS, Aspect.INFO, Aspect.LICENSE):
        if aspect in found:
            output[aspect.value.lower()] = found[aspect]
    if Aspect.REFS in aspects and state.head is not None:
        output["refs"] = [{"name": "head", "blockHash": str(state.head)}]
    if Aspect.SCHEMA in aspects and state.schema is not None:
        output["schema"] = render_schema(arrow_schema_of(state.schema), schema_format)
        output["schemaFormat"] = schema_format.value
    if Aspect.SEED in aspects and state.dataset_id is not None and state.kind is not None:
        output["seed"] = _event_tree(Seed(dataset_id=state.dataset_id, dataset_kind=state.kind))
    if Aspect.VOCAB in aspects:
        output["vocab"] = _event_tree(_with_defaults(state.vocab))
    return output


def _event_tree(event: object) -> Any:
    """An event as its manifest form writes it, without the union's ``kind`` tag."""
    tree = to_tree(event)
    tree.pop("kind", None)
    return tree


def _with_defaults(vocab: SetVocab | None) -> SetVocab:
    return SetVocab(
        offset_column=getattr(vocab, "offset_column", None) or "offset",
        operation_type_column=getattr(vocab, "operation_type_column", None) or "op",
        system_time_column=getattr(vocab, "system_time_column", None) or "system_time",
        event_time_column=getattr(vocab, "event_time_column", None) or "event_time",
    )
