"""Answering a repeated push of the same file without starting an engine.

Whether a file adds anything under a Ledger or Snapshot merge is only known once its rows are
read (the source's format, schema and encoding rules), and compared with the dataset's history:
that is the engine's work, and a second reader here that parsed slightly differently would
silently drop data. But the answer is a function of the dataset's head (its sources, schema and
history), the file's bytes and the options; and after such a file was ingested, pushing it again
at the new head adds nothing (a Ledger then holds all its keys, never null: an ingest refuses a
null primary key; a Snapshot's state equals it).
So each dataset remembers the files (hash and options) known to add nothing at its current head,
and an ingest of one of them answers "no new records" from a hash of the file alone.

Only for Ledger and Snapshot merges without a preprocess step (a query could depend on anything)
and whose compared columns leave out the event time (which may default to the ingest's clock).
A memo is a cache in ``<workspace>/cache/``: losing it costs one engine run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import odfd
from protocol.hashing import physical_hash_file
from protocol.identity import DatasetId, Multihash
from protocol.model import MergeStrategyLedger, MergeStrategySnapshot
from storage.atomic import write_file_atomic
from verifier.engine.columns import Vocab

MEMO_DIR = Path("cache") / "ingest-no-op"

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NoOpKey:
    """An ingest of these bytes at this head with these options adds nothing."""

    head: str
    input_hash: str
    source_name: str | None
    input_format: str | None
    version: str = odfd.__version__


def memo_applies(merge: Any, preprocess: Any, vocab: Vocab) -> bool:
    """Whether an ingest's outcome is decided by head, bytes and options alone (see above)."""
    if preprocess is not None:
        return False
    if isinstance(merge, MergeStrategyLedger):
        return True
    if isinstance(merge, MergeStrategySnapshot):
        return vocab.event_time not in (merge.compare_columns or ())
    return False


async def input_hash(path: Path) -> str:
    return str(await asyncio.to_thread(physical_hash_file, path))


MAX_ENTRIES = 64
"""Files remembered at one head (a new head starts the list again)."""


class NoOpMemo:
    """The files known to add nothing at a dataset's current head, in a small JSON file:
    ``{"head": …, "version": …, "entries": [[input hash, source name, input format], …]}``."""

    def __init__(self, workspace_root: Path, dataset_id: DatasetId) -> None:
        self.path = workspace_root / MEMO_DIR / f"{dataset_id.to_multibase()}.json"

    async def holds(self, key: NoOpKey) -> bool:
        return _entry(key) in await self._entries(key)

    async def record(self, key: NoOpKey) -> None:
        """Best effort: a memo that cannot be written costs the next ingest an engine run."""
        entries = [e for e in await self._entries(key) if e != _entry(key)]
        entries = [*entries[-(MAX_ENTRIES - 1) :], _entry(key)]
        document = {"head": key.head, "version": key.version, "entries": entries}
        try:
            await asyncio.to_thread(self._write, json.dumps(document).encode())
        except OSError as error:
            _log.warning("could not remember a no-op ingest in %s: %s", self.path, error)

    async def _entries(self, key: NoOpKey) -> list[list[str | None]]:
        """The entries recorded at ``key``'s head by this version (none if unreadable)."""
        try:
            document = json.loads(await asyncio.to_thread(self.path.read_text))
        except (OSError, ValueError):
            return []
        if not isinstance(document, dict):
            return []
        if document.get("head") != key.head or document.get("version") != key.version:
            return []
        entries = document.get("entries")
        return [e for e in entries if isinstance(e, list)] if isinstance(entries, list) else []

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomic(self.path, data, sync_dir=False)


def _entry(key: NoOpKey) -> list[str | None]:
    return [key.input_hash, key.source_name, key.input_format]


def key_at(
    head: Multihash | None, digest: str, source_name: str | None, input_format: str | None
) -> NoOpKey:
    return NoOpKey(str(head), digest, source_name, input_format)
