"""Layer 3, reproducibility: re-execute every recorded transform transaction and compare.

Each ``ExecuteTransform`` in the range is rebuilt from the chains by ``replay_request`` (the
recorded input block and offset intervals, query, vocabulary, system time, first offset and
previous checkpoint) and run by the engine its transform names (Spark or DataFusion, through the
same ``run_transform`` that produced it), so exactly the code that made the data re-makes it. As the reference does, the
result must equal the block in everything but the file's bytes: the logical hash, the offset
interval (and so the record count) and the output watermark. As in the reference, checkpoints are
not compared: each re-execution starts from the recorded previous checkpoint, whose bytes layer 2
checks against its block.

Transactions whose engine odfd does not have (Flink, RisingWave...) are "not re-executable here",
and those it cannot run otherwise (a Flink-only feature, a checkpoint another engine wrote, a
query this engine rejects) "cannot verify": never passes or failures. ``--cross-engine`` also
re-executes each transaction with another engine and records whether it agrees, for information.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import OdfError
from protocol.identity import DatasetId, Multihash
from protocol.model import ExecuteTransform, MetadataBlock
from storage.chain.rules import ChainState
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from storage.errors import ObjectNotFoundError
from storage.layout import object_name
from verifier.engine.contract import TransformRequest, TransformResult
from verifier.engine.errors import (
    CheckpointError,
    EngineFailureError,
    EngineNotAvailableError,
    InvalidQueryError,
    NonDeterministicQueryError,
    UnsupportedTransformError,
)
from verifier.engine.registry import Engines
from verifier.engine.replay import replay_request
from verifier.metadata_layer import ChainSurvey
from verifier.progress import Progress
from verifier.report import (
    BlockLocation,
    CrossEngineCheck,
    CrossEngineResult,
    Finding,
    Layer,
    LayerRecorder,
    LayerResult,
    Status,
)
from verifier.row_diff import RowDiffError, sample_differences

OpenInput = Callable[[DatasetId], Awaitable[Dataset]]


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    engines: Engines
    """The process's engines: each transaction runs in the one its transform names."""
    sample_rows: int
    """Rows of each side shown when a transaction does not reproduce."""
    scratch_dir: Path | None
    """Where re-executed slices are written (removed after comparison); ``None``: the system's temp."""
    cross_engine: str | None = None
    """Also re-execute every transaction with this engine and report whether it agrees."""


async def check_reproducibility(
    dataset: Dataset,
    survey: ChainSurvey,
    name: str,
    open_input: OpenInput,
    settings: ReplaySettings,
    progress: Progress,
) -> LayerResult:
    """Runs layer 3 over the ``ExecuteTransform`` blocks of ``survey.block_range``, oldest first
    (each replay reads the checkpoint the one before it recorded). One forward pass over the
    chain gives each transaction the state before it, so planning is linear in the chain."""
    started = time.monotonic()
    recorder = LayerRecorder(Layer.REPRODUCIBILITY)
    recorder.count("transactions", 0)
    recorder.count("records", 0)
    progress.begin(name, Layer.REPRODUCIBILITY, blocks=survey.transactions)
    state = ChainState(dataset.id)  # at the block before the current one: each replay needs it
    try:
        async for hash, block in dataset.chain.iter_blocks_forward(survey.block_range.last.hash):
            if isinstance(block.event, ExecuteTransform) and survey.block_range.contains(
                block.sequence_number
            ):
                await _replay(dataset, hash, block, state.copy(), open_input, settings, recorder)
                progress.advance(blocks=1)
            state.apply(hash, block)
    finally:
        progress.end()
    return recorder.result(time.monotonic() - started)


async def _replay(
    dataset: Dataset,
    hash: Multihash,
    block: MetadataBlock,
    before: ChainState,
    open_input: OpenInput,
    settings: ReplaySettings,
    recorder: LayerRecorder,
) -> None:
    location = BlockLocation(block.sequence_number, hash)
    if settings.scratch_dir is not None:
        settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="odfd-verify-", dir=settings.scratch_dir) as scratch:
        try:
            request = await replay_request(dataset, hash, open_input, Path(scratch), before=before)
        except Exception as err:
            rule = _cannot_verify_rule(err)
            if rule is None:
                raise
            recorder.add(Finding(Status.CANNOT_VERIFY, rule, _explain(err), block=location))
            return
        await _replay_natively(dataset, block, location, request, settings, recorder)
        if settings.cross_engine is not None:
            await _replay_cross_engine(
                dataset, block, location, request, settings.cross_engine, settings, recorder
            )


