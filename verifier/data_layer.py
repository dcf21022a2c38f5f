"""Layer 2, data integrity: every slice and checkpoint in the range matches its block.

The chain is read oldest first (to know the vocabulary and declared schema in effect at each
block) and every file becomes one check for the ``CheckRunner``: a checkpoint's physical hash, a
slice's physical hash and content from a single read of its bytes (``file_checks``). Independent
files run in parallel on up to ``jobs`` workers; at most ``jobs`` checks are in flight, each
holding at most one bounded file, so memory is bounded by the number of workers, not by the size
of the data.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.identity import Multihash
from protocol.model import AddData, ExecuteTransform, SetDataSchema, SetVocab
from storage.dataset import Dataset
from storage.dataset_storage import LocalFiles
from storage.errors import HashMismatchError, ObjectNotFoundError
from storage.layout import object_name
from storage.stores.base import ObjectStore
from verifier.audit_state import AuditState, now_ns, stat_or_none
from verifier.engine.columns import Vocab
from verifier.engine.inputs import arrow_schema_of
from verifier.errors import VerifyError
from verifier.file_checks import FileCheck, SliceExpectation, fetched_hash_mismatch
from verifier.metadata_layer import ChainSurvey
from verifier.progress import Progress
from verifier.report import BlockLocation, Finding, Layer, LayerRecorder, LayerResult
from verifier.workers import CheckRunner, FileTask, ObjectCheck, SliceCheck


@dataclass(frozen=True, slots=True)
class _Declared:
    """The column names of the ``SetDataSchema`` in effect, and where it was declared."""

    columns: tuple[str, ...]
    where: str


class _Checks:
    """Submits checks with at most ``runner.jobs`` in flight and records each result as it arrives."""

    def __init__(self, runner: CheckRunner, recorder: LayerRecorder, progress: Progress) -> None:
        self._runner = runner
        self._recorder = recorder
        self._progress = progress
        self._slots = asyncio.Semaphore(runner.jobs)
        self._pending: set[asyncio.Task[None]] = set()

    async def submit(
        self,
        task: FileTask,
        block: BlockLocation,
        file: str,
        counter: str,
        on_result: Callable[[FileCheck], None] | None = None,
    ) -> None:
        """Queues ``task``; ``counter`` names what to count (and show as done) when it finishes."""
        await self._slots.acquire()
        pending = asyncio.create_task(self._check(task, block, file, counter, on_result))
        self._pending.add(pending)
        pending.add_done_callback(self._pending.discard)

    async def _check(
        self,
        task: FileTask,
        block: BlockLocation,
        file: str,
        counter: str,
        on_result: Callable[[FileCheck], None] | None,
    ) -> None:
        try:
            result = await self._runner.run(task)
        finally:
            self._slots.release()
        self.record(result, block, file, counter)
        if on_result is not None:
            on_result(result)

    def skip(self, counter: str, records: int, size: int) -> None:
        """Counts a file an incremental audit found unchanged since it last verified."""
        self._recorder.count(counter)
        self._recorder.count("unchanged")
        if records:
            self._recorder.count("records", records)
        self._progress.advance(blocks=1, bytes=size)

    def record(self, result: FileCheck, block: BlockLocation, file: str, counter: str) -> None:
        """Records a result found without running a check (an object that failed its fetch)."""
        self._recorder.count(counter)
        self._progress.advance(blocks=1)
        if result.records:
            self._recorder.count("records", result.records)
        for problem in result.problems:
            self._recorder.add(
                Finding(
                    problem.status,
                    problem.rule,
                    problem.message,
                    block=block,
                    file=file,
                    field=problem.field,
                    expected=problem.expected,
                    actual=problem.actual,
                )
            )

    async def drain(self) -> None:
        """Waits for every check; re-raises the first unexpected error (a bug, not a finding)."""
        try:
            while self._pending:
                for done in await asyncio.gather(*self._pending, return_exceptions=True):
                    if isinstance(done, BaseException):
                        raise done
        finally:
            for pending in self._pending:
                pending.cancel()


async def check_data(
    dataset: Dataset,
    survey: ChainSurvey,
    name: str,
    runner: CheckRunner,
    progress: Progress,
    state: AuditState | None = None,
) -> LayerResult:
    """Runs layer 2 over the blocks of ``survey.block_range``.

    With ``state``, files are stamped as they pass, and (if ``state.incremental``) files whose
    stamp still matches are counted as ``unchanged`` instead of being read.
    """
    started = time.monotonic()
    recorder = LayerRecorder(Layer.DATA)
    for counter in ("slices", "checkpoints"):
        recorder.count(counter, 0)
    if state is not None:
        recorder.count("unchanged", 0)
    recorder.count("bytes", survey.data_bytes)
    recorder.count("records", 0)
    checks = _Checks(runner, recorder, progress)
    progress.begin(
        name, Layer.DATA, blocks=survey.slices + survey.checkpoints, bytes=survey.data_bytes
    )
    try:
        vocab = Vocab()
        declared: _Declared | None = None
        async for hash, block in dataset.chain.iter_blocks_forward(survey.block_range.last.hash):
            event = block.event
            if isinstance(event, SetVocab):
                vocab = Vocab.of(event)
            elif isinstance(event, SetDataSchema):
                declared = _Declared(
                    tuple(arrow_schema_of(event).names), f"block #{block.sequence_number}"
                )
            elif isinstance(event, (AddData, ExecuteTransform)) and survey.block_range.contains(
                block.sequence_number
            ):
                await _submit(
                    checks,
                    dataset,
                    BlockLocation(block.sequence_number, hash),
                    event,
                    vocab,
                    declared,
                    state,
                )
        await checks.drain()
    finally:
        progress.end()
    return recorder.result(time.monotonic() - started)


async def _submit(
    checks: _Checks,
    dataset: Dataset,
    location: BlockLocation,
    event: AddData | ExecuteTransform,
    vocab: Vocab,
    declared: _Declared | None,
    state: AuditState | None,
) -> None:
    """The checks of one block's slice and checkpoint."""
    if event.new_data is not None:
        data = event.new_data
        file = f"data/{object_name(data.physical_hash)}"
        path = await _path(dataset.data, data.physical_hash, "event.newData")
        if isinstance(path, FileCheck):
            _record_fetch_failure(checks, state, path, location, file, "slices")
        else:
            expectation = SliceExpectation(
                data_slice=data,
                vocab=vocab,
                declared_columns=None if declared is None else declared.columns,
                declared_in=None if declared is None else declared.where,
            )
            interval = data.offset_interval
            records = interval.end - interval.start + 1
            slice_check = SliceCheck(path, data.physical_hash, data.size, expectation)
            await _submit_file(checks, state, slice_check, location, file, "slices", records)
    if event.new_checkpoint is not None:
        checkpoint = event.new_checkpoint
        file = f"checkpoints/{object_name(checkpoint.physical_hash)}"
        path = await _path(dataset.checkpoints, checkpoint.physical_hash, "event.newCheckpoint")
        if isinstance(path, FileCheck):
            _record_fetch_failure(checks, state, path, location, file, "checkpoints")
        else:
            object_check = ObjectCheck(
                path, checkpoint.physical_hash, checkpoint.size, "event.newCheckpoint"
            )
            await _submit_file(checks, state, object_check, location, file, "checkpoints", 0)


