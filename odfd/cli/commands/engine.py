"""``odfd engine status``: which engine each command would use on this workspace, and why."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node
    from verifier.engine.spark.choice import EngineChoice

#: Commands that run Spark, and what for (transforms naming DataFusion run in-process instead).
SPARK_COMMANDS = {
    "ingest": "reads, merges and writes the new data",
    "pull": "ingests polling sources and runs transforms of derivative datasets",
    "sql": "runs the query with --engine spark (the default, DataFusion, runs in-process)",
    "verify": "re-executes transforms (reproducibility); integrity checks need no engine",
    "daemon": "transforms and reproducibility audits",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "engine", help="which engine commands use (local JVM or Spark Connect) and why"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="the engine each command would use, and why")
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_root_argument(status)
    status.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        from odfd.app.forwarding import FORWARDED
        from odfd.cli import via_daemon
        from verifier.engine.spark.choice import choose_engine

        config = node.config
        choice = choose_engine(workspace.root, config.spark)
        daemon = _daemon_engine(config.spark.remote, config.daemon.spark_connect, choice)
        route = via_daemon.route(workspace.root)
        runs = {"runsIn": "daemon" if route.daemon else "this process", "runsWhy": route.reason}
        commands: dict[str, dict[str, str]] = {
            name: {"engine": choice.kind, "where": choice.where} for name in SPARK_COMMANDS
        }
        for name in FORWARDED:
            commands.setdefault(name, {"engine": choice.kind, "where": choice.where}).update(runs)
        commands["daemon"] = daemon
        if args.output == "json":
            print(json.dumps({"reason": choice.reason, "commands": commands}, indent=2))
            return 0
        for name, purpose in SPARK_COMMANDS.items():
            engine = commands[name]
            print(f"{name:<8} {_describe(engine['engine'], engine['where'])}  ({purpose})")
        print(f"why: {choice.reason}")
        where = "in the daemon" if route.daemon else "in their own process"
        print(f"{', '.join(sorted(FORWARDED))} run {where}: {route.reason}")
        print("list, log, status, tail, ... use no engine")
        return 0

    return run_in_node(args, run)


def _daemon_engine(remote: str | None, own_server: bool, choice: EngineChoice) -> dict[str, str]:
    if remote is not None:
        return {"engine": "connect", "where": choice.where}
    if own_server:
        return {"engine": "connect", "where": "a local server it runs itself (loopback)"}
    return {"engine": "local", "where": choice.settings.master}


def _describe(kind: str, where: str) -> str:
    return f"Spark Connect at {where}" if kind == "connect" else f"local JVM ({where})"
