"""Printing query results: an aligned text table, CSV, JSON (one array), NDJSON (one object a
line), YAML, or a Parquet file — the names ``odfd.cli.output`` uses for every command; ``odfd sql`` in its own process and in a daemon for a thin client encode with it alike."""

from __future__ import annotations

import datetime as dt
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from odfd.errors import OdfdError

if TYPE_CHECKING:  # Arrow is imported when a result is written, not by argument parsing
    import pyarrow as pa

FORMATS = ("table", "csv", "json", "ndjson", "yaml", "parquet")
TEXT_FORMATS = FORMATS[:-1]


class OutputError(OdfdError):
    """The result cannot be written as asked."""

    exit_code = 2  # the output arguments are wrong, found before any engine starts


def write_result(table: pa.Table, fmt: str, path: Path | None, out: TextIO | None = None) -> None:
    if fmt == "parquet":
        if path is None:
            raise OutputError("--output-format parquet needs --output-path FILE")
        import pyarrow.parquet as pq

        pq.write_table(table, str(path))
        return
    if path is not None:
        with open(path, "w", encoding="utf-8", newline="") as target:
            _write_text(table, fmt, target)
    else:
        _write_text(table, fmt, out or sys.stdout)


def _write_text(table: pa.Table, fmt: str, out: TextIO) -> None:
    if fmt == "table":
        out.write(render_table(table))
    elif fmt == "csv":
        from odfd.app.csv_text import csv_text

        out.write(csv_text(table))
    elif fmt == "json":
        rows = table.to_pylist()
        out.write("[" if rows else "[]\n")
        for n, row in enumerate(rows):
            out.write(",\n " if n else "\n ")
            out.write(json.dumps(row, default=_json_value, ensure_ascii=False))
        out.write("\n]\n" if rows else "")
    elif fmt == "ndjson":
        for row in table.to_pylist():
            out.write(json.dumps(row, default=_json_value, ensure_ascii=False))
            out.write("\n")
    elif fmt == "yaml":
        from protocol.codec.yaml_emitter import dump as yaml_dump

        rows = [
            {k: _yaml_value(v) for k, v in row.items() if v is not None}
            for row in table.to_pylist()
        ]
        out.write(yaml_dump(rows) if rows else "[]\n")
    else:
        raise OutputError(f"unknown output format {fmt!r} (one of {', '.join(FORMATS)})")


def render_table(table: pa.Table) -> str:
    """An aligned text table and its row count; a result without columns (a dataset with no
    data yet has no schema) is the count alone, not an empty frame of rules."""
    names = table.column_names
    if not names:
        return f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}\n"
    columns = [[_cell(v) for v in table.column(i).to_pylist()] for i in range(table.num_columns)]
    widths = [max([len(n), *(len(c) for c in col)]) for n, col in zip(names, columns, strict=True)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"
    lines = [
        rule,
        "| " + " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + " |\n",
        rule,
    ]
    right = [_numeric(table.schema.field(i).type) for i in range(len(names))]
    for row in range(table.num_rows):
        cells = [
            columns[i][row].rjust(widths[i]) if right[i] else columns[i][row].ljust(widths[i])
            for i in range(len(names))
        ]
        lines.append("| " + " | ".join(cells) + " |\n")
    lines.append(rule)
    lines.append(f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}\n")
    return "".join(lines)


def _numeric(data_type: pa.DataType) -> bool:
    import pyarrow as pa

    return (
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_decimal(data_type)
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return _iso(value)
    return str(value)


def _iso(value: dt.datetime) -> str:
    """RFC 3339 with as many fraction digits as the value needs (ODF times are milliseconds)."""
    spec = (
        "seconds"
        if value.microsecond == 0
        else "milliseconds"
        if value.microsecond % 1000 == 0
        else "microseconds"
    )
    if value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec=spec) + "Z"
    return value.isoformat(timespec=spec)


def check_output_args(fmt: str, path: Path | None) -> None:
    """Argument errors found before any workspace is opened or engine started."""
    if fmt == "parquet" and path is None:
        raise OutputError("--output-format parquet needs --output-path FILE")


def _yaml_value(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {k: _yaml_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_yaml_value(v) for v in value]
    return _json_value(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _iso(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot represent {type(value).__name__} in JSON")