def _record_fetch_failure(
    checks: _Checks,
    state: AuditState | None,
    result: FileCheck,
    location: BlockLocation,
    file: str,
    counter: str,
) -> None:
    checks.record(result, location, file, counter)
    if state is not None:
        state.failed(file)


async def _submit_file(
    checks: _Checks,
    state: AuditState | None,
    task: SliceCheck | ObjectCheck,
    location: BlockLocation,
    file: str,
    counter: str,
    records: int,
) -> None:
    """Submits ``task`` unless ``state`` shows the file unchanged since it last verified."""
    if state is None:
        await checks.submit(task, location, file, counter)
        return
    stat = await asyncio.to_thread(stat_or_none, task.path)
    if state.unchanged(file, stat, task.expected_hash):
        checks.skip(counter, records, task.size)
        return
    read_at = now_ns()

    def on_result(result: FileCheck) -> None:
        if result.problems:
            state.failed(file)
        else:
            state.passed(file, stat, task.expected_hash, read_at)

    await checks.submit(task, location, file, counter, on_result)


async def _path(store: ObjectStore, hash: Multihash, field: str) -> Path | FileCheck:
    """The object's local file (a bucket's object is fetched into the workspace's cache, streamed
    and hash-checked). A missing object gives a path that does not exist, which the checks report
    as missing; a bucket's object whose bytes hash to something else gives that finding."""
    if not isinstance(store, LocalFiles):
        raise VerifyError(
            f"{store!r} is not on the local file system; the verifier reads files by path"
        )
    try:
        return await store.local_file(hash)
    except ObjectNotFoundError:
        return store.path_of(hash)
    except HashMismatchError as err:
        return fetched_hash_mismatch(field, err.expected, err.actual)
