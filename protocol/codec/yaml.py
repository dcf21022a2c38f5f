"""YAML manifests and objects exactly as the reference (serde_yaml) writes and reads them.

Blocks are ``kind: MetadataBlock`` / ``version: 3`` manifests, dataset snapshots ``kind:
DatasetSnapshot`` / ``version: 1`` (several per file, as ``---``-separated documents). Output is
byte-identical to the reference's; input accepts what it accepts, including RFC-013 enum spellings
(PascalCase, camelCase, lowercase) and short forms such as ``type: Timestamp``.
"""

from __future__ import annotations

from typing import Any

import yaml as pyyaml

from protocol.codec.tree import from_tree, manifest, read_manifest, to_tree
from protocol.codec.tree_values import Plain
from protocol.codec.yaml_emitter import dump
from protocol.errors import DecodeError
from protocol.model import DatasetSnapshot, MetadataBlock

METADATA_BLOCK_VERSION = 3
DATASET_SNAPSHOT_VERSION = 1

_Loader = getattr(pyyaml, "CSafeLoader", pyyaml.SafeLoader)
_MAX_NODES = 1_000_000
_MAX_DEPTH = 200


def dumps(value: object) -> str:
    """Any model object as YAML (a union variant with its ``kind``)."""
    return dump(to_tree(value))


def loads(text: str | bytes, type_name: str, source: str = "") -> Any:
    """Read one document as the named model type (``DataSchema``, ``Transform``, ...)."""
    (document,) = _single(text, source)
    return from_tree(document, type_name, source)


def dump_block(block: MetadataBlock) -> str:
    return dump(manifest("MetadataBlock", METADATA_BLOCK_VERSION, block))


def load_block(text: str | bytes, source: str = "") -> MetadataBlock:
    (document,) = _single(text, source)
    block: MetadataBlock = read_manifest(
        document, "MetadataBlock", METADATA_BLOCK_VERSION, "MetadataBlock", source
    )
    return block


def dump_snapshot(snapshot: DatasetSnapshot) -> str:
    return dump(manifest("DatasetSnapshot", DATASET_SNAPSHOT_VERSION, snapshot))


def dump_snapshots(snapshots: list[DatasetSnapshot]) -> str:
    """Several snapshots as one multi-document file."""
    return "---\n".join(dump_snapshot(s) for s in snapshots)


def load_snapshot(text: str | bytes, source: str = "") -> DatasetSnapshot:
    snapshots = load_snapshots(text, source)
    if len(snapshots) != 1:
        found = (
            f"{len(snapshots)} DatasetSnapshots, expected one"
            if snapshots
            else "no DatasetSnapshot"
        )
        raise DecodeError(f"{source or 'document'}: {found} found")
    return snapshots[0]


def load_snapshots(text: str | bytes, source: str = "") -> list[DatasetSnapshot]:
    """Every snapshot of a multi-document file; errors name the document index and field path."""
    documents = parse_documents(text, source)
    snapshots = []
    for index, document in enumerate(documents):
        where = f"{source} document {index}" if source else f"document {index}"
        snapshots.append(
            read_manifest(
                document, "DatasetSnapshot", DATASET_SNAPSHOT_VERSION, "DatasetSnapshot", where
            )
        )
    return snapshots


def _single(text: str | bytes, source: str) -> list[Any]:
    documents = parse_documents(text, source)
    if len(documents) != 1:
        raise DecodeError(
            f"{source or 'input'}: expected one YAML document, found {len(documents)}"
        )
    return documents


def parse_documents(text: str | bytes, source: str = "") -> list[Any]:
    """Parse YAML into plain trees; unquoted scalars become ``Plain`` so fields can type them."""
    try:
        nodes = list(pyyaml.compose_all(text, Loader=_Loader))
    except pyyaml.YAMLError as error:
        raise DecodeError(f"{source or 'input'}: invalid YAML: {error}") from None
    budget = [_MAX_NODES]
    return [_tree(node, budget, 0, source) for node in nodes if node is not None]


def _tree(node: pyyaml.Node, budget: list[int], depth: int, source: str) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        raise DecodeError(f"{source or 'input'}: YAML document is too large or too deeply nested")
    if isinstance(node, pyyaml.ScalarNode):
        return Plain(node.value) if not node.style else node.value
    if isinstance(node, pyyaml.SequenceNode):
        return [_tree(item, budget, depth + 1, source) for item in node.value]
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, pyyaml.ScalarNode):
            raise DecodeError(
                f"{source or 'input'}: line {key_node.start_mark.line + 1}: map keys must be scalars"
            )
        key = Plain(key_node.value) if not key_node.style else key_node.value
        if key in out:
            raise DecodeError(
                f"{source or 'input'}: line {key_node.start_mark.line + 1}: duplicate field `{key}`"
            )
        out[key] = _tree(value_node, budget, depth + 1, source)
    return out