async def _replay_natively(
    dataset: Dataset,
    block: MetadataBlock,
    location: BlockLocation,
    request: TransformRequest,
    settings: ReplaySettings,
    recorder: LayerRecorder,
) -> None:
    """Re-executes the transaction with the engine its transform names, and compares."""
    try:
        engine = settings.engines.named(request.transform.engine, request.dataset_alias)
        result = await asyncio.to_thread(engine.run_transform, request)
    except EngineNotAvailableError as err:
        recorder.add(
            Finding(
                Status.NOT_REEXECUTABLE,
                "engine-not-available",
                f"not re-executable here: engine {err.engine}",
                block=location,
                field="transform.engine",
            )
        )
        return
    except Exception as err:
        rule = _cannot_verify_rule(err)
        if rule is None:
            raise
        recorder.add(Finding(Status.CANNOT_VERIFY, rule, _explain(err), block=location))
        return
    recorder.count("transactions")
    if result.new_data is not None:
        recorder.count("records", result.new_data.num_records)
    for finding in await _compare(dataset, block, location, request, result, settings):
        recorder.add(finding)


#: What a cross-engine run is compared on: the records. Watermarks and checkpoints are each
#: engine's own business (Spark keeps input watermarks in its checkpoint, DataFusion none).
_CROSS_ENGINE_RULES = ("new-data", "offset-interval", "logical-hash")


async def _replay_cross_engine(
    dataset: Dataset,
    block: MetadataBlock,
    location: BlockLocation,
    request: TransformRequest,
    engine_name: str,
    settings: ReplaySettings,
    recorder: LayerRecorder,
) -> None:
    """Re-executes the transaction with ``engine_name`` and records agree / differ / error."""
    out_dir = request.out_dir / f"cross-{engine_name}"
    cross = dataclasses.replace(
        request,
        transform=dataclasses.replace(request.transform, engine=engine_name),
        out_dir=out_dir,
        spill_dir=str(out_dir),
    )
    try:
        engine = settings.engines.named(engine_name, request.dataset_alias)
        result = await asyncio.to_thread(engine.run_transform, cross)
    except Exception as err:
        if _cannot_verify_rule(err) is None:
            raise
        check = CrossEngineCheck(location, "error", _explain(err))
    else:
        findings = [
            f
            for f in await _compare(dataset, block, location, cross, result, settings)
            if f.rule in _CROSS_ENGINE_RULES
        ]
        records = 0 if result.new_data is None else result.new_data.num_records
        sample = None
        if [f.rule for f in findings] == ["logical-hash"] and result.new_data is not None:
            # Engines may order a join's or aggregation's rows differently: compare the records
            # without their offsets before calling it a difference.
            event = block.event
            assert isinstance(event, ExecuteTransform) and event.new_data is not None
            recorded = event.new_data
            sample = await _sample(
                dataset,
                recorded.physical_hash,
                result.new_data.path,
                cross,
                settings,
                ignore_offsets=True,
            )
            if sample.keys() == {"limit", "recordedOnly", "recomputedOnly"} and not (
                sample["recordedOnly"] or sample["recomputedOnly"]
            ):
                findings = []
        if findings:
            message = "; ".join(f.message for f in findings)
            check = CrossEngineCheck(location, "differ", message, sample)
        elif sample is not None:
            check = CrossEngineCheck(
                location,
                "agree",
                f"{engine_name} gives the recorded {records} record(s), in another order",
            )
        else:
            check = CrossEngineCheck(
                location, "agree", f"{engine_name} gives the recorded {records} record(s)"
            )
    previous = recorder.cross_engine.checks if recorder.cross_engine else ()
    recorder.cross_engine = CrossEngineResult(engine_name, (*previous, check))


