"""``odfd ingest``: push data from files (or stdin) into a root dataset through a push source
(``odfd.app.ingest``); this module parses the arguments and prints what each file did."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.events import Event
from odfd.app.ingest import (
    EVENTS,
    FileIngested,
    FileSkipped,
    IngestFile,
    IngestRequest,
    IngestRetrying,
)
from odfd.cli import terminal
from odfd.cli.arguments import parse_rfc3339
from odfd.cli.forwarded_rendering import StatusLineRendering
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node

#: ``odfd.ingest.formats.FORMATS``, spelled out so that parsing imports no ingest code (a test
#: keeps the two equal).
INPUT_FORMATS = ("csv", "geojson", "json", "ndgeojson", "ndjson", "parquet", "shapefile")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ingest", help="push data from files into a root dataset")
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="data files, each one transaction; '-' reads stdin"
    )
    parser.add_argument("--source-name", help="push source to use when the dataset has several")
    parser.add_argument(
        "--event-time",
        type=parse_rfc3339,
        metavar="TIME",
        help="event time of records that carry none (default: the ingest's system time)",
    )
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        metavar="FMT",
        help="read the files as FMT instead of the source's format (its schema is kept): "
        + ", ".join(INPUT_FORMATS),
    )
    add_root_argument(parser)
    parser.set_defaults(func=_ingest, forward=forward)


def _request(args: argparse.Namespace, files: list[IngestFile]) -> IngestRequest:
    return IngestRequest(
        args.dataset, tuple(files), args.source_name, args.event_time, args.input_format
    )


def forward(args: argparse.Namespace) -> tuple[IngestRequest, StatusLineRendering] | str:
    """The request a daemon runs for this command line, or why it runs here."""
    if "-" in args.files:
        return "it reads stdin"
    files = [IngestFile(str(Path(name).absolute()), name) for name in args.files]
    return _request(args, files), StatusLineRendering(EVENTS, Printer())


def _ingest(args: argparse.Namespace) -> int:
    from odfd.app.ingest import ingest
    from odfd.cli.status_line import working

    async def run(node: Node) -> int:
        with _input_files(args.files, node.root) as files:
            await ingest(node, _request(args, files), Printer(), around=working)
        return 0

    return run_in_node(args, run)


class Printer:
    """An ingest's events as status lines."""

    def emit(self, event: Event) -> None:
        match event:
            case FileIngested() as done:
                terminal.info(
                    f"Ingested: {done.dataset}: {done.file}: {done.records} record(s), head {done.head}"
                )
            case FileSkipped() as skipped:
                terminal.info(f"Skipped: {skipped.dataset}: {skipped.file}: {skipped.reason}")
            case IngestRetrying() as again:
                terminal.info(
                    f"Retrying: {again.dataset}: {again.file}: another write moved its head to "
                    f"{again.head} first; ingesting again on top of it"
                )


@contextmanager
def _input_files(names: list[str], workspace_root: Path) -> Iterator[list[IngestFile]]:
    """The files to ingest; stdin is first copied to a file in the workspace."""
    if "-" not in names:
        yield [IngestFile(name, name) for name in names]
        return
    from odfd.app.ingest import staging_folder

    run_dir = staging_folder(workspace_root)
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=run_dir, prefix="stdin-", delete=False) as out:
        shutil.copyfileobj(sys.stdin.buffer, out)
    try:
        yield [IngestFile(out.name if name == "-" else name, name) for name in names]
    finally:
        Path(out.name).unlink(missing_ok=True)
