"""The seam between odfd and its query engines: one Protocol every engine implements.

A transform names its engine (``TransformSql.engine``); :mod:`verifier.engine.registry` picks the
implementation. An engine does two things: run one transaction of a derivative transform (the ODF
engine contract: a request in, a slice, watermark and checkpoint out) and run a raw query over
Parquet files (ingest preprocessing, ``odfd sql``). A new engine is one module implementing this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from protocol.model import SqlQueryStep
from verifier.engine.transform import TransformRequest, TransformResult


@dataclass(frozen=True, slots=True)
class QueryTable:
    """A table a raw query reads: Parquet files (oldest first) registered under ``name``."""

    name: str
    paths: tuple[Path, ...]
    schema: pa.Schema | None
    """The table's schema (files lacking some of its columns read them as nulls); ``None``
    lets the engine take it from the files."""


class Engine(Protocol):
    """A query engine odfd can run transforms and queries in."""

    name: str

    def run_transform(self, request: TransformRequest) -> TransformResult:
        """Runs one transaction; writes its slice and checkpoint under ``request.out_dir``."""
        ...

    def query(self, steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
        """Runs the query steps (named ones become views) over ``tables``; the result of the
        unnamed last step, rows in the order the engine produced them. Blocking."""
        ...


def step_name(steps: Sequence[SqlQueryStep], number: int) -> str:
    """How errors name query step ``number`` (1-based): just "query" when there is one."""
    if len(steps) == 1:
        return "query"
    alias = steps[number - 1].alias
    return f"query step {number}" + (f" ({alias})" if alias else "")
