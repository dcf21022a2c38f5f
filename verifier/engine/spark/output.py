"""A Spark result written as a slice: its rows collected to this process in order, then
:func:`verifier.engine.output.write_batches`, as every engine's output is written."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from protocol.model import Timestamp
from verifier.engine.columns import Vocab
from verifier.engine.output import WrittenSlice, write_batches
from verifier.engine.spark.collect import merged_batches, ordered_batches
from verifier.engine.spark.run_merge import RunsOverlap

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write_slice(
    df: DataFrame,
    *,
    vocab: Vocab,
    start_offset: int,
    system_time: Timestamp,
    out_path: Path,
    spill_dir: str | None = None,
    required: frozenset[str] = frozenset(),
    op_required: bool = True,
    declared: pa.Schema | None = None,
    merge_keys: tuple[str, str] | None = None,
) -> tuple[pa.Schema, WrittenSlice | None]:
    """Runs ``df`` and writes its rows as a slice at ``out_path`` (``None`` if it has no rows).

    Returns the slice's Arrow schema too: an empty result still defines the dataset's schema.
    A null in a ``required`` column raises :class:`~verifier.engine.output.NullValuesError`
    before anything is kept; ``op`` is required unless ``op_required`` is false; inside the
    columns ``declared`` has, its nullability holds (:func:`~verifier.engine.output.slice_schema`).
    With ``merge_keys``, ``df`` is sorted by them within partitions only and its rows are merged
    here (:func:`verifier.engine.spark.collect.merged_batches`); the second key is not written.
    """
    write = functools.partial(
        write_batches,
        vocab=vocab,
        start_offset=start_offset,
        system_time=system_time,
        out_path=out_path,
        required=required,
        op_required=op_required,
        declared=declared,
    )
    if merge_keys is not None:
        with merged_batches(df, *merge_keys, spill_dir=spill_dir) as (result_schema, runs):
            try:
                return write(result_schema, runs.streamed())
            except RunsOverlap:
                return write(result_schema, runs.merged())
    with ordered_batches(df, spill_dir=spill_dir) as (result_schema, batches):
        return write(result_schema, batches)
