"""``odfd reset DATASET HASH``: move a dataset's head back to an earlier block of its history.

The blocks after it stay in the block store (unreferenced; ``odfd system gc`` removes the data
files they named once they are old), so nothing is lost until then. The derivative datasets that
read this one are named in the question, since their history then refers to input blocks the
dataset no longer has.
"""

from __future__ import annotations

import argparse

from odfd.cli import console
from odfd.cli.confirm import confirm
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from protocol.errors import ParseError
from protocol.identity import Multihash
from storage.errors import StorageError
from storage.workspace import Workspace


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
    async def run(workspace: Workspace) -> int:
        record = await workspace.resolve(args.dataset)
        dataset = workspace.open_dataset(record.id)
        head = await dataset.chain.head()
        if head is None:
            raise StorageError(f"dataset {record.alias} has no blocks")
        dropped = 0
        async for hash, _ in dataset.chain.iter_blocks(head):
            if hash == args.hash:
                break
            dropped += 1
        else:
            raise StorageError(
                f"block {args.hash} is not in the history of {record.alias} "
                f"(`odfd log {record.alias}` lists it); nothing was changed"
            )
        if dropped == 0:
            console.info(f"Skipped: {record.alias} is at {args.hash} already")
            return 0
        readers = [
            reader.alias
            for reader in (await workspace.graph()).readers_of(record.id)
            if reader.id != record.id
        ]
        warning = f" ({', '.join(readers)} read it)" if readers else ""
        confirm(
            args,
            f"Reset {record.alias} to {args.hash}, dropping its last {dropped} block(s){warning}?",
        )
        await dataset.chain.reset_to(args.hash, expected_head=head)
        console.info(f"Reset: {record.alias} to {args.hash} ({dropped} block(s) dropped)")
        return 0

    return run_in_workspace(args, run)
