"""One output convention for every command that prints records: ``-o/--output-format`` with the
same names everywhere — ``table`` (aligned columns for people), ``csv``, ``json`` (one array),
``ndjson`` (one object a line), ``yaml`` — and ``parquet`` for data (``odfd.app.result_formats``).

Results go to stdout; status lines go to stderr (``odfd.cli.terminal``), so piping a result into
another program never mixes the two.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

RECORD_FORMATS = ("table", "csv", "json", "ndjson", "yaml")


def add_output_format(
    parser: argparse.ArgumentParser, formats: Sequence[str] = RECORD_FORMATS, default: str = "table"
) -> None:
    parser.add_argument(
        "-o",
        "--output-format",
        "--output",
        dest="output",
        choices=tuple(formats),
        default=default,
        metavar="FORMAT",
        help=f"{', '.join(formats)} (default: {default})",
    )


def write_records(
    rows: list[dict[str, Any]],
    fmt: str,
    columns: Sequence[tuple[str, str]],
    out: TextIO | None = None,
) -> None:
    """``rows`` in ``fmt``; ``columns`` (heading, key) picks and orders the table's columns (the
    other formats carry every key)."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps(rows, indent=2, ensure_ascii=False, default=str) + "\n")
    elif fmt == "ndjson":
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    elif fmt == "yaml":
        from odfd.app.yaml_documents import yaml_document  # only this format needs it

        out.write(yaml_document(_plain(rows)) if rows else "[]\n")
    elif fmt == "csv":
        import csv  # only this format needs it

        keys = list(rows[0]) if rows else [key for _, key in columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _csv_cell(row.get(k)) for k in keys} for row in rows)
        out.write(buffer.getvalue())
    else:
        out.write(render_columns(rows, columns) + "\n")


def render_columns(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    cells = [[heading for heading, _ in columns]] + [
        ["-" if row.get(key) is None else str(row[key]) for _, key in columns] for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def _csv_cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return "" if value is None else value


def _plain(value: Any) -> Any:
    """Values the YAML emitter takes (it writes plain trees)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
