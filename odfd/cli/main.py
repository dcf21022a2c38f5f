"""Entry point of the ``odfd`` command: builds the parser from the command modules and runs one."""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
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


def quiet_dependency_warnings() -> None:
    """Process-wide warning policy of the `odfd` program (a library import never sets one).

    ipfshttpclient passes urllib3 2.x a `strict` argument it no longer needs, and urllib3 warns
    about it on every connection; the warning says nothing to an odfd user.
    """
    warnings.filterwarnings(
        "ignore",
        message="The 'strict' parameter is no longer needed",
        category=FutureWarning,
        module="urllib3.poolmanager",
    )


def run() -> int:
    """The `odfd` program: its warning policy, then the command."""
    quiet_dependency_warnings()
    return main()


if __name__ == "__main__":
    sys.exit(run())
