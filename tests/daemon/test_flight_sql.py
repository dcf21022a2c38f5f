"""The daemon serves Flight SQL on ``[server] flight_sql_port`` (and not at all without it):
``kamu.connect`` reads a dataset, whose new data the next query sees; stopping the daemon stops
the server. The clients run on threads: they block, the daemon's loop must not."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import kamu
import pytest

from odfd.config import load_config
from odfd.daemon.service import Daemon
from protocol.model import AddData, Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.verifier.builders import T0, root_with_slices, slice_table, write_slice


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _append(workspace: Workspace, dataset: Dataset, values: list[int]) -> None:
    state = await dataset.chain.state()
    assert state.last_offset is not None
    time = Timestamp(T0.epoch_nanos + 3_600_000_000_000)
    path = workspace.root / "staging" / "appended.parquet"
    data_slice = write_slice(slice_table(state.last_offset + 1, values, system_time=time), path)
    event = AddData(
        prev_offset=state.last_offset,
        new_data=data_slice,
        new_watermark=Timestamp(T0.epoch_nanos + max(values) * 1_000_000_000),
    )
    await dataset.commit_data(event, data_file=path, expected_head=state.head, system_time=time)


def _total(url: str) -> list[int]:
    with kamu.connect(url) as con:
        return list(con.query("select sum(value) as total from nums")["total"])


async def test_the_daemon_serves_flight_sql_on_its_port(tmp_path: Path) -> None:
    port = _free_port()
    async with await Workspace.init(tmp_path / "ws") as workspace:
        dataset = await root_with_slices(workspace, "nums", [[1, 2, 3]])
        config_path = workspace.layout.config_path
        config_path.write_text(
            config_path.read_text()
            + f"[server]\nflight_sql_port = {port}\n[daemon]\nspark_connect = false\n"
        )
        daemon = Daemon(
            workspace,
            load_config(config_path),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        try:
            assert daemon.flight_sql is not None
            url = daemon.flight_sql.url
            assert url == f"grpc://127.0.0.1:{port}"
            assert await asyncio.to_thread(_total, url) == [6]
            await _append(workspace, dataset, [10, 20])
            assert await asyncio.to_thread(_total, url) == [36]
        finally:
            await daemon.shutdown()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


async def test_without_a_port_the_daemon_serves_no_flight_sql(workspace: Workspace) -> None:
    config_path = workspace.layout.config_path
    config_path.write_text(config_path.read_text() + "[daemon]\nspark_connect = false\n")
    daemon = Daemon(
        workspace, load_config(config_path), server_overrides={"address": "127.0.0.1", "port": 0}
    )
    await daemon.start()
    try:
        assert daemon.flight_sql is None
    finally:
        await daemon.shutdown()
