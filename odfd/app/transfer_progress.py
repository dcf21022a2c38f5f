"""The progress line of a replication transfer (``odfd pull``, ``odfd push``): an interface
asks for it by a flag, so it names no transfer internals; the line itself is
``odfd.sync.progress``'s, fed by the transfer as it counts blocks, objects and bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odfd.sync.progress import Progress


def progress_lines(show: bool) -> Callable[[str], Progress] | None:
    """Each transfer's progress line, labelled as given and drawn on stderr when it is a
    terminal; ``None`` (nothing drawn) unless ``show``."""
    if not show:
        return None
    from odfd.sync.progress import Progress

    return Progress
