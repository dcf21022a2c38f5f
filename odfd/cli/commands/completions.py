"""``odfd completions bash|zsh|fish``: print a shell completion script."""

from __future__ import annotations

import argparse
import sys

from odfd.cli.completions import SHELLS, script


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "completions",
        help='print a shell completion script (bash: eval "$(odfd completions bash)")',
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to print the script for")
    parser.set_defaults(func=_completions)


def _completions(args: argparse.Namespace) -> int:
    from odfd.cli.main import build_parser

    sys.stdout.write(script(build_parser(), args.shell))
    return 0
