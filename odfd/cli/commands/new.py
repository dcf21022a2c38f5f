"""``odfd new NAME --root|--derivative``: write a DatasetSnapshot manifest to start from, with
every field explained; ``odfd add NAME.yaml`` takes it as it is (a derivative once its input
exists)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odfd.cli import terminal
from odfd.errors import OdfdError
from protocol.identity import DatasetAlias

_ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    # Data arrives through `odfd ingest {name} FILE` (a push source); a SetPollingSource
    # event would instead fetch it on `odfd pull` (see the ODF spec, "Metadata Reference").
    - kind: AddPushSource
      sourceName: default
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: city
              type: string
            - name: population
              type: int64
      merge:
        # Append keeps every record; Ledger and Snapshot deduplicate by primaryKey.
        kind: Append
    - kind: SetVocab
      eventTimeColumn: event_time
    - kind: SetInfo
      description: What this dataset holds and where it comes from.
      keywords:
        - example
"""

_DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    # Runs on `odfd pull {name}` over what its inputs gained since the last run.
    - kind: SetTransform
      inputs:
        # The dataset to read; the query names it by `alias`.
        - datasetRef: my.input.dataset
          alias: input
      transform:
        kind: Sql
        engine: spark
        query: |
          SELECT event_time, city, population
          FROM input
    - kind: SetInfo
      description: What this dataset derives, from what.
"""


class NewError(OdfdError):
    """The manifest cannot be written."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("new", help="write a manifest template for a new dataset")
    parser.add_argument("name", metavar="NAME", help="the dataset's name")
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--root", dest="is_root", action="store_true", help="data comes from outside")
    kind.add_argument("--derivative", action="store_true", help="data is derived by a query")
    parser.add_argument(
        "--output-path",
        type=Path,
        metavar="FILE",
        help="where to write (default NAME.yaml; - prints)",
    )
    parser.set_defaults(func=_new)


def _new(args: argparse.Namespace) -> int:
    name = str(DatasetAlias.parse(args.name))
    text = (_ROOT if args.is_root else _DERIVATIVE).format(name=name)
    if args.output_path is not None and str(args.output_path) == "-":
        sys.stdout.write(text)
        return 0
    path = args.output_path or Path(f"{name.replace('/', '_')}.yaml")
    try:
        with open(path, "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise NewError(f"{path} exists already; pick another --output-path") from None
    terminal.info(f"Written: {path} (add it with `odfd add {path}`)")
    return 0
