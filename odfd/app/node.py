"""The composition root: one :class:`Node` per process, built from the workspace's configuration.

A node is the workspace (catalog, keys, dataset storage: the ``datasets/`` folder or the bucket
``[storage] url`` names), its parsed configuration, the settings of its transports (HTTP limits,
IPFS, S3, tokens) and its engines (``verifier.engine.registry.Engines``, built once when first
needed). ``config.toml`` is read here
and nowhere else: everything below the CLI receives what it needs from the node. The daemon's
reload asks :meth:`Node.reconfigured` for a new node over the same workspace and swaps it in.

A bucket is checked once when the node opens, so a wrong credential or a missing bucket is one
line at start, not a failure half-way through a command. Importing this module is cheap (the
thin client of a daemon reads the admin socket's place through it, and a command that only reads
the catalog builds a :class:`NodeView` without the transports' modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.config import NodeConfig, load_config

if TYPE_CHECKING:
    from odfd.sync.transport.settings import TransportSettings
    from storage.dataset_storage import DatasetStorage
    from storage.keys import KeyStore
    from storage.layout import WorkspaceLayout
    from storage.workspace import Workspace
    from verifier.engine.registry import Engines

CACHE_FOLDER = ("cache", "objects")


def read_config(path: Path, env: Mapping[str, str] | None = None) -> NodeConfig:
    """The configuration in ``path`` with ``env`` (default: the process's) overriding it: the one
    place ``config.toml`` is parsed (``odfd config`` validates an edited file through it too)."""
    return load_config(path, env)


@dataclass(frozen=True, slots=True)
class NodeView:
    """What a command that only reads the catalog needs (no event loop, no engine)."""

    layout: WorkspaceLayout
    config: NodeConfig


class Node:
    """One node: its workspace, configuration, transports and engines. Use cases take it as
    their first argument; ``async with`` closes the workspace."""

    def __init__(
        self,
        workspace: Workspace,
        config: NodeConfig,
        *,
        engines: Engines | None = None,
    ) -> None:
        from odfd.app.login_store import tokens_by_url
        from odfd.sync.transport.settings import TransportSettings

        self.workspace = workspace
        self.config = config
        self._engines = engines
        self.transport: TransportSettings = TransportSettings.from_config(
            config, tokens_by_url(workspace.root)
        )
        """How the node reaches remotes (HTTP limits, IPFS, S3, tokens of ``[sync.tokens]`` and
        of ``odfd login``), built once here; the use cases hand it to ``odfd.sync``."""

    @property
    def engines(self) -> Engines:
        """The node's engines (``verifier.engine.registry``), built from ``[spark]`` once, when a
        use case first asks: a command that only reads the catalog never loads them."""
        if self._engines is None:
            from verifier.engine.registry import Engines

            self._engines = Engines(self.config.spark, workspace_root=self.workspace.root)
        return self._engines

    @property
    def root(self) -> Path:
        return self.workspace.root

    @property
    def layout(self) -> WorkspaceLayout:
        return self.workspace.layout

    @property
    def keys(self) -> KeyStore:
        """The node's identity keys (one ed25519 key per dataset it owns)."""
        return self.workspace.keys

    def reconfigured(self) -> Node:
        """A node over the same workspace and engines with ``config.toml`` read again (raises
        ``ConfigError`` when it is invalid: the caller keeps this one)."""
        return Node(self.workspace, read_config(self.layout.config_path), engines=self._engines)

    async def close(self) -> None:
        await self.workspace.close()

    async def __aenter__(self) -> Node:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def storage_of(config: NodeConfig, layout: WorkspaceLayout) -> DatasetStorage:
    """The dataset storage ``config`` names for the workspace at ``layout``."""
    if not config.storage.url:
        from storage.local_storage import LocalDatasetStorage

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


async def open_node(root: Path | None, *, check_storage: bool = True) -> Node:
    """The node of the workspace at ``root`` (see ``Workspace.open``) on the storage its
    configuration names, checked usable (``StorageError`` naming ``[storage] url`` otherwise)
    unless not ``check_storage`` (``odfd config`` must be able to fix a wrong bucket), with the
    ``PersistentVolume``s its datasets may be placed on (``odfd.volumes``)."""
    from odfd.volumes.attach import attach_volumes
    from storage.layout import existing_layout
    from storage.workspace import Workspace

    layout = existing_layout(root)  # a missing workspace is reported before a bad config.toml
    config = read_config(layout.config_path)
    workspace = await Workspace.open(root, storage=lambda found: storage_of(config, found))
    node = Node(workspace, config)
    try:
        if check_storage:
            await workspace.storage.check()
        await attach_volumes(workspace)
    except BaseException:
        await node.close()
        raise
    return node


def view_node(root: Path | None) -> NodeView:
    """The layout and configuration of the workspace at ``root``, without opening its catalog."""
    from storage.layout import existing_layout

    layout = existing_layout(root)
    return NodeView(layout, read_config(layout.config_path))
