"""The local IPFS node launcher: the quickstart's CLI, restarts after SIGKILL, port clashes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.ipfs_node import IpfsNodeError, NodePorts, start_node, stop_node
from protocol.transfer.ipfs import IpfsClient

pytestmark = pytest.mark.ipfs


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfd.ipfs_node", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _exports(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines())


def _wait_dead(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and b") Z" not in Path(f"/proc/{pid}/stat").read_bytes():
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.05)


@pytest.fixture
def node_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "node"
    yield directory
    stop_node(directory)


async def test_node_survives_sigkill_and_a_port_clash_and_keeps_its_data(
    node_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Started by the quickstart's command, the daemon outlives that command.
    started = _cli("start", str(node_dir))
    assert started.returncode == 0, started.stderr
    first = _exports(started.stdout)
    config = json.loads((node_dir / "repo/config").read_text())
    listen = [
        *config["Addresses"]["Swarm"],
        config["Addresses"]["API"],
        config["Addresses"]["Gateway"],
    ]
    assert all(address.startswith("/ip4/127.0.0.1/tcp/") for address in listen)
    assert config["Bootstrap"] == []
    client = IpfsClient(first["ODFD_IPFS_API"])
    assert (await client.id()).peer_id == first["ODFD_IPFS_PEER_ID"]
    cid = await client.add_bytes(b"survives a restart")
    assert _cli("start", str(node_dir)).stdout == started.stdout  # already running: same node

    os.kill(int(first["ODFD_IPFS_PID"]), signal.SIGKILL)
    _wait_dead(int(first["ODFD_IPFS_PID"]))
    assert (node_dir / "repo/repo.lock").exists()  # would block a restart for 20 s
    assert _cli("status", str(node_dir)).returncode == 1

    # Restart while another process holds the first gateway port offered: js-ipfs hangs on
    # EADDRINUSE, so the launcher must kill it and retry on fresh ports.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        offered = _offer_taken_gateway_port_first(monkeypatch, int(squatter.getsockname()[1]))
        node = start_node(node_dir, die_with_parent=True)
    assert len(offered) == 2
    assert node.ports == offered[1]
    assert node.peer_id == first["ODFD_IPFS_PEER_ID"]
    assert await IpfsClient(node.api_multiaddr).cat(cid) == b"survives a restart"
    assert _exports(_cli("status", str(node_dir)).stdout)["ODFD_IPFS_API"] == node.api_multiaddr

    stopped = _cli("stop", str(node_dir))
    assert stopped.returncode == 0, stopped.stderr
    stop_node(node)  # reaps our child
    assert not Path(f"/proc/{node.pid}").exists()
    assert not (node_dir / "repo/repo.lock").exists()
    assert _cli("status", str(node_dir)).returncode == 1


def _offer_taken_gateway_port_first(monkeypatch: pytest.MonkeyPatch, taken: int) -> list[NodePorts]:
    offered: list[NodePorts] = []
    pick_free = NodePorts.pick_free

    def pick(cls: type[NodePorts]) -> NodePorts:
        ports = pick_free()
        if not offered:
            ports = NodePorts(api=ports.api, gateway=taken, swarm=ports.swarm)
        offered.append(ports)
        return ports

    monkeypatch.setattr(NodePorts, "pick_free", classmethod(pick))
    return offered


def test_missing_js_ipfs_is_reported_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(IpfsNodeError, match="run scripts/setup"):
        start_node(tmp_path / "node", jsipfs=tmp_path / "no-such-jsipfs")
