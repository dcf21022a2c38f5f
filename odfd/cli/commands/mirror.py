"""``odfd mirror add|list|remove|pause|resume|sync``: the datasets this node keeps in sync with a
remote source. The catalog holds the mirror list, so these work whether or not the daemon runs;
a running daemon is told to reload it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from odfd.app.mirrors import (
    MirrorRequest,
    MirrorState,
    add_mirror,
    find_mirror,
    list_mirrors,
    release_mirror_pin,
    remove_mirror,
    set_paused,
)
from odfd.cli.arguments import positive_duration
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.config import format_duration
from odfd.daemon.admin_client import AdminClient

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mirror", help="keep datasets in sync with remote sources")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    add = actions.add_parser("add", help="mirror a remote dataset")
    add.add_argument(
        "source",
        metavar="SOURCE",
        help="URL of the dataset (http(s)://, odf+http(s)://, file://, ipfs://, ipns://, s3://, "
        "s3+http(s)://) or its bare did:odf:… (found over IPNS; the daemon keeps its record alive)",
    )
    add.add_argument(
        "--as", dest="alias", metavar="ALIAS", help="local name (default: the URL's last segment)"
    )
    add.add_argument(
        "--to",
        dest="targets",
        action="append",
        default=[],
        metavar="TARGET",
        help="also push the dataset there after each sync (repeatable)",
    )
    add.add_argument(
        "--every",
        type=positive_duration,
        metavar="DURATION",
        help="how often to sync, e.g. 30s, 5m, 1h (default: [sync] default_interval)",
    )
    add.add_argument(
        "--freeze-after",
        type=positive_duration,
        metavar="DURATION",
        help="report a freeze when the source's newest signed head is older than this "
        "(default: [sync] freeze_after; signed datasets only)",
    )
    add.set_defaults(func=_add)

    listing = actions.add_parser("list", help="list mirrors and how their last sync went")
    listing.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="default: table"
    )
    listing.set_defaults(func=_list)

    for name, help_text, func in (
        ("remove", "stop mirroring, release its IPFS pin (the dataset stays)", _remove),
        ("pause", "stop syncing until resumed", _pause),
        ("resume", "sync again", _resume),
        ("sync", "sync now (needs a running daemon)", _sync),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("name", metavar="NAME", help="the mirror's local dataset alias")
        action.set_defaults(func=func)
    for action in actions.choices.values():
        add_root_argument(action)


async def _notify(node: Node) -> bool:
    client = await AdminClient.connect(node.layout, node.config.daemon.admin_socket)
    if client is None:
        return False
    await client.request("POST", "/reload")
    return True


def _told(notified: bool) -> str:
    return "the daemon reloaded its mirrors" if notified else "takes effect when the daemon runs"


def _add(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        request = MirrorRequest(
            source=args.source,
            alias=args.alias,
            targets=tuple(args.targets),
            every=args.every,
            freeze_after=args.freeze_after,
        )
        record = await add_mirror(node, request)
        notified = await _notify(node)
        print(
            f"Mirroring {record.source} as {record.name} every {format_duration(record.interval)}"
            + (f", pushing to {', '.join(record.targets)}" if record.targets else "")
            + f" ({_told(notified)})",
            file=sys.stderr,
        )
        return 0

    return run_in_node(args, run)


def _list(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        mirrors = await list_mirrors(node)
        if args.output == "json":
            print(json.dumps([_json(m) for m in mirrors], indent=2))
            return 0
        print(
            f"{'NAME':<28} {'EVERY':<8} {'STATE':<10} {'LAST SYNC':<22} {'FAILS':>5}  SOURCE -> TARGETS"
        )
        for mirror in mirrors:
            m = mirror.record
            last = (
                "-"
                if m.last_attempt_at is None
                else m.last_attempt_at.isoformat(timespec="seconds")[:19]
            )
            targets = f" -> {', '.join(m.targets)}" if m.targets else ""
            print(
                f"{m.name:<28} {format_duration(m.interval):<8} {mirror.state:<10} {last:<22} "
                f"{m.consecutive_failures:>5}  {m.source}{targets}"
            )
            if m.pinned_cid:
                print(f"{'':<28} pinned: ipfs://{m.pinned_cid}")
            if m.last_error and not m.paused:
                print(f"{'':<28} error: {m.last_error}")
        return 0

    return run_in_node(args, run)


def _json(mirror: MirrorState) -> dict[str, object]:
    m = mirror.record
    return {
        "name": m.name,
        "source": m.source,
        "targets": list(m.targets),
        "every": format_duration(m.interval),
        "paused": m.paused,
        "managedBy": m.resource_id,
        "lastOutcome": mirror.last_outcome,
        "lastAttemptAt": None if m.last_attempt_at is None else m.last_attempt_at.isoformat(),
        "consecutiveFailures": m.consecutive_failures,
        "lastError": m.last_error,
        "pinnedCid": m.pinned_cid,
    }


def _remove(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        record, removed = await remove_mirror(node, args.name)
        notified = await _notify(node)
        extra = " and its Mirror resource" if record.resource_id else ""
        print(
            f"Removed mirror {record.name}{extra}; the dataset stays ({_told(notified)})",
            file=sys.stderr,
        )
        if removed.pinned_cid is not None:
            await _release_pin(node, removed.pinned_cid)
        return 0

    return run_in_node(args, run)


async def _release_pin(node: Node, cid: str) -> None:
    """A pin that cannot be released is reported with the command that releases it."""
    stays = await release_mirror_pin(node.config.ipfs, cid)
    if stays is not None:
        print(f"warning: {stays}", file=sys.stderr)
    else:
        print(f"Unpinned ipfs://{cid}", file=sys.stderr)


def _set_paused(args: argparse.Namespace, paused: bool) -> int:
    async def run(node: Node) -> int:
        record = await set_paused(node, args.name, paused)
        notified = await _notify(node)
        print(
            f"{'Paused' if paused else 'Resumed'} mirror {record.name} ({_told(notified)})",
            file=sys.stderr,
        )
        return 0

    return run_in_node(args, run)


def _pause(args: argparse.Namespace) -> int:
    return _set_paused(args, True)


def _resume(args: argparse.Namespace) -> int:
    return _set_paused(args, False)


def _sync(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        record = await find_mirror(node, args.name)
        client = await AdminClient.require(node.layout, node.config.daemon.admin_socket)
        await client.request("POST", f"/mirrors/{record.name}/sync")
        print(f"Sync of {record.name} queued (see `odfd mirror list`)", file=sys.stderr)
        return 0

    return run_in_node(args, run)
