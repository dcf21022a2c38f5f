"""Workspaces the console tests look at: a three-level pipeline (a root with data, a derivative
of it, a derivative of that), built without Spark (transforms are declared, not run), and a wide
graph of many roots feeding one derivative."""

from __future__ import annotations

import asyncio

from protocol.codec.yaml import load_snapshot
from protocol.identity import DatasetId
from storage.workspace import Workspace
from tests.replication.datagen import create_root

ROOT = "cities"
MIDDLE = "cities.values"
TOP = "cities.top"

_DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
{inputs}
      transform:
        kind: Sql
        engine: spark
        query: {query}
    - kind: SetInfo
      description: {description}
      keywords: [console, test]
    - kind: SetLicense
      shortName: CC0
      spdxId: CC0-1.0
      name: Creative Commons Zero v1.0 Universal
      websiteUrl: https://creativecommons.org/publicdomain/zero/1.0/
    - kind: SetAttachments
      attachments:
        kind: Embedded
        items:
          - path: README.md
            content: "# {name}\\n\\nMade by the console tests."
"""


def derivative(name: str, inputs: list[str], query: str, description: str = "") -> str:
    listed = "\n".join(f"        - datasetRef: {alias}" for alias in inputs)
    return _DERIVATIVE.format(
        name=name, inputs=listed, query=query, description=description or f"The {name} dataset"
    )


async def three_levels(workspace: Workspace, *, slices: int = 3) -> dict[str, DatasetId]:
    writer = await create_root(workspace, ROOT, slices=slices, rows=10, seed=3)
    middle = await workspace.create_from_snapshot(
        load_snapshot(
            derivative(MIDDLE, [ROOT], "SELECT event_time, upper(value) AS value FROM cities"),
            MIDDLE,
        )
    )
    top = await workspace.create_from_snapshot(
        load_snapshot(
            derivative(TOP, [MIDDLE], "SELECT * FROM `cities.values` WHERE value > 'M'"), TOP
        )
    )
    assert middle.id is not None and top.id is not None
    return {ROOT: writer.dataset_id, MIDDLE: middle.id, TOP: top.id}


async def wide(workspace: Workspace, roots: int) -> str:
    """``roots`` empty root datasets ``in.000``… all read by one derivative ``wide.all``."""
    names = [f"in.{i:03d}" for i in range(roots)]
    for start in range(0, roots, 25):  # concurrently: creating one is mostly waiting on fsync
        await asyncio.gather(
            *(create_root(workspace, name, slices=0) for name in names[start : start + 25])
        )
    query = " UNION ALL ".join(f"SELECT * FROM `{name}`" for name in names[:3])
    await workspace.create_from_snapshot(
        load_snapshot(derivative("wide.all", names, query), "wide.all")
    )
    return "wide.all"
