"""A metadata block as text (``odfd log -o yaml|json``, ``odfd block decode``): the YAML
manifest or the JSON document kamu-cli prints. The codecs load only when a block is rendered,
so a summary listing (``odfd log``'s fast path) never imports YAML."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocol.model import MetadataBlock


def block_yaml(block: MetadataBlock) -> str:
    """The block as a YAML manifest document."""
    from protocol.codec.yaml import dump_block

    return dump_block(block)


def block_json(block: MetadataBlock) -> str:
    """The block as a JSON document."""
    from protocol.codec.json import dump_block

    return dump_block(block)
