"""``odfd log``: a dataset's blocks, newest first — one summary line each by default, the full
blocks as YAML manifests (like the reference) with ``-o yaml``, or as JSON / NDJSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from odfd.app.dataset_log import blocks, blocks_in_folder, writes
from odfd.cli.arguments import positive_int
from odfd.cli.output import add_output_format
from odfd.cli.workspace_args import add_root_argument, read_in_node, run_in_node
from protocol.identity import Multihash
from protocol.model import (
    KIND_NAMES,
    METADATA_EVENT_TYPES,
    AddData,
    ExecuteTransform,
    MetadataBlock,
    Seed,
    SetDataSchema,
    SetInfo,
    SetLicense,
    kind_name,
)

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.app.write_log import BlockWriters
    from storage.catalog.write_log import WriteRecord

_GROUPS = {
    "data": {"AddData", "ExecuteTransform"},
    "watermark": {"AddData", "ExecuteTransform"},
    "source": {"Seed", "SetPollingSource", "AddPushSource", "SetTransform", "SetVocab"},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("log", help="show a dataset's metadata blocks, newest first")
    parser.add_argument("dataset", help="dataset alias or id")
    add_output_format(parser, ("table", "yaml", "json", "ndjson"))
    parser.add_argument(
        "-f",
        "--filter",
        type=_kinds,
        metavar="KINDS",
        help="comma-separated event kinds (e.g. AddData,SetInfo) or groups "
        "(data, watermark, source)",
    )
    parser.add_argument(
        "--limit", type=positive_int, default=None, help="show at most this many blocks"
    )
    parser.add_argument(
        "--who",
        action="store_true",
        help="with each block, the account whose write brought it (push, ingest, pull, ...) "
        "and how (cli:OS-USER, http, daemon), from the node's audit trail",
    )
    parser.add_argument(
        "--writes",
        action="store_true",
        help="instead of blocks, the audit trail of writes to the dataset (also reset, "
        "delete; a deleted dataset's by its name), oldest first",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_log)


def _kinds(spec: str) -> set[str]:
    """The event kinds (lower case) a ``--filter`` names; an unknown name is an argument error
    rather than a filter that silently matches nothing."""
    known = {kind_name_of(t).lower(): kind_name_of(t) for t in METADATA_EVENT_TYPES}
    kinds: set[str] = set()
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("names no event kind")
    for part in parts:
        if part.lower() in _GROUPS:
            kinds |= {k.lower() for k in _GROUPS[part.lower()]}
        elif part.lower() in known:
            kinds.add(part.lower())
        else:
            raise argparse.ArgumentTypeError(
                f"unknown event kind {part!r}; known: {', '.join(sorted(known.values()))} "
                f"and the groups {', '.join(sorted(_GROUPS))}"
            )
    return kinds


def kind_name_of(event_type: type) -> str:
    return KIND_NAMES[event_type]


def _log(args: argparse.Namespace) -> int:
    if args.writes:
        return run_in_node(args, lambda node: _writes(node, args))
    if args.who:
        return run_in_node(args, lambda node: _blocks(node, args))
    found = read_in_node(args, lambda catalog, node: blocks_in_folder(catalog, node, args.dataset))
    if found is not None:  # the dataset's folder on this machine, read without an event loop
        printer = _Printer(args)
        for hash, block in found:
            if not printer.show(hash, block):
                break
        printer.finish()
        return 0

    return run_in_node(args, lambda node: _blocks(node, args))


async def _blocks(node: Node, args: argparse.Namespace) -> int:
    walk, writers = await blocks(node, args.dataset, with_writers=args.who)
    printer = _Printer(args)
    printer.writers = writers
    async for hash, block in walk:
        if not printer.show(hash, block):
            break
    printer.finish()
    return 0


async def _writes(node: Node, args: argparse.Namespace) -> int:
    """The trail of one dataset (by id, or by alias when it is gone), oldest first."""
    trail = await writes(node, args.dataset)
    entries = [_write_entry(w) for w in trail]
    if args.output in ("json", "yaml"):
        print(json.dumps(entries, indent=2))
    elif args.output == "ndjson":
        for entry in entries:
            print(json.dumps(entry))
    else:
        for w in trail:
            heads = f"{_short(w.old_head)} -> {_short(w.new_head)}"
            print(
                f"{w.at.isoformat(timespec='seconds')}  {w.action:<8} {w.account:<12} {w.via:<16} {heads}"
            )
    return 0


def _short(head: str | None) -> str:
    return "-" if head is None else head[-8:]


def _write_entry(write: WriteRecord) -> dict[str, Any]:
    return {
        "at": write.at.isoformat(),
        "action": write.action,
        "account": write.account,
        "via": write.via,
        "target": write.target,
        "datasetId": write.dataset_id,
        "oldHead": write.old_head,
        "newHead": write.new_head,
    }


class _Printer:
    """Writes the blocks a ``log`` walk meets, newest first, as ``--output``, ``--filter`` and
    ``--limit`` say."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.output: str = args.output
        self.kinds: set[str] | None = args.filter
        self.limit: int | None = args.limit
        self.shown = 0
        self.entries: list[dict[str, Any]] = []
        self.writers: BlockWriters | None = None
        """With ``--who``: which write brought each block."""

    def show(self, hash: Multihash, block: MetadataBlock) -> bool:
        """Writes ``block`` if the filter keeps it; ``False`` once the limit is reached."""
        # Every block walked past, shown or not, moves the attribution along.
        write = None if self.writers is None else self.writers.writer(str(hash))
        if self.limit is not None and self.shown >= self.limit:
            return False
        if self.kinds is not None and kind_name(block.event).lower() not in self.kinds:
            return True
        self.shown += 1
        if self.output == "yaml":
            sys.stdout.write(_yaml(hash, block, None if self.writers is None else _who(write)))
        elif self.output == "table":
            who = "" if self.writers is None else f"  [{_who(write)}]"
            sys.stdout.write(summary_line(hash, block) + who + "\n")
        else:
            from odfd.app.block_text import block_json  # the summary lines need no codec

            entry = {"hash": str(hash), "block": json.loads(block_json(block))}
            if self.writers is not None:
                entry["writtenBy"] = None if write is None else _write_entry(write)
            if self.output == "ndjson":
                sys.stdout.write(json.dumps(entry, ensure_ascii=False) + "\n")
            else:
                self.entries.append(entry)
        return True

    def finish(self) -> None:
        if self.output == "json":
            print(json.dumps(self.entries, indent=2, ensure_ascii=False))


