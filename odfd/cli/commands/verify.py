"""``odfd verify``: audit datasets' metadata integrity, data integrity and reproducibility.

Exit codes: 0 everything verified, 1 something failed verification, 2 something could not be
verified (and nothing failed), 3 everything else verified but some transforms need an engine this
node does not have (e.g. Flink). The JSON report (``--output json``) is documented in
``docs/verify-report.md``.
"""

from __future__ import annotations

import argparse
import sys

from odfd.cli.arguments import positive_int
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.commit import RUN_DIR
from odfd.coordinator.engine import open_engines
from protocol.errors import ParseError
from storage.errors import DatasetNotFoundError
from storage.workspace import Workspace
from verifier.audit import VerifyOptions, default_jobs, verify
from verifier.engine.registry import ENGINE_NAMES
from verifier.progress import progress_for
from verifier.report_text import render_text
from verifier.selection import BlockSelector, RangeRequest, parse_block_selector

EXIT_CANNOT_VERIFY = 2


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
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    parser.add_argument(
        "--jobs",
        "-j",
        type=positive_int,
        default=default_jobs(),
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
    parser.set_defaults(func=_verify)


def _selector(text: str) -> BlockSelector:
    try:
        return parse_block_selector(text)
    except ParseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _verify(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        options = VerifyOptions(
            recursive=args.recursive,
            integrity_only=args.integrity_only,
            block_range=RangeRequest(args.from_block, args.to_block),
            jobs=args.jobs,
            sample_rows=args.sample_rows,
            scratch_dir=workspace.root / RUN_DIR,
            cross_engine=args.cross_engine,
            audit_state="full" if args.full else "incremental",
        )
        try:
            report = await verify(
                workspace,
                args.datasets,
                options,
                progress_for(sys.stderr),
                engines=open_engines(workspace.layout.config_path),
            )
        except DatasetNotFoundError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_CANNOT_VERIFY
        sys.stdout.write(report.dumps() + "\n" if args.output == "json" else render_text(report))
        return report.exit_code

    return run_in_workspace(args, run)
