"""A mirror sync pulls and pushes through the application layer's use cases (``odfd pull URL``'s
and ``odfd push``'s), so each head move it makes is in the write log as the daemon's, and its
target gets the same head a push from the command line gives. Real pull and push over
``file://``; an attempt that finds nothing new records nothing."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node
from odfd.app.write_log import DAEMON, writes_of
from odfd.config import NodeConfig
from storage.catalog.mirrors import MirrorTable
from storage.layout import HEAD_REF
from storage.workspace import Workspace
from tests.replication.datagen import create_root

ALIAS = "cities"


async def test_mirror_sync_records_its_pulls_as_the_daemons_and_pushes_to_its_target(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as node,
        aiohttp.ClientSession() as session,
    ):
        writer = await create_root(source, ALIAS, slices=2, seed=4)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        record = await MirrorTable(node.catalog).add(ALIAS, url, [target.as_uri()], 3600.0)
        syncer = MirrorSyncer(Node(node, NodeConfig()), session)

        first = await syncer.sync(record)
        first_head = await writer.dataset.chain.head()
        assert first.attempt.outcome == "updated", first.attempt.error
        assert first.attempt.pushes[0]["blocks"] > 0
        head_file = target / "refs" / HEAD_REF
        assert head_file.read_text().strip() == str(first_head)

        unchanged = await syncer.sync(record)
        assert unchanged.attempt.outcome == "unchanged", unchanged.attempt.error

        second_head = await writer.append(slices=1)
        second = await syncer.sync(record)
        assert second.attempt.outcome == "updated", second.attempt.error
        assert head_file.read_text().strip() == str(second_head)

        writes = await writes_of(node, writer.dataset_id)
    assert [(w.action, w.account, w.via, w.target, w.old_head, w.new_head) for w in writes] == [
        ("pull", DAEMON.account, DAEMON.via, ALIAS, None, str(first_head)),
        ("pull", DAEMON.account, DAEMON.via, ALIAS, str(first_head), str(second_head)),
    ]
