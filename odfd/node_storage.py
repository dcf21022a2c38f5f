"""Opening a node's workspace with the dataset storage its ``[storage]`` configuration names.

``[storage] url`` empty: the datasets are folders in the workspace's ``datasets/``; an S3 URL
(``s3://``, ``s3+http://``, ``s3+https://``): they are in that bucket below that prefix, with a
local read-through cache of data slices and checkpoints in ``<workspace>/cache/objects``. The
bucket is checked once when the node opens the workspace, so a wrong credential or a missing
bucket is one line at start, not a failure half-way through a command.
"""

from __future__ import annotations

from pathlib import Path

from odfd.config import NodeConfig, load_config
from storage.dataset_storage import DatasetStorage
from storage.layout import WorkspaceLayout
from storage.local_storage import LocalDatasetStorage
from storage.workspace import Workspace

CACHE_FOLDER = ("cache", "objects")


def storage_of(config: NodeConfig, layout: WorkspaceLayout) -> DatasetStorage:
    """The dataset storage ``config`` names for the workspace at ``layout``."""
    if not config.storage.url:
        return LocalDatasetStorage(layout.datasets_dir)
    # Only nodes on a bucket import the S3 client (obstore costs ~0.1 s to import).
    from storage.object_cache import ObjectCache
    from storage.s3_client import S3Bucket
    from storage.s3_settings import parse_s3_url
    from storage.s3_storage import S3DatasetStorage

    location = parse_s3_url(config.storage.url)  # checked when the configuration was read
    cache = ObjectCache(
        layout.root.joinpath(*CACHE_FOLDER), max_bytes=config.storage.cache_mb << 20
    )
    return S3DatasetStorage(S3Bucket(location, config.s3.settings()), location, cache)


def _node_storage(layout: WorkspaceLayout) -> DatasetStorage:
    return storage_of(load_config(layout.config_path), layout)


async def open_workspace(root: Path | None, *, check: bool = True) -> Workspace:
    """The workspace at ``root`` (see ``Workspace.open``) on the storage its configuration
    names, checked usable (``StorageError`` naming ``[storage] url`` otherwise) unless not
    ``check`` (``odfd config`` must be able to fix a wrong bucket)."""
    workspace = await Workspace.open(root, storage=_node_storage)
    if not check:
        return workspace
    try:
        await workspace.storage.check()
    except BaseException:
        await workspace.close()
        raise
    return workspace
