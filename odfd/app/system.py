"""``odfd system gc`` and ``odfd system info``: housekeeping of what interrupted or losing work
left behind, and what the node is made of (versions, workspace, configuration in use)."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from odfd.coordinator import leftovers
from storage.orphans import recover_orphans

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.coordinator.leftovers import Leftover
    from storage.orphans import OrphanAction


@dataclass(frozen=True, slots=True)
class GcResult:
    leftovers: list[Leftover]
    """What was removed (or, in a dry run, would be)."""
    recovered: list[OrphanAction]
    """Dataset folders the catalog did not know, settled (none in a dry run)."""
    dry_run: bool

    @property
    def size(self) -> int:
        return sum(found.size for found in self.leftovers)


async def collect_garbage(node: Node, *, older_than: float, dry_run: bool) -> GcResult:
    """Removes scratch folders, unreferenced data files and unfinished writes that have not
    changed for ``older_than`` seconds (so running work keeps its files), then settles orphan
    dataset folders; with ``dry_run``, only finds them."""
    workspace = node.workspace
    found = (
        await leftovers.run_scratch(workspace, older_than)
        + await leftovers.unreferenced_objects(workspace, older_than)
        + await leftovers.staging_files(workspace, older_than)
        + await leftovers.staging_folders(workspace)
    )
    recovered: list[OrphanAction] = []
    if not dry_run:
        await leftovers.remove(found)
        recovered = await recover_orphans(workspace, min_age=older_than)
    return GcResult(found, recovered, dry_run)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    odfd: str
    python: str
    pyspark: str
    pyarrow: str
    platform: str
    workspace: str
    config: str
    datasets: int
    spark_master: str
    ipfs_api: str

    def to_json(self) -> dict[str, str | int]:
        """The fields in order, by name."""
        return {name: getattr(self, name) for name in self.__slots__}


async def node_info(node: Node) -> NodeInfo:
    """Versions (``not installed`` for a missing package), the workspace and its configuration."""
    workspace = node.workspace
    return NodeInfo(
        odfd=_version("odfd"),
        python=platform.python_version(),
        pyspark=_version("pyspark"),
        pyarrow=_version("pyarrow"),
        platform=platform.platform(),
        workspace=str(workspace.root),
        config=str(workspace.layout.config_path),
        datasets=len(await workspace.list_datasets()),
        spark_master=node.config.spark.master,
        ipfs_api=node.config.ipfs.api,
    )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
