"""Checking that pulled data files are what their blocks say, before the head moves.

A lying peer can serve a block whose file is right (its physical hash and size match) while the
block misdescribes the file's content: another slice's ``logicalHash``, or an ``offsetInterval``
claiming more records than the file holds. Hash and size checks on the bytes cannot see that, so
every data file a pull brings (or finds already stored by an interrupted pull) is read once:

* the record count from the Parquet footer, which must equal the interval's length;
* the first and last offset in the offset column (the vocabulary's name), which must be the
  interval's bounds;
* the logical hash, computed over the records as the reference reads them.

Parquet keeps its schema in a footer at the end of the file, so the logical hash starts once the
file's last byte arrived; each file is checked in a worker thread as soon as it is stored, while
the other downloads (and the walk toward the seed) go on. Only the offset bounds depend on the
vocabulary, which the walk may find after the file was read: those alone are read again when the
offset column turns out to be another than the one assumed. The check reads the file as the
verifier does (``protocol.hashing.open_parquet`` / ``hashing_batches``: dictionary columns
undecoded, large batches where the hash allows), its value stream built by whole-column kernels
that release the GIL. At most one check per core decodes and hashes at a time (more would only
queue for the cores and the GIL that the event loop's downloads need, and a pull costs the larger
of its copy and its checks only while both go on at once), yet twice as many threads run checks:
a file is read whole before its check takes a core (``_compute_slots``), so reading the next files
from the device overlaps the hashing of others instead of leaving a core idle during each read
(~15 ms per 16 MB file, a quarter of checking it).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from odfd.sync.errors import CorruptSourceError
from odfd.sync.walk import VerifiedBlock
from protocol.hashing import (
    RecordsDigest,
    UnsupportedDataTypeError,
    available_cores,
    hashing_batches,
    open_parquet,
)
from protocol.hashing.parquet_files import STREAM_BUFFER_BYTES
from protocol.identity import Multihash
from protocol.model import AddData, DataSlice, ExecuteTransform, SetVocab
from storage import direct_io
from storage.direct_io import read_direct

DEFAULT_OFFSET_COLUMN = "offset"


def check_threads() -> int:
    """Threads that run checks: one per core decoding and hashing, one per core reading ahead."""
    return 2 * available_cores()


_compute_slots = threading.BoundedSemaphore(available_cores())
"""Held by a check while it decodes and hashes (not while it waits for its file's bytes): one
per core, shared by every pull of the process."""


@dataclass(frozen=True, slots=True)
class SliceFacts:
    """What a data file holds, read from the file itself."""

    records: int
    offset_column: str
    """The column the offset bounds were read from (a check that began before the walk
    reached the block's vocabulary read its best guess; ``DataChecks`` re-reads the bounds if
    the guess was wrong)."""
    has_offset_column: bool
    first_offset: int | None
    last_offset: int | None
    logical_hash: Multihash | None
    """``None`` when a column's type has no logical hash encoding (the hash is then unchecked)."""


class SliceFileError(Exception):
    """The file cannot be read as Parquet."""


def read_slice_facts(path: Path, offset_column: str) -> SliceFacts:
    """Read ``path`` once (blocking: run it in a thread)."""
    return read_first_present((path,), offset_column)


def read_first_present(paths: Sequence[Path], offset_column: str) -> SliceFacts:
    """Read the first of ``paths`` that exists (a staged file is renamed to its name while
    checks wait: whichever path it has when opened, the open file is the same)."""
    with _open_first(paths) as source, _compute_slots:
        return _read_facts(source, offset_column)


@contextmanager
def _open_first(paths: Sequence[Path]) -> Iterator[pa.NativeFile]:
    """The first of ``paths`` that exists, opened; ``SliceFileError`` if none can be. A file
    up to ``READ_LIMIT`` is read whole around the page cache (``storage.direct_io``: a pull
    wrote it so, and reading it through the cache would fill as many fresh pages as writing it
    through the cache would have), into a pooled buffer; a larger one is read in pieces."""
    with ExitStack() as stack:
        try:
            source = _enter_first(stack, paths)
        except OSError as err:
            raise SliceFileError(f"is not a readable file: {err}") from None
        with source:
            yield source


def _enter_first(stack: ExitStack, paths: Sequence[Path]) -> pa.NativeFile:
    for path in paths[:-1]:
        try:
            return _enter(stack, path)
        except FileNotFoundError:
            continue
    return _enter(stack, paths[-1])


def _enter(stack: ExitStack, path: Path) -> pa.NativeFile:
    """A file smaller than ``DIRECT_MIN`` (written through the page cache) is read whole in one
    call: Parquet's footer and column reads then cost no system calls (~0.025 ms of a 32 KB
    file's ~0.45 ms check)."""
    with open(path, "rb", buffering=0) as file:
        if os.fstat(file.fileno()).st_size < direct_io.DIRECT_MIN:
            return pa.BufferReader(file.readall())
    whole = stack.enter_context(read_direct(path))
    return pa.OSFile(str(path)) if whole is None else pa.BufferReader(pa.py_buffer(whole))


def _buffer_size(source: pa.NativeFile) -> int:
    """A file in memory is read without a read buffer: its pages are slices of it, not copies."""
    return 0 if isinstance(source, pa.BufferReader) else STREAM_BUFFER_BYTES


def _read_facts(source: pa.NativeFile, offset_column: str) -> SliceFacts:
    try:
        parquet = open_parquet(source, _buffer_size(source))
    except (OSError, pa.ArrowException) as err:
        raise SliceFileError(f"is not a readable Parquet file: {err}") from None
    with parquet:
        schema = parquet.schema_arrow
        has_column = schema.get_field_index(offset_column) >= 0
        digest = _new_digest(schema)
        rows, first, last = 0, None, None
        try:
            for batch in hashing_batches(parquet):
                if digest is not None:
                    digest.update(batch)
                if has_column:
                    first, last = _widen(first, last, batch.column(offset_column))
                rows += batch.num_rows
        except (OSError, pa.ArrowException) as err:
            raise SliceFileError(f"cannot be read past record {rows}: {err}") from None
        if rows != parquet.metadata.num_rows:
            raise SliceFileError(
                f"holds {rows} records, its footer says {parquet.metadata.num_rows}"
            )
    logical = digest.finalize() if digest is not None else None
    return SliceFacts(rows, offset_column, has_column, first, last, logical)


_STARTED_MAX = 64
_UNSEEN = object()
_started: dict[pa.Schema, RecordsDigest | None] = {}
"""A digest started for each schema seen lately (``None``: a column's type has no logical hash
encoding), copied for each file: a pull's files mostly share one schema."""


def _new_digest(schema: pa.Schema) -> RecordsDigest | None:
    """A fresh digest of ``schema`` (``RecordsDigest.copy`` of the one started for an equal
    schema: equal schemas, metadata aside, hash alike), or ``None`` if it cannot be hashed."""
    started = _started.get(schema, _UNSEEN)
    if started is _UNSEEN:
        try:
            started = RecordsDigest(schema)
        except UnsupportedDataTypeError:
            started = None
        if len(_started) >= _STARTED_MAX:
            _started.clear()
        _started[schema] = started
    return started.copy() if isinstance(started, RecordsDigest) else None


def reread_offset_bounds(paths: Sequence[Path], facts: SliceFacts, column: str) -> SliceFacts:
    """``facts`` with the offset bounds read again from ``column`` (blocking: run it in a
    thread). Only that column's pages are read: the record count and the logical hash do not
    depend on which column holds the offsets."""
    with _open_first(paths) as source, _compute_slots:
        try:
            parquet = pq.ParquetFile(source, buffer_size=_buffer_size(source), pre_buffer=False)
        except (OSError, pa.ArrowException) as err:
            raise SliceFileError(f"is not a readable Parquet file: {err}") from None
        with parquet:
            if parquet.schema_arrow.get_field_index(column) < 0:
                return replace(facts, offset_column=column, has_offset_column=False)
            first, last = None, None
            try:
                for batch in parquet.iter_batches(columns=[column]):
                    first, last = _widen(first, last, batch.column(0))
            except (OSError, pa.ArrowException) as err:
                raise SliceFileError(f"cannot be read again: {err}") from None
    return replace(
        facts, offset_column=column, has_offset_column=True, first_offset=first, last_offset=last
    )


def _widen(first: int | None, last: int | None, offsets: pa.Array) -> tuple[int | None, int | None]:
    """The bounds ``first``..``last`` widened to cover ``offsets``."""
    if not len(offsets):
        return first, last
    bounds = pc.min_max(offsets)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return (
        low if first is None or low < first else first,
        high if last is None or high > last else last,
    )


@dataclass(frozen=True, slots=True)
class _Claim:
    block: VerifiedBlock
    data_slice: DataSlice
    offset_column: str


class DataChecks:
    """The data files of one pull's new blocks, each read once, compared with its blocks.

    A file's check may begin before the walk reached the vocabulary that names its block's
    offset column (``expect``: the walk goes from the head toward the seed, and a ``SetVocab``
    comes before the data it names); it then reads the offset bounds from the column guessed so
    far, and ``verify`` reads only the bounds again where ``plan`` found another column.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self._guess = DEFAULT_OFFSET_COLUMN
        self._claims: list[_Claim] = []
        self._columns: dict[Multihash, str] = {}
        self._facts: dict[Multihash, Future[SliceFacts]] = {}
        self._reread: dict[tuple[Multihash, str], SliceFacts] = {}
        self._threads: ThreadPoolExecutor | None = None

    def guess_vocab(self, vocab: SetVocab | None) -> None:
        """The vocabulary to assume for files expected from now on (the local head's)."""
        self._guess = _offset_column(vocab)

    def expect(self, item: VerifiedBlock) -> None:
        """A block just walked (newest first): its data file may be checked once stored,
        reading offsets from the column guessed so far (the newest ``SetVocab`` walked)."""
        event = item.block.event
        if isinstance(event, SetVocab):
            self._guess = _offset_column(event)
        if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
            self._columns.setdefault(event.new_data.physical_hash, self._guess)

    def plan(self, blocks: list[VerifiedBlock], vocab: SetVocab | None) -> None:
        """Note what each new block says about its data file (offset column as of that block)."""
        column = _offset_column(vocab)
        planned: set[Multihash] = set()
        for item in blocks:
            event = item.block.event
            if isinstance(event, SetVocab):
                column = _offset_column(event)
            if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
                self._claims.append(_Claim(item, event.new_data, column))
                hash = event.new_data.physical_hash
                if hash not in planned:  # a file not begun is read with its first block's column
                    planned.add(hash)
                    self._columns[hash] = column

    def start(self, hash: Multihash, paths: Sequence[Path]) -> bool:
        """Begin reading a stored file in a worker thread, if not begun; ``paths``: where it may
        be, in order (``read_first_present``). False if ``hash`` is no data file expected."""
        if hash not in self._columns:
            return False
        if hash not in self._facts:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(
                    check_threads(), thread_name_prefix="odfd-pull-check"
                )
            # A thread's future, not the loop's: a finished check does not wake the event loop
            # (~1,000 wake-ups of a pull's loop, each waiting for the GIL); ``verify`` collects.
            self._facts[hash] = self._threads.submit(read_first_present, paths, self._columns[hash])
        return True

    def start_ahead(self, hash: Multihash, paths: Sequence[Path]) -> None:
        """Begin reading a file stored before any block named it, its offsets from the column
        guessed so far (``verify`` reads them again if its block says otherwise). A file no
        block names is never compared (and not kept)."""
        self._columns.setdefault(hash, self._guess)
        self.start(hash, paths)

    async def verify(
        self, hashes: Iterable[Multihash], paths_of: Callable[[Multihash], Sequence[Path]]
    ) -> None:
        """Compare every planned block with its file (``hashes``: the pull's data files;
        ``paths_of`` gives a file's paths, asked only for a file not begun or read again: the
        loop does not build 1,000 paths as the downloads end); ``CorruptSourceError`` names the
        first block that misdescribes its data."""
        for hash in hashes:
            if hash not in self._facts:
                self.start(hash, paths_of(hash))
        for claim in self._claims:
            hash = claim.data_slice.physical_hash
            try:
                facts = await _outcome(self._facts[hash])
                if facts.offset_column != claim.offset_column:
                    facts = await self._reread_bounds(facts, paths_of(hash), claim)
            except SliceFileError as err:
                raise CorruptSourceError(
                    f"{self.where}: data/{hash} of block {self._name(claim)} {err}"
                ) from None
            self._compare(claim, facts)
        self._close()

    async def _reread_bounds(
        self, facts: SliceFacts, paths: Sequence[Path], claim: _Claim
    ) -> SliceFacts:
        """``facts`` with the bounds of the claim's offset column (read once per file and
        column, in a worker thread)."""
        key = (claim.data_slice.physical_hash, claim.offset_column)
        if key not in self._reread:
            assert self._threads is not None  # the file's first read ran on them
            self._reread[key] = await asyncio.get_running_loop().run_in_executor(
                self._threads, reread_offset_bounds, paths, facts, claim.offset_column
            )
        return self._reread[key]

    async def cancel(self) -> None:
        """Drop the checks not begun and wait for those running: a pull that gives up leaves
        no thread holding one of its files open (an unlinked staged file's space is freed only
        once nobody reads it)."""
        for future in self._facts.values():
            future.cancel()
        self._facts.clear()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
            await asyncio.shield(asyncio.to_thread(threads.shutdown, wait=True))

    def _close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def _name(self, claim: _Claim) -> str:
        return f"{claim.block.hash} (#{claim.block.block.sequence_number})"

    def _compare(self, claim: _Claim, facts: SliceFacts) -> None:
        recorded = claim.data_slice
        interval = recorded.offset_interval
        wanted = interval.end - interval.start + 1
        where = f"{self.where}: block {self._name(claim)}"
        if not facts.has_offset_column:
            raise CorruptSourceError(
                f"{self.where}: data/{recorded.physical_hash} of block {self._name(claim)} "
                f"has no offset column {claim.offset_column!r}"
            )
        if facts.records != wanted:
            raise CorruptSourceError(
                f"{where} says its data holds offsets [{interval.start}, {interval.end}] "
                f"({wanted} records), the file data/{recorded.physical_hash} holds {facts.records}"
            )
        if (facts.first_offset, facts.last_offset) != (interval.start, interval.end):
            raise CorruptSourceError(
                f"{where} says its data holds offsets [{interval.start}, {interval.end}], "
                f"the file's {claim.offset_column} column runs from {facts.first_offset} "
                f"to {facts.last_offset}"
            )
        if facts.logical_hash is not None and facts.logical_hash != recorded.logical_hash:
            raise CorruptSourceError(
                f"{where} records logicalHash {recorded.logical_hash}, the records of "
                f"data/{recorded.physical_hash} hash to {facts.logical_hash}"
            )


async def _outcome(future: Future[SliceFacts]) -> SliceFacts:
    """What a check found (its error raised), waited for on the loop only if not yet done."""
    return future.result() if future.done() else await asyncio.wrap_future(future)


def _offset_column(vocab: SetVocab | None) -> str:
    name = getattr(vocab, "offset_column", None) if vocab is not None else None
    return name or DEFAULT_OFFSET_COLUMN
