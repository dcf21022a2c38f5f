"""``odfd engine status``: which engine each command would use on this workspace, and why."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from odfd.app.engine_status import SPARK_COMMANDS, engine_status
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "engine", help="which engine commands use (local JVM or Spark Connect) and why"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="the engine each command would use, and why")
    status.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="default: text"
    )
    add_root_argument(status)
    status.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.forwarding import FORWARDED
        from odfd.cli import via_daemon

        status = engine_status(node)
        route = via_daemon.route(node.root)
        runs = {"runsIn": "daemon" if route.daemon else "this process", "runsWhy": route.reason}
        commands: dict[str, dict[str, str]] = {
            name: {"engine": use.kind, "where": use.where} for name, use in status.commands.items()
        }
        for name in FORWARDED:
            default = {"engine": status.engine.kind, "where": status.engine.where}
            commands.setdefault(name, default).update(runs)
        if args.output == "json":
            print(json.dumps({"reason": status.reason, "commands": commands}, indent=2))
            return 0
        for name, purpose in SPARK_COMMANDS.items():
            print(f"{name:<8} {status.commands[name].describe()}  ({purpose})")
        print(f"why: {status.reason}")
        where = "in the daemon" if route.daemon else "in their own process"
        print(f"{', '.join(sorted(FORWARDED))} run {where}: {route.reason}")
        print("list, log, status, tail, ... use no engine")
        return 0

    return run_in_node(args, run)
