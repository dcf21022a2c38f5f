"""``odfd ingest``: push data from files (or stdin) into a root dataset through a push source."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.write_log import local_actor, record_write
from odfd.cli import terminal
from odfd.cli.status_line import working
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.coordinator.commit import RUN_DIR
from odfd.coordinator.ingest import IngestOutcome, ingest_push
from odfd.coordinator.retry import retry_lost_race
from odfd.ingest.formats import FORMATS
from protocol.model import Timestamp
from storage.errors import RefCasError

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ingest", help="push data from files into a root dataset")
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="data files, each one transaction; '-' reads stdin"
    )
    parser.add_argument("--source-name", help="push source to use when the dataset has several")
    parser.add_argument(
        "--event-time",
        type=Timestamp.parse_rfc3339,
        metavar="TIME",
        help="event time of records that carry none (default: the ingest's system time)",
    )
    parser.add_argument(
        "--input-format",
        choices=sorted(FORMATS),
        metavar="FMT",
        help="read the files as FMT instead of the source's format (its schema is kept): "
        + ", ".join(sorted(FORMATS)),
    )
    add_root_argument(parser)
    parser.set_defaults(func=_ingest)


def _ingest(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        engines = node.engines
        dataset = await workspace.get_dataset(args.dataset)
        for name in args.files:
            with _input_file(name, workspace.root) as path:

                async def attempt(path: Path = path, name: str = name) -> IngestOutcome:
                    async with working(f"ingest {args.dataset}: {name}"):
                        return await ingest_push(
                            workspace,
                            dataset,
                            path,
                            engines=engines,
                            source_name=args.source_name,
                            event_time=args.event_time,
                            input_format=args.input_format,
                        )

                def retrying(lost: RefCasError, name: str = name) -> None:
                    terminal.info(
                        f"Retrying: {args.dataset}: {name}: another write moved its head to "
                        f"{lost.actual} first; ingesting again on top of it"
                    )

                outcome = await retry_lost_race(attempt, retrying)
            if outcome.up_to_date:
                terminal.info(f"Skipped: {outcome.dataset}: {name}: {outcome.reason}")
            else:
                await record_write(
                    workspace,
                    local_actor(),
                    "ingest",
                    outcome.dataset,
                    dataset_id=dataset.id,
                    old_head=outcome.old_head,
                    new_head=outcome.new_head,
                )
                terminal.info(
                    f"Ingested: {outcome.dataset}: {name}: {outcome.num_records} record(s), head {outcome.new_head}"
                )
        return 0

    return run_in_node(args, run)


@contextmanager
def _input_file(name: str, workspace_root: Path) -> Iterator[Path]:
    """The file to ingest; stdin is first copied to a file in the workspace."""
    if name != "-":
        yield Path(name)
        return
    run_dir = workspace_root / RUN_DIR
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=run_dir, prefix="stdin-", delete=False) as out:
        shutil.copyfileobj(sys.stdin.buffer, out)
    try:
        yield Path(out.name)
    finally:
        Path(out.name).unlink(missing_ok=True)
