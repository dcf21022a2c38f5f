"""``odfd reset DATASET HASH``: move a dataset's head back to an earlier block of its history.

The blocks after it stay in the block store (unreferenced; ``odfd system gc`` removes the data
files they named once they are old), so nothing is lost until then. The derivative datasets that
read this one are named in the question, since their history then refers to input blocks the
dataset no longer has.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.confirm import confirmer
from odfd.cli.workspace_args import add_root_argument, run_in_node
from protocol.errors import ParseError
from protocol.identity import Multihash

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reset", help="move a dataset's head back to an earlier block (asks first)"
    )
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument("hash", type=_multihash, metavar="HASH", help="the block to go back to")
    add_root_argument(parser)
    parser.set_defaults(func=_reset)


def _multihash(text: str) -> Multihash:
    try:
        return Multihash.from_multibase(text)
    except (ParseError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a block hash: {err}") from None


def _reset(args: argparse.Namespace) -> int:
    from odfd.app.history import reset_dataset

    async def run(node: Node) -> int:
        result = await reset_dataset(node, args.dataset, args.hash, confirmer(args))
        if result.dropped:
            terminal.info(
                f"Reset: {result.alias} to {args.hash} ({result.dropped} block(s) dropped)"
            )
        else:
            terminal.info(f"Skipped: {result.alias} is at {args.hash} already")
        return 0

    return run_in_node(args, run)
