"""The query API on the real servers: ``odfd init`` makes the node's identity key, a real
``odfd serve`` process answers with proofs signed by the key ``[server] node_key`` names (its
``did:key`` in ``/info``, the key file itself never served), and a daemon serves the API beside
the transfer protocols."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from urllib.parse import quote

from odfd.app.node import Node
from odfd.config import load_config
from odfd.daemon.service import Daemon
from storage.keys import did_of
from storage.workspace import Workspace
from tests.daemon.processes import ServeProcess, odfd
from tests.protocol.query.test_golden_vectors import DID
from tests.query_api import verifier
from tests.query_api.conftest import call
from tests.query_api.datasets import GROWING, POPULATION, TEST_KEY_SEED, add_population
from tests.verifier.builders import root_with_slices


def test_odfd_serve_signs_with_its_configured_key(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    printed = odfd("init", root=root).stdout

    async def build() -> str:
        async with await Workspace.open(root) as workspace:
            await add_population(workspace)
            key = workspace.keys.load_node_key()
            assert key is not None
            return str(did_of(key))

    made = asyncio.run(build())
    assert made in printed
    key_file = root / "keys" / "node.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    configured = tmp_path / "reference.key"
    configured.write_bytes(TEST_KEY_SEED)
    config = root / "config.toml"
    config.write_text(config.read_text() + f'\n[server]\nnode_key = "{configured}"\n')
    server = ServeProcess(root).start()
    try:
        assert call(server.url, "GET", "/info").body == {"isMultiTenant": True, "did": DID}
        sql = f'select city, population from "{POPULATION}" order by city'
        answer = call(server.url, "POST", "/query", {"query": sql, "include": ["Proof"]}).body
        verifier.check(answer)
        assert answer["proof"]["verificationMethod"] == DID
        for path in ("/keys/node.key", "/node.key", "/keys/"):
            assert call(server.url, "GET", path).status == 404
    finally:
        server.kill()


async def test_the_daemon_serves_the_query_api(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await root_with_slices(workspace, GROWING, [[1, 2, 3]])
        config_path = workspace.layout.config_path
        config_path.write_text(config_path.read_text() + "[daemon]\nspark_connect = false\n")
        daemon = Daemon(
            Node(workspace, load_config(config_path)),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        try:
            assert daemon.server_url is not None
            url = daemon.server_url
            sql = f'select sum(value) as total from "{GROWING}"'
            reply = await asyncio.to_thread(call, url, "GET", f"/query?query={quote(sql)}")
            assert reply.body == {"output": {"data": [{"total": 6}], "dataFormat": "JsonAoS"}}
            tail = await asyncio.to_thread(call, url, "GET", f"/{GROWING}/tail?limit=1")
            assert [row["value"] for row in tail.body["data"]] == [3]
            info = await asyncio.to_thread(call, url, "GET", "/info")
            assert info.body == {"isMultiTenant": False}  # Workspace.init makes no key
            proof = await asyncio.to_thread(
                call, url, "POST", "/query", {"query": sql, "include": ["Proof"]}
            )
            assert proof.status == 501
            assert proof.body == {"message": "Response signing is not enabled by the node operator"}
        finally:
            await daemon.shutdown()
