"""Entry point of the ``odfd`` command: builds the parser from the command modules and runs one."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odfd",
        description="Open Data Fabric node: publish, mirror, replicate and audit datasets.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"odfd.cli.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except OdfError as err:
        print(f"error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
