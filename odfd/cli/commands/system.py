"""``odfd system gc|diagnose|info``: housekeeping and a look at the node's set-up."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from odfd.app.diagnose import run_checks
from odfd.app.progress_display import format_bytes
from odfd.app.system import collect_garbage, node_info
from odfd.cli import terminal
from odfd.cli.arguments import duration
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("system", help="housekeeping: gc, diagnose, info")
    actions = parser.add_subparsers(dest="system_command", metavar="ACTION", required=True)

    gc = actions.add_parser(
        "gc",
        help="remove leftovers of interrupted or losing work (scratch folders, unreferenced "
        "data files, unfinished writes)",
    )
    gc.add_argument(
        "--older-than",
        type=duration,
        default=3600.0,
        metavar="DURATION",
        help="only what has not changed for this long, so running work keeps its files "
        "(default: 1h)",
    )
    gc.add_argument("--dry-run", action="store_true", help="list what would be removed")
    add_output_format(gc)
    add_root_argument(gc)
    gc.set_defaults(func=_gc)

    diagnose = actions.add_parser(
        "diagnose", help="check Java, Spark, IPFS, disk, config and catalog; print fixes"
    )
    add_output_format(diagnose)
    add_root_argument(diagnose)
    diagnose.set_defaults(func=_diagnose)

    info = actions.add_parser("info", help="versions, workspace and configuration in use")
    add_output_format(info, ("table", "json", "yaml"))
    add_root_argument(info)
    info.set_defaults(func=_info)


def _gc(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        result = await collect_garbage(node, older_than=args.older_than, dry_run=args.dry_run)
        for action in result.recovered:
            terminal.info(f"Recovered: {action.describe()}")
        rows = [{"kind": f.kind, "path": str(f.path), "size": f.size} for f in result.leftovers]
        write_records(rows, args.output, [("Kind", "kind"), ("Size", "size"), ("Path", "path")])
        verb = "Would remove" if result.dry_run else "Removed"
        terminal.info(f"{verb} {len(result.leftovers)} leftover(s), {format_bytes(result.size)}")
        return 0

    return run_in_node(args, run, settle_orphans=False)  # gc settles them itself


def _diagnose(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        checks = await run_checks(node)
        rows = [
            {"check": c.name, "ok": c.ok, "required": c.required, "detail": c.detail, "fix": c.fix}
            for c in checks
        ]
        if args.output == "table":
            for row in rows:
                row["status"] = "ok" if row["ok"] else "PROBLEM" if row["required"] else "missing"
                if row["fix"]:
                    row["detail"] = f"{row['detail']} -> {row['fix']}"
        write_records(
            rows, args.output, [("Check", "check"), ("Status", "status"), ("Detail", "detail")]
        )
        return 0 if all(c.ok or not c.required for c in checks) else 1

    return run_in_node(args, run, settle_orphans=False)  # diagnose changes nothing


def _info(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        info = (await node_info(node)).to_json()
        if args.output == "table":
            width = max(map(len, info))
            sys.stdout.write("".join(f"{k:<{width}}  {v}\n" for k, v in info.items()))
        else:
            write_records([info], args.output, [])
        return 0

    return run_in_node(args, run)
