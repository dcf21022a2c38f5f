"""The DatasetSnapshots of ``odfd add``'s manifests: each source's YAML documents read as
snapshots, a source that holds none refused by name (an empty file is a mistake, not a no-op)."""

from __future__ import annotations

from collections.abc import Iterable

from odfd.errors import ManifestError
from protocol.codec.yaml import load_snapshots
from protocol.model import DatasetSnapshot


def snapshots_in(manifests: Iterable[tuple[str, bytes]]) -> list[DatasetSnapshot]:
    """Every snapshot of each ``(source, text)`` manifest, in order; errors name the source,
    the document index and the field path."""
    snapshots: list[DatasetSnapshot] = []
    for source, text in manifests:
        loaded = load_snapshots(text, source=source)
        if not loaded:
            raise ManifestError(
                f"{source}: holds no DatasetSnapshot (it is empty or only comments)"
            )
        snapshots.extend(loaded)
    return snapshots
