"""A smart push's upload refused by the server: its words in the error, not its JSON body."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from odfd.sync.errors import SyncError
from odfd.sync.transport.smart_push import _upload
from protocol.identity import Multihash
from protocol.transfer.smart.structures import ObjectFileReference, TransferUrl


async def _refuse(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response({"message": "Authentication token invalid"}, status=401)


async def test_a_refused_upload_names_the_servers_words(tmp_path: Path) -> None:
    data = tmp_path / "object"
    data.write_bytes(b"some bytes")
    file = ObjectFileReference("DataSlice", Multihash.from_digest_sha3_256(b"some bytes"), 10)
    app = web.Application()
    app.router.add_put("/upload", _refuse)
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        url = TransferUrl(str(server.make_url("/upload")))
        with pytest.raises(SyncError) as raised:
            await _upload(session, data, file, url)
    assert str(raised.value).endswith("was refused (401): Authentication token invalid")
