"""``odfd config list|get|set``: the workspace's settings, with the keys of ``config.toml``."""

from __future__ import annotations

import argparse
import json
import sys

from odfd import config_edit
from odfd.cli import console
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("config", help="show and change settings (config.toml)")
    actions = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="settings set in config.toml or the environment")
    listing.add_argument(
        "--with-defaults", action="store_true", help="also every setting left at its default"
    )
    add_output_format(listing)
    add_root_argument(listing)
    listing.set_defaults(func=_list)

    get = actions.add_parser("get", help="print one setting's value in effect")
    get.add_argument("key", metavar="KEY", help="section.key, e.g. server.port")
    add_output_format(get, ("table", "json", "yaml"))
    add_root_argument(get)
    get.set_defaults(func=_get)

    set_ = actions.add_parser("set", help="change a setting in config.toml (no VALUE: remove it)")
    set_.add_argument("key", metavar="KEY", help="section.key, e.g. server.port")
    set_.add_argument(
        "value",
        nargs="?",
        metavar="VALUE",
        help='as in an ODFD_* variable (lists: a,b or ["a", "b"])',
    )
    add_root_argument(set_)
    set_.set_defaults(func=_set)


def _list(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        rows = config_edit.effective(workspace.layout.config_path)
        if not args.with_defaults:
            rows = [row for row in rows if row["source"] != "default"]
        if args.output == "table":
            for row in rows:
                row["shown"] = _text(row["value"])
        write_records(rows, args.output, [("Key", "key"), ("Value", "shown"), ("Source", "source")])
        return 0

    return run_in_workspace(args, run, check_storage=False)


def _get(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        value = config_edit.get(workspace.layout.config_path, args.key)
        if args.output == "json":
            print(json.dumps(value))
        elif args.output == "yaml":
            write_records([{args.key: value}], "yaml", [])
        else:
            sys.stdout.write(_text(value) + "\n")
        return 0

    return run_in_workspace(args, run, check_storage=False)


def _set(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        config_edit.set_value(workspace.layout.config_path, args.key, args.value)
        if args.value is None:
            console.info(f"Removed: {args.key} (its default applies)")
        else:
            value = config_edit.get(workspace.layout.config_path, args.key)
            console.info(f"Set: {args.key} = {_text(value)}")
        return 0

    return run_in_workspace(args, run, check_storage=False)


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value)  # a list reads as one, never as a string: ["a"], not a
    return str(value)
