"""The probe every transport shares (``odfd.sync.transport.probe``): a remote's head and its
sequence number from two reads, the block trusted only when it hashes to its name, the block not
fetched again for a head seen before; and the refusal of a push to a remote that is read-only."""

from __future__ import annotations

import aiohttp
import pytest

from odfd.sync.errors import CorruptSourceError, RemoteNotFoundError, UnsupportedUrlError
from odfd.sync.transport.base import SourceHead
from odfd.sync.transport.url import parse_remote
from storage.workspace import Workspace
from tests.fixtures.workspace import object_path
from tests.replication.datagen import create_root


async def test_a_probe_reads_the_head_and_its_sequence_number(workspace: Workspace) -> None:
    writer = await create_root(workspace, "probed", slices=2, rows=3)
    dataset = writer.dataset
    head = await dataset.chain.head()
    transport = parse_remote(dataset.layout.root.as_uri())
    async with aiohttp.ClientSession() as session:
        probed = await transport.probe(session, None)
        assert probed.head == head
        assert probed.sequence_number == (await dataset.chain.get_block(head)).sequence_number

        # a head seen before is not fetched again: its damaged block goes unnoticed ...
        path = object_path(dataset.chain.blocks, head)
        damaged = bytearray(path.read_bytes())
        damaged[-1] ^= 1
        path.write_bytes(bytes(damaged))
        assert await transport.probe(session, probed) == probed
        # ... while a probe that has not seen it checks the block against its hash
        with pytest.raises(CorruptSourceError, match="does not hash to its name"):
            await transport.probe(session, SourceHead(head, None, None))


async def test_a_probe_of_a_folder_without_a_dataset(workspace: Workspace) -> None:
    transport = parse_remote((workspace.root / "nothing").as_uri())
    async with aiohttp.ClientSession() as session:
        with pytest.raises(RemoteNotFoundError, match="not a dataset folder"):
            await transport.probe(session, None)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "push to ipns://"),
        ("odf+http://example.org/data", "read-only"),
    ],
)
async def test_a_read_only_remote_refuses_a_push(url: str, why: str) -> None:
    transport = parse_remote(url, protocol="simple")
    with pytest.raises(UnsupportedUrlError, match=why) as refused:
        await transport.push(None, None, None)  # type: ignore[arg-type]
    assert str(refused.value).startswith(f"{transport.url}: ")
