"""Plain documents (resources, history rows, listings) as YAML, byte-identical to what
kamu-cli's serde_yaml writes, for ``-o yaml``. The emitter loads only when YAML is asked for,
so ``odfd list`` and ``status`` in other formats never import it."""

from __future__ import annotations

from typing import Any


def yaml_document(tree: Any) -> str:
    """``tree`` as one YAML document (no ``---``), ending with a newline."""
    from protocol.codec.yaml_emitter import dump

    return dump(tree)
