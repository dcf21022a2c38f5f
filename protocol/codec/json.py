"""The JSON form of manifests and model objects: the same structure as the YAML form.

Used by ``odfd log --output json`` and the APIs.
"""

from __future__ import annotations

import json
from typing import Any

from protocol.codec.tree import from_tree, manifest, read_manifest, to_tree
from protocol.codec.yaml import METADATA_BLOCK_VERSION
from protocol.errors import DecodeError
from protocol.model import MetadataBlock


def dumps(value: object, indent: int | None = None) -> str:
    """Any model object as JSON (a union variant with its ``kind``)."""
    return json.dumps(to_tree(value), ensure_ascii=False, indent=indent)


def loads(text: str | bytes, type_name: str, source: str = "") -> Any:
    return from_tree(_parse(text, source), type_name, source)


def dump_block(block: MetadataBlock, indent: int | None = None) -> str:
    return json.dumps(
        manifest("MetadataBlock", METADATA_BLOCK_VERSION, block), ensure_ascii=False, indent=indent
    )


def load_block(text: str | bytes, source: str = "") -> MetadataBlock:
    block: MetadataBlock = read_manifest(
        _parse(text, source), "MetadataBlock", METADATA_BLOCK_VERSION, "MetadataBlock", source
    )
    return block


def _parse(text: str | bytes, source: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise DecodeError(f"{source or 'input'}: invalid JSON: {error}") from None
