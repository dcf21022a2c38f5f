"""``odfd inspect``: a dataset's lineage (inputs, recursively; readers with ``--downstream``),
its schema (ODF and Arrow, or DDL), and the transform behind every block that changed it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.console.details import schema_document, transform_history
from odfd.console.lineage import LineageError, build_lineage
from odfd.console.lineage_formats import FORMATS, render
from protocol.identity import DatasetRef
from storage.catalog import DatasetRecord
from storage.dataset import Dataset
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help="lineage, schema and queries of a dataset")
    commands = parser.add_subparsers(dest="inspect_command", metavar="WHAT", required=True)

    lineage = commands.add_parser("lineage", help="the graph of a dataset's inputs")
    lineage.add_argument("dataset", metavar="DATASET")
    lineage.add_argument(
        "--downstream", action="store_true", help="also the datasets reading it, recursively"
    )
    lineage.add_argument("-o", "--output-format", choices=FORMATS, default="tree")
    lineage.add_argument("--output-path", type=Path, metavar="FILE", help="write to FILE")
    add_root_argument(lineage)
    lineage.set_defaults(func=_lineage)

    schema = commands.add_parser("schema", help="a dataset's ODF and Arrow schema")
    schema.add_argument("dataset", metavar="DATASET")
    schema.add_argument("-o", "--output-format", choices=("text", "json", "ddl"), default="text")
    add_root_argument(schema)
    schema.set_defaults(func=_schema)

    query = commands.add_parser("query", help="the transform of every block that changed it")
    query.add_argument("dataset", metavar="DATASET")
    query.add_argument("-o", "--output-format", choices=("text", "json"), default="text")
    add_root_argument(query)
    query.set_defaults(func=_query)


def _emit(text: str, path: Path | None) -> None:
    if path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        path.write_text(text if text.endswith("\n") else text + "\n")


def _lineage(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        graph = await build_lineage(workspace, args.dataset, downstream=args.downstream)
        _emit(render(graph, args.output_format, downstream=args.downstream), args.output_path)
        return 0

    return run_in_node(args, run)


async def _dataset(workspace: Workspace, ref: str) -> tuple[DatasetRecord, Dataset]:
    record = await workspace.try_resolve(DatasetRef.parse(ref))
    if record is None:
        raise LineageError(f"no dataset {ref} in the workspace at {workspace.root}")
    return record, workspace.open_dataset(record.id)


def _schema(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        record, dataset = await _dataset(workspace, args.dataset)
        document = await schema_document(dataset)
        if document["arrow"] is None:
            print(f"{record.alias} has no schema yet (no data was added)", file=sys.stderr)
            return 1
        if args.output_format == "json":
            _emit(json.dumps(document, indent=2), None)
        elif args.output_format == "ddl":
            _emit(document["ddl"], None)
        else:
            lines = [f"{record.alias}: {len(document['arrow'])} columns", ""]
            width = max(len(f["name"]) for f in document["arrow"])
            for field in document["arrow"]:
                null = "" if field["nullable"] else "  not null"
                lines.append(f"  {field['name']:<{width}}  {field['type']}{null}")
            _emit("\n".join(lines), None)
        return 0

    return run_in_node(args, run)


def _query(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        record, dataset = await _dataset(workspace, args.dataset)
        steps = await transform_history(dataset)
        if args.output_format == "json":
            _emit(json.dumps([s.to_json() for s in steps], indent=2), None)
            return 0
        if not steps:
            _emit(f"{record.alias} is a {record.kind.value} dataset: no transform", None)
            return 0
        lines: list[str] = []
        for step in steps:
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
