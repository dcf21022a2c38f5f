"""``odfd get KIND [NAME] [-l key=value] [-o table|yaml|json]``: resources as applied, with their
status. KIND is a short type name (``secretset``, ``datasets``), a ``$schema`` URL, or ``all``;
``flowruns [FLOW]`` and ``webhookdeliveries [TARGET]`` list what flows and webhook targets did;
NAME may be a pattern (``ca.%``, SQL ``LIKE``); ``-l`` keeps those whose labels match. Secrets are never shown, only whether each is set.

YAML and JSON show the RFC-018 canonical form (``$schema``, ``headers`` with identity, account,
generation and times, ``spec``, ``status``), YAML exactly as kamu-cli writes it; ``odfd apply``
accepts that output back."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odfd.app.flow_history import (
    DEFAULT_LIMIT,
    HistoryQuery,
    delivery_document,
    flow_runs,
    run_document,
    webhook_deliveries,
)
from odfd.app.resource_service import find_resource, list_resources, resource_documents
from odfd.app.resources import RECONCILE_ERROR, kind_of, schema_of_kind
from odfd.app.selectors import Selector, parse_label_arguments
from odfd.app.yaml_documents import yaml_document
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.errors import ManifestError
from storage.catalog.resources import ResourceNotFoundError, ResourceRecord

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("get", help="show resources and their status")
    parser.add_argument(
        "kind",
        metavar="KIND",
        help="a type (dataset, mirror, secretset, ...), a $schema URL, all, "
        "or flowruns / webhookdeliveries (what flows and webhook targets did)",
    )
    parser.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="a name, or a pattern with %% (SQL LIKE: %% any run of characters, _ one)",
    )
    parser.add_argument(
        "-l",
        "--selector",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only resources with these labels (repeatable, or comma-separated)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "yaml", "json"),
        default="table",
        help="default: table; yaml and json print the manifests with their status",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"flowruns, webhookdeliveries: the newest N (default {DEFAULT_LIMIT})",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_get)


def _get(args: argparse.Namespace) -> int:
    history = _HISTORIES.get(args.kind.lower())
    if history is not None:
        return _history(args, history)

    async def run(node: Node) -> int:
        workspace = node.workspace
        every = args.kind.lower() == "all"
        pattern = args.name is not None and "%" in args.name
        if every and args.name is not None and not pattern:
            raise ManifestError("name a type to get one resource by name: odfd get TYPE NAME")
        schema = None if every else schema_of_kind(args.kind)
        labels = parse_label_arguments(args.selector)
        if schema is not None and args.name is not None and not pattern:
            try:
                records = [await find_resource(workspace, schema, args.name)]
            except ResourceNotFoundError:
                raise ManifestError(
                    f"no {kind_of(schema)} resource named {args.name} (see `odfd get {args.kind}`)"
                ) from None
        else:
            records = await list_resources(workspace, Selector(schema, args.name, labels))
        documents = await resource_documents(workspace, records)
        if args.output == "json":
            print(json.dumps(documents[0] if args.name and not pattern else documents, indent=2))
        elif args.output == "yaml":
            print("---\n".join(yaml_document(document) for document in documents), end="")
        else:
            _table(records)
        return 0

    return run_in_node(args, run)


def _table(records: list[ResourceRecord]) -> None:
    print(f"{'KIND':<16} {'NAME':<28} {'PHASE':<12} {'GEN':>4} {'OBSERVED':>8}  CONDITIONS")
    for record in records:
        status = record.status
        conditions = status.get("conditions") or {}
        summary = ", ".join(
            f"{key.rsplit('/', 1)[-1]}={value.get('status', value.get('code', '?'))}"
            for key, value in sorted(conditions.items())
        )
        error = conditions.get(RECONCILE_ERROR)
        if error:
            summary += f" ({error.get('message')})"
        observed = status.get("observedGeneration")
        print(
            f"{kind_of(record.schema):<16} {record.name:<28} {status.get('phase', '?'):<12} {record.generation:>4} "
            f"{'-' if observed is None else observed:>8}  {summary}"
        )


@dataclass(frozen=True, slots=True)
class _History:
    """What a flow or webhook target did, newest first (``odfd get flowruns [FLOW]``)."""

    read: Callable[[Workspace, HistoryQuery], Awaitable[list[Any]]]
    document: Callable[[Any], dict[str, Any]]
    columns: tuple[tuple[str, str, int], ...]
    """Table columns: heading, document field, width."""


_RUNS = _History(
    flow_runs,
    run_document,
    (
        ("RUN", "runId", 6),
        ("FLOW", "flowName", 24),
        ("TRIGGER", "trigger", 9),
        ("STATE", "state", 10),
        ("STARTED", "startedAt", 32),
        ("FINISHED", "finishedAt", 32),
        ("ERROR", "error", 0),
    ),
)
_DELIVERIES = _History(
    webhook_deliveries,
    delivery_document,
    (
        ("MESSAGE", "messageId", 36),
        ("TARGET", "targetName", 24),
        ("EVENT", "eventType", 20),
        ("STATE", "state", 10),
        ("TRIES", "attempts", 5),
        ("HTTP", "lastStatus", 4),
        ("CREATED", "createdAt", 32),
        ("ERROR", "error", 0),
    ),
)
_HISTORIES = {
    "flowrun": _RUNS,
    "flowruns": _RUNS,
    "webhookdelivery": _DELIVERIES,
    "webhookdeliveries": _DELIVERIES,
}


def _history(args: argparse.Namespace, history: _History) -> int:
    async def run(node: Node) -> int:
        query = HistoryQuery(args.name, args.limit)
        try:
            rows = await history.read(node.workspace, query)
        except ResourceNotFoundError as err:
            raise ManifestError(str(err)) from None
        documents = [history.document(row) for row in rows]
        if args.output == "json":
            print(json.dumps(documents, indent=2))
        elif args.output == "yaml":
            print("---\n".join(yaml_document(document) for document in documents), end="")
        else:
            print(" ".join(f"{h:<{w}}" for h, _, w in history.columns).rstrip())
            for document in documents:
                cells = (
                    "-" if document[f] is None else str(document[f]) for _, f, _ in history.columns
                )
                print(
                    " ".join(
                        f"{c:<{w}}" for c, (_, _, w) in zip(cells, history.columns, strict=True)
                    ).rstrip()
                )
        return 0

    return run_in_node(args, run)
