"""Entry point of the ``odfd`` command: builds the parser from the command modules and runs one."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from odfd.cli import console, global_options
from odfd.cli.failures import describe_os_error
from odfd.config import unknown_environment
from protocol.errors import OdfError

# Each name is a module under ``odfd.cli.commands`` exposing ``register(subparsers)``.
# A command's handler is stored as ``func`` on its parser and returns the exit code.
COMMAND_MODULES: tuple[str, ...] = (
    "block",
    "data",
    "init",
    "add",
    "list",
    "log",
    "delete",
    "rename",
    "import_",
    "repair",
    "pull",
    "ingest",
    "tail",
    "sql",
    "serve",
    "push",
    "verify",
    "daemon",
    "mirror",
    "apply",
    "get",
    "status",
    "system",
    "config",
    "completions",
    "repo",
    "reset",
    "new",
    "search",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odfd",
        description="Open Data Fabric node: publish, mirror, replicate and audit datasets.",
    )
    parser.add_argument("--version", action="version", version=f"odfd {_version()}")
    global_options.add_to(parser, top_level=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"odfd.cli.commands.{name}")
        module.register(subparsers)
    global_options.add_to_subcommands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console.configure(quiet=args.quiet, verbose=args.verbose, no_color=args.no_color)
    for name, guess in unknown_environment():
        console.warn(
            f"ignoring unknown environment variable {name}"
            + (f" (did you mean {guess}?)" if guess else "")
        )
    try:
        return int(args.func(args) or 0)
    except OdfError as err:
        console.error(str(err))
        return getattr(err, "exit_code", 1)
    except OSError as err:
        if isinstance(err, BrokenPipeError):
            return 141
        if console.is_verbose():
            traceback.print_exc()
        console.error(describe_os_error(err))
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _version() -> str:
    try:
        return metadata.version("odfd")
    except metadata.PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
