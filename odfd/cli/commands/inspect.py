"""``odfd inspect``: a dataset's lineage (inputs, recursively; readers with ``--downstream``),
its schema (ODF and Arrow, or DDL), and the transform behind every block that changed it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.inspect import NoSchemaError, dataset_schema, lineage, transforms
from odfd.cli.lineage_formats import FORMATS, render
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help="lineage, schema and queries of a dataset")
    commands = parser.add_subparsers(dest="inspect_command", metavar="WHAT", required=True)

    graph = commands.add_parser("lineage", help="the graph of a dataset's inputs")
    graph.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    graph.add_argument(
        "--downstream", action="store_true", help="also the datasets reading it, recursively"
    )
    graph.add_argument(
        "-o",
        "--output-format",
        choices=FORMATS,
        default="tree",
        help="default: tree; dot for Graphviz, html a standalone page",
    )
    graph.add_argument("--output-path", type=Path, metavar="FILE", help="write to FILE")
    add_root_argument(graph)
    graph.set_defaults(func=_lineage)

    schema = commands.add_parser("schema", help="a dataset's ODF and Arrow schema")
    schema.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    schema.add_argument(
        "-o",
        "--output-format",
        choices=("text", "json", "ddl"),
        default="text",
        help="default: text; ddl: the columns as SQL DDL",
    )
    add_root_argument(schema)
    schema.set_defaults(func=_schema)

    query = commands.add_parser("query", help="the transform of every block that changed it")
    query.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    query.add_argument(
        "-o", "--output-format", choices=("text", "json"), default="text", help="default: text"
    )
    add_root_argument(query)
    query.set_defaults(func=_query)


def _emit(text: str, path: Path | None) -> None:
    if path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        path.write_text(text if text.endswith("\n") else text + "\n")


def _lineage(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        graph = await lineage(node, args.dataset, downstream=args.downstream)
        _emit(render(graph, args.output_format, downstream=args.downstream), args.output_path)
        return 0

    return run_in_node(args, run)


def _schema(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        try:
            schema = await dataset_schema(node, args.dataset)
        except NoSchemaError as err:
            print(err, file=sys.stderr)
            return 1
        if args.output_format == "json":
            _emit(json.dumps(schema.to_json(), indent=2), None)
        elif args.output_format == "ddl":
            _emit(schema.ddl, None)
        else:
            lines = [f"{schema.alias}: {len(schema.arrow)} columns", ""]
            width = max(len(f["name"]) for f in schema.arrow)
            for field in schema.arrow:
                null = "" if field["nullable"] else "  not null"
                lines.append(f"  {field['name']:<{width}}  {field['type']}{null}")
            _emit("\n".join(lines), None)
        return 0

    return run_in_node(args, run)


def _query(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        history = await transforms(node, args.dataset)
        if args.output_format == "json":
            _emit(json.dumps([s.to_json() for s in history.steps], indent=2), None)
            return 0
        if not history.steps:
            _emit(f"{history.alias} is a {history.kind} dataset: no transform", None)
            return 0
        lines: list[str] = []
        for step in history.steps:
            lines.append(
                f"block {step.sequence_number} ({step.system_time}): SetTransform, "
                f"engine {step.engine}, inputs {', '.join(step.inputs)}"
            )
            for alias, query in step.queries:
                lines.append(f"  {alias or '(output)'}:")
                lines += [f"    {line}" for line in query.strip().splitlines()]
            if not step.blocks:
                lines.append("  no block changed the data under this transform yet")
            for block in step.blocks:
                offsets = block["offsets"]
                span = (
                    "no new records" if offsets is None else f"offsets {offsets[0]}..{offsets[1]}"
                )
                lines.append(
                    f"  block {block['sequenceNumber']} ({block['systemTime']}) "
                    f"ExecuteTransform {block['hash'][-12:]}: {span}"
                )
            lines.append("")
        _emit("\n".join(lines).rstrip("\n"), None)
        return 0

    return run_in_node(args, run)
