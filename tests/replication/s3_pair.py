"""Nodes configured for the test S3 server (SeaweedFS), and the pair most S3 replication tests
start from: a source node that pushes a dataset into a bucket, a target node that pulls it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from odfd.config import load_config
from odfd.sync.pull import PullResult, pull
from odfd.sync.push import push
from odfd.sync.push_steps import PushResult
from odfd.sync.transport.settings import TransportSettings
from storage.s3_client import S3Bucket
from storage.s3_settings import parse_s3_url
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import SeaweedServer
from tests.replication.datagen import DatasetWriter, create_root


async def s3_node(path: Path, server: SeaweedServer, *, secret: str | None = None) -> Workspace:
    """A workspace whose config.toml holds the server's credentials (or a wrong secret)."""
    workspace = await Workspace.init(path)
    text = server.config_toml() if secret is None else server.config_toml(secret=secret)
    config = workspace.layout.config_path
    await asyncio.to_thread(config.write_text, config.read_text() + "\n" + text)
    return workspace


def via(workspace: Workspace) -> TransportSettings:
    """The transport settings the node's configuration gives, as its ``Node`` builds them."""
    return TransportSettings.from_config(load_config(workspace.layout.config_path))


def bucket_of(server: SeaweedServer, url: str) -> S3Bucket:
    return S3Bucket(parse_s3_url(url), server.settings())


@dataclass(frozen=True)
class S3Pair:
    """Two S3 nodes and the URL of dataset ``alias`` in the test's bucket (``replace`` it for
    another prefix)."""

    server: SeaweedServer
    url: str
    source: Workspace
    target: Workspace
    alias: str = "cities"

    async def create_root(self, *, slices: int, empty_blocks: int = 0) -> DatasetWriter:
        """The source's root dataset (as ``datagen.create_root`` makes it), not pushed yet."""
        return await create_root(self.source, self.alias, slices=slices, empty_blocks=empty_blocks)

    async def push(self) -> PushResult:
        return await push(self.source, self.alias, self.url, settings=via(self.source))

    async def pull(self) -> PullResult:
        return await pull(self.target, self.url, settings=via(self.target))

    def bucket(self) -> S3Bucket:
        return bucket_of(self.server, self.url)