async def _compare(
    dataset: Dataset,
    block: MetadataBlock,
    location: BlockLocation,
    request: TransformRequest,
    result: TransformResult,
    settings: ReplaySettings,
) -> list[Finding]:
    event = block.event
    assert isinstance(event, ExecuteTransform)
    recorded, recomputed = event.new_data, result.new_data
    findings: list[Finding] = []
    if (recorded is None) != (recomputed is None):
        findings.append(
            Finding(
                Status.FAILED,
                "new-data",
                "the block records "
                + ("no data" if recorded is None else f"{_interval_size(recorded)} record(s)")
                + " but re-executing the transaction gives "
                + ("none" if recomputed is None else f"{recomputed.num_records}"),
                block=location,
                field="event.newData",
            )
        )
    elif recorded is not None and recomputed is not None:
        interval = recorded.offset_interval
        if (interval.start, interval.end) != (recomputed.offset_start, recomputed.offset_end):
            findings.append(
                Finding(
                    Status.FAILED,
                    "offset-interval",
                    f"re-execution gives offsets [{recomputed.offset_start}, {recomputed.offset_end}], "
                    f"the block records [{interval.start}, {interval.end}]",
                    block=location,
                    field="event.newData.offsetInterval",
                    expected=f"[{interval.start}, {interval.end}]",
                    actual=f"[{recomputed.offset_start}, {recomputed.offset_end}]",
                )
            )
        if recorded.logical_hash != recomputed.logical_hash:
            details: dict[str, Any] = {
                "offsetInterval": {"start": interval.start, "end": interval.end}
            }
            details["sample"] = await _sample(
                dataset, recorded.physical_hash, recomputed.path, request, settings
            )
            findings.append(
                Finding(
                    Status.FAILED,
                    "logical-hash",
                    f"re-executing the transaction gives different records (offsets {interval.start}..{interval.end}): "
                    f"they hash to {recomputed.logical_hash}",
                    block=location,
                    file=f"data/{object_name(recorded.physical_hash)}",
                    field="event.newData.logicalHash",
                    expected=str(recorded.logical_hash),
                    actual=str(recomputed.logical_hash),
                    details=details,
                )
            )
    if event.new_watermark != result.new_watermark:
        findings.append(
            Finding(
                Status.FAILED,
                "watermark",
                f"re-execution gives watermark {_text(result.new_watermark)}, "
                f"the block records {_text(event.new_watermark)}",
                block=location,
                field="event.newWatermark",
                expected=_text(event.new_watermark),
                actual=_text(result.new_watermark),
            )
        )
    return findings


async def _sample(
    dataset: Dataset,
    recorded: Multihash,
    recomputed: Path,
    request: TransformRequest,
    settings: ReplaySettings,
    *,
    ignore_offsets: bool = False,
) -> dict[str, Any]:
    try:
        if not await dataset.data.contains(recorded):
            raise ObjectNotFoundError(str(dataset.data), recorded)
        return await asyncio.to_thread(
            sample_differences,
            settings.engines,
            await local_file(dataset.data, recorded),
            recomputed,
            request.vocab.offset,
            settings.sample_rows,
            ignore_offsets,
        )
    except ObjectNotFoundError:
        return {"limit": settings.sample_rows, "unavailable": "the recorded data file is missing"}
    except RowDiffError as err:
        return {
            "limit": settings.sample_rows,
            "unavailable": f"the files cannot be compared: {err}",
        }


def _interval_size(data_slice: Any) -> int:
    return data_slice.offset_interval.end - data_slice.offset_interval.start + 1


def _text(value: object) -> str | None:
    return None if value is None else str(value)


#: Why a transaction could not be re-executed, most specific first. None of these is evidence
#: against the data: they say odfd cannot reproduce it, so it stays unverified.
_CANNOT_VERIFY_RULES: tuple[tuple[type[Exception], str], ...] = (
    (UnsupportedTransformError, "unsupported-transform"),
    (InvalidQueryError, "query-rejected"),
    (NonDeterministicQueryError, "non-deterministic-query"),
    (CheckpointError, "checkpoint-unreadable"),
    (OdfError, "re-execution"),
)


def _cannot_verify_rule(err: Exception) -> str | None:
    for kind, rule in _CANNOT_VERIFY_RULES:
        if isinstance(err, kind):
            return rule
    return None


def _explain(err: Exception) -> str:
    if isinstance(err, InvalidQueryError):
        return f"{err} (the engine that wrote this data accepted the query; this one does not)"
    if isinstance(err, EngineFailureError):
        return f"{err.engine} failed re-executing the transaction: {err.reason}"
    return str(err)
