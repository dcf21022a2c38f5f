"""``--quiet``, ``--verbose``, ``--no-color``, ``--yes`` and ``--no-daemon``: accepted before the command (``odfd -q pull``)
and after it (``odfd pull -q``), with the same meaning everywhere (see ``odfd.cli.terminal``)."""

from __future__ import annotations

import argparse
from collections.abc import Collection


def add_to(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """Adds the options; below the top level they default to "not given" so that a flag given
    before the command is not reset by the command's own parser."""
    default: object = False if top_level else argparse.SUPPRESS
    group = parser.add_argument_group("output")
    group.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="print results and errors only"
    )
    group.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="print more detail"
    )
    group.add_argument(
        "--no-color", action="store_true", default=default, help="never colour the output"
    )
    group.add_argument(
        "-y",
        "--yes",
        action="store_true",
        default=default,
        help="do not ask for confirmation (delete, reset, compact, add --replace)",
    )
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        default=default,
        help="run an engine command (ingest, pull, verify, sql, provenance) in this process, "
        "not in the workspace's running daemon (also: ODFD_NO_DAEMON=1)",
    )


def add_to_subcommands(
    subparsers: argparse._SubParsersAction, *, skip: Collection[str] = ()
) -> None:
    """Adds the options to every command of ``subparsers`` but those named in ``skip`` (the
    stand-ins that only name a command in ``odfd --help``: they never parse)."""
    for name, parser in subparsers.choices.items():
        if name in skip:
            continue
        add_to(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                add_to_subcommands(action)
