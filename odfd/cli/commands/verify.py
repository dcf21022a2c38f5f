"""``odfd verify``: audit datasets' metadata integrity, data integrity and reproducibility.

Exit codes: 0 everything verified, 1 something failed verification, 2 something could not be
verified (and nothing failed), 3 everything else verified but some transforms need an engine this
node does not have (e.g. Flink). The JSON report (``--output json``) is documented in
``docs/verify-report.md``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odfd.app.engine_names import ENGINE_NAMES
from odfd.app.verify import VerifyRequest
from odfd.cli.arguments import positive_int
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="audit datasets: metadata integrity, data integrity, reproducibility of transforms",
        description=(
            "Checks that every block hashes to its name and obeys the chain rules (metadata "
            "integrity), that every data slice and checkpoint matches its block (data integrity) "
            "and, for derivative datasets, that re-executing every transform reproduces the "
            "recorded data (reproducibility). Exit code 0: all verified; 1: something failed; "
            "2: something could not be verified; 3: some transforms need an engine odfd lacks."
        ),
    )
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "--recursive",
        "-r",
        action="store_true",
        help="also audit every upstream dataset, in all layers",
    )
    parser.add_argument(
        "--integrity-only",
        "--integrity",
        action="store_true",
        help="check metadata and data integrity only; do not re-execute transforms",
    )
    parser.add_argument(
        "--from",
        dest="from_block",
        type=_selector,
        metavar="BLOCK",
        help="first block (sequence number or hash, inclusive) whose data and "
        "transform are checked; default: the Seed",
    )
    parser.add_argument(
        "--to",
        dest="to_block",
        type=_selector,
        metavar="BLOCK",
        help="last block (sequence number or hash, inclusive); default: the head",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="the report as text (default) or JSON (docs/verify-report.md)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=positive_int,
        metavar="N",
        help="files checked at once (default: all cores)",
    )
    parser.add_argument(
        "--sample-rows",
        type=positive_int,
        default=5,
        metavar="N",
        help="rows of each side shown when a transaction does not reproduce",
    )
    parser.add_argument(
        "--cross-engine",
        choices=ENGINE_NAMES,
        metavar="ENGINE",
        help="also re-execute every transform with ENGINE (spark or datafusion) and report "
        "whether it agrees with the recorded data; informative, never a failure",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="read every data file again, even those unchanged (same size, mtime, ctime and "
        "inode) since they last verified; by default only new or changed files are read",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_verify, forward=forward)


def _selector(text: str) -> str:
    """A block selector, checked and kept as text (the request carries it so)."""
    from odfd.app.verify import check_block_selector
    from protocol.errors import ParseError

    try:
        return check_block_selector(text)
    except ParseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _request(args: argparse.Namespace) -> VerifyRequest:
    return VerifyRequest(
        tuple(args.datasets),
        recursive=args.recursive,
        integrity_only=args.integrity_only,
        from_block=args.from_block,
        to_block=args.to_block,
        jobs=args.jobs,
        sample_rows=args.sample_rows,
        cross_engine=args.cross_engine,
        full=args.full,
    )


def forward(args: argparse.Namespace) -> tuple[VerifyRequest, Rendering]:
    """The request a daemon runs for this command line."""
    return _request(args), Rendering(args.output)


def _verify(args: argparse.Namespace) -> int:
    from odfd.app.progress_display import progress_for
    from odfd.app.verify import rendered, verify

    async def run(node: Node) -> int:
        report = await verify(node, _request(args), progress_for(sys.stderr))
        sys.stdout.write(rendered(report, args.output))
        return report.exit_code

    return run_in_node(args, run)


class Rendering:
    """What the daemon answers, printed as a local run prints it: the progress line the
    daemon's events draw, then the report in the daemon's rendering
    (``odfd.app.verify.result_json``), so that this process loads no report model."""

    def __init__(self, output: str) -> None:
        from odfd.app.progress_display import progress_for

        self.output = output
        self.progress = progress_for(sys.stderr)

    def event(self, data: dict[str, Any]) -> None:
        from odfd.app.events import event_from_json
        from odfd.app.verify import EVENTS, Checked, LayerBegan, LayerEnded

        match event_from_json(data, EVENTS):
            case LayerBegan() as began:
                layer = _Title(began.layer)
                self.progress.begin(
                    began.dataset, layer, blocks=began.total_blocks, bytes=began.total_bytes
                )
            case Checked(blocks=blocks, size=size):
                self.progress.advance(blocks=blocks, bytes=size)
            case LayerEnded():
                self.progress.end()

    def result(self, data: Any) -> int:
        sys.stdout.write(data[self.output])
        return int(data["exitCode"])


@dataclass(frozen=True, slots=True)
class _Title:
    """A layer as the daemon names it (``verifier.progress.Titled``)."""

    title: str