def _who(write: WriteRecord | None) -> str:
    if write is None:
        return "unknown: before the audit trail"
    return f"{write.account} by {write.action} via {write.via}, {write.at.isoformat(timespec='seconds')}"


def summary_line(hash: Multihash, block: MetadataBlock) -> str:
    """``#N  TIME  Kind  …hash  what changed``."""
    event = block.event
    time = block.system_time.to_rfc3339()
    return f"#{block.sequence_number:<4} {time}  {kind_name(event):<18} {str(hash)[-8:]}  {_what(event)}".rstrip()


def _what(event: object) -> str:
    if isinstance(event, (AddData, ExecuteTransform)):
        parts = []
        if event.new_data is not None:
            interval = event.new_data.offset_interval
            parts.append(f"records {interval.start}..{interval.end}")
        if event.new_watermark is not None:
            parts.append(f"watermark {event.new_watermark.to_rfc3339()}")
        if event.new_checkpoint is not None:
            parts.append("checkpoint")
        return ", ".join(parts) or "no new data"
    if isinstance(event, Seed):
        return f"{event.dataset_kind.value} dataset {event.dataset_id}"
    if isinstance(event, SetInfo):
        return (event.description or "").splitlines()[0] if event.description else ""
    if isinstance(event, SetDataSchema):
        return "schema set"
    if isinstance(event, SetLicense):
        return event.name
    return ""


def _yaml(hash: object, block: MetadataBlock, who: str | None = None) -> str:
    from odfd.app.block_text import block_yaml  # the summary lines need no codec

    written = "" if who is None else f"# Written by: {who}\n"
    return f"---\n# Block: {hash}\n{written}{block_yaml(block)}\n"
