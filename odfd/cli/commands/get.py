"""``odfd get KIND [NAME] [-l key=value] [-o table|yaml|json]``: resources as applied, with their
status. KIND is a short type name (``secretset``, ``datasets``), a ``$schema`` URL, or ``all``;
NAME may be a pattern (``ca.%``, SQL ``LIKE``); ``-l`` keeps those whose labels match. Secrets are never shown, only whether each is set.

YAML and JSON show the RFC-018 canonical form (``$schema``, ``headers`` with identity, account,
generation and times, ``spec``, ``status``), YAML exactly as kamu-cli writes it; ``odfd apply``
accepts that output back."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from odfd.app.resources import (
    RECONCILE_ERROR,
    kind_of,
    resource_document,
    schema_of_kind,
)
from odfd.app.selectors import Selector, parse_label_arguments
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.errors import ManifestError
from protocol.codec.yaml_emitter import dump
from storage.catalog.resource_references import ReferenceRow, ResourceReferenceTable
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("get", help="show resources and their status")
    parser.add_argument(
        "kind",
        metavar="KIND",
        help="a type (dataset, mirror, secretset, ...), a $schema URL, or all",
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
    parser.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table")
    add_root_argument(parser)
    parser.set_defaults(func=_get)


def _get(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        every = args.kind.lower() == "all"
        pattern = args.name is not None and "%" in args.name
        if every and args.name is not None and not pattern:
            raise ManifestError("name a type to get one resource by name: odfd get TYPE NAME")
        schema = None if every else schema_of_kind(args.kind)
        labels = parse_label_arguments(args.selector)
        table = ResourceTable(workspace.catalog)
        if schema is not None and args.name is not None and not pattern:
            record = await table.find(schema, args.name)
            if record is None:
                raise ManifestError(
                    f"no {kind_of(schema)} resource named {args.name} (see `odfd get {args.kind}`)"
                )
            records = [record]
        else:
            selector = Selector(schema, args.name, labels)
            records = [r for r in await table.list(schema) if selector.matches(r)]
        references: dict[str, list[ReferenceRow]] = {}
        for row in await ResourceReferenceTable(workspace.catalog).list():
            references.setdefault(row.resource_id, []).append(row)
        documents = [resource_document(r, references.get(r.id, ())) for r in records]
        if args.output == "json":
            print(json.dumps(documents[0] if args.name and not pattern else documents, indent=2))
        elif args.output == "yaml":
            print("---\n".join(dump(document) for document in documents), end="")
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
