"""A daemon whose start-up fails half-way cleans up like a stop (as aiohttp's ``run_app``): its
HTTP client session is closed and the workspace lock released, so the next start succeeds."""

from __future__ import annotations

import fcntl
import os
import socket

import pytest

from odfd.app.node import Node
from odfd.config import load_config
from odfd.daemon.service import LOCK_FILE, STATE_FILE, Daemon, DaemonError
from storage.workspace import Workspace


async def test_a_start_up_that_fails_half_way_leaves_nothing_behind(workspace: Workspace) -> None:
    config = load_config(workspace.layout.config_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        daemon = Daemon(
            Node(workspace, config), server_overrides={"address": "127.0.0.1", "port": port}
        )
        with pytest.raises(DaemonError, match="cannot listen"):
            await daemon.run()
    session = daemon._session
    assert session is not None and session.closed  # created before the server failed to listen
    assert not daemon.admin_path.exists()
    assert not (workspace.root / STATE_FILE).exists()
    fd = os.open(workspace.root / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if still held
    finally:
        os.close(fd)


async def test_a_daemon_refused_the_lock_touches_nothing_of_the_running_one(
    workspace: Workspace,
) -> None:
    config = load_config(workspace.layout.config_path)
    fd = os.open(workspace.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    state = workspace.root / STATE_FILE
    state.write_text("{}")  # what the running daemon wrote
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        daemon = Daemon(
            Node(workspace, config), server_overrides={"address": "127.0.0.1", "port": 0}
        )
        with pytest.raises(DaemonError, match="another odfd daemon is running"):
            await daemon.run()
    finally:
        os.close(fd)
    assert state.read_text() == "{}"
