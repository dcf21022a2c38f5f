"""A small sample of the records that differ between a recorded slice and its re-execution.

When a transaction does not reproduce, the logical hash only says *that* the records differ; an
auditor wants to see *how*. Both files are read by :data:`ENGINE` (in-process, no JVM, streaming
over large slices) and compared as multisets of whole records, in both directions
(``EXCEPT ALL``), keeping the first few by offset.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from protocol.model import SqlQueryStep
from verifier.engine.contract import Engine, QueryTable
from verifier.engine.registry import Engines
from verifier.errors import VerifierError

#: The engine the files are compared in: DataFusion runs in the process.
ENGINE = "datafusion"


class RowDiffError(VerifierError):
    """The two files cannot be read or compared."""


def sample_differences(
    engines: Engines,
    recorded: Path,
    recomputed: Path,
    offset_column: str,
    limit: int,
    ignore_offsets: bool = False,
) -> dict[str, Any]:
    """``{"recordedOnly": [...], "recomputedOnly": [...]}``: up to ``limit`` rows each, by offset.

    If the two files do not even have the same columns, that is said instead (``columnsDiffer``)
    and the first rows of each are shown. ``ignore_offsets`` compares the records without their
    offsets (the same records in another order then show no difference).
    """
    engine = engines.named(ENGINE)
    tables = (
        QueryTable("recorded", (recorded,), None),
        QueryTable("recomputed", (recomputed,), None),
    )
    quote_identifier = engine.quote_identifier
    try:
        left = _run(engine, "SELECT * FROM recorded LIMIT 0", tables).schema
        right = _run(engine, "SELECT * FROM recomputed LIMIT 0", tables).schema
        sample: dict[str, Any] = {"limit": limit}
        if _describe(left) != _describe(right):
            sample["columnsDiffer"] = {"recorded": _describe(left), "recomputed": _describe(right)}
            only_left, only_right = "SELECT * FROM recorded", "SELECT * FROM recomputed"
        else:
            columns = ", ".join(
                quote_identifier(name)
                for name in left.names
                if not (ignore_offsets and name == offset_column)
            )
            only_left = (
                f"SELECT {columns} FROM recorded EXCEPT ALL SELECT {columns} FROM recomputed"
            )
            only_right = (
                f"SELECT {columns} FROM recomputed EXCEPT ALL SELECT {columns} FROM recorded"
            )
        for key, query, schema in (
            ("recordedOnly", only_left, left),
            ("recomputedOnly", only_right, right),
        ):
            order = (
                f" ORDER BY {quote_identifier(offset_column)}"
                if offset_column in schema.names and not ignore_offsets
                else ""
            )
            rows = _run(engine, f"SELECT * FROM ({query}){order} LIMIT {limit}", tables)
            sample[key] = [
                {name: json_value(value) for name, value in row.items()} for row in rows.to_pylist()
            ]
    except Exception as err:  # the engine's failure to read or compare, whatever its type
        lines = str(err).strip().splitlines()
        raise RowDiffError(lines[0] if lines else type(err).__name__) from err
    return sample


def _run(engine: Engine, query: str, tables: tuple[QueryTable, ...]) -> pa.Table:
    return engine.query([SqlQueryStep(query=query)], tables)


def _describe(schema: pa.Schema) -> str:
    return "struct<" + ",".join(f"{field.name}:{field.type}" for field in schema) + ">"


def json_value(value: Any) -> Any:
    """A value of a record as JSON: instants in RFC 3339, binary in base64, exact decimals as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)
