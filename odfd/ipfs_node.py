"""Runs a local IPFS node (js-ipfs, Kubo's RPC API and gateway) for the tests and the quickstart.

Users point odfd at their own Kubo. Kubo cannot be installed from the package registries odfd's
machines reach, so `scripts/setup` installs js-ipfs from `scripts/ipfs/package-lock.json`; this
module starts it with a config that keeps every listener on loopback and never dials the public
network. It lives in the `odfd` package (not under `scripts/`) so the test fixtures import it and
the quickstart runs it as `python -m odfd.ipfs_node start|stop|status DIR`.

A node folder holds `repo/` (the node's `IPFS_PATH`), `daemon.log` and `node.json` (pid, ports
and peer id of the running daemon, so another process can stop it).
"""

from __future__ import annotations

import argparse
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from protocol.errors import OdfError

JSIPFS_ENV_VAR = "ODFD_JSIPFS"
DEFAULT_JSIPFS = Path(__file__).resolve().parent.parent / "scripts/ipfs/node_modules/.bin/jsipfs"
LOOPBACK = "127.0.0.1"
START_ATTEMPTS = 3
LOG_TAIL_CHARS = 2000
READY_LINE = "Daemon is ready"

# Popen objects of daemons started by this process, so stopping one also reaps it.
_LAUNCHED: dict[int, subprocess.Popen[bytes]] = {}


class IpfsNodeError(OdfError):
    """The local IPFS node could not be installed, initialised, started or stopped."""


@dataclass(frozen=True, slots=True)
class NodePorts:
    """The loopback TCP ports a node listens on."""

    api: int
    gateway: int
    swarm: int

    @classmethod
    def pick_free(cls) -> NodePorts:
        """Ports the kernel just handed out as free (another process may still grab one: the
        launcher retries with fresh ports when the daemon reports EADDRINUSE)."""
        sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
        try:
            for sock in sockets:
                sock.bind((LOOPBACK, 0))
            api, gateway, swarm = (sock.getsockname()[1] for sock in sockets)
        finally:
            for sock in sockets:
                sock.close()
        return cls(api=api, gateway=gateway, swarm=swarm)


@dataclass(frozen=True, slots=True)
class LocalIpfsNode:
    """A running daemon: where it keeps its repo and how to reach it."""

    node_dir: Path
    pid: int
    ports: NodePorts
    peer_id: str

    @property
    def repo_dir(self) -> Path:
        return self.node_dir / "repo"

    @property
    def api_multiaddr(self) -> str:
        """The RPC address in the form `ipfshttpclient` and Kubo's `--api` take."""
        return f"/ip4/{LOOPBACK}/tcp/{self.ports.api}/http"

    @property
    def api_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.api}"

    @property
    def gateway_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.gateway}"

    @property
    def swarm_multiaddr(self) -> str:
        """What another node passes to `swarm connect` to reach this one."""
        return f"/ip4/{LOOPBACK}/tcp/{self.ports.swarm}/p2p/{self.peer_id}"

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "ports": asdict(self.ports), "peer_id": self.peer_id})

    @classmethod
    def from_json(cls, node_dir: Path, text: str) -> LocalIpfsNode:
        state = json.loads(text)
        return cls(node_dir, int(state["pid"]), NodePorts(**state["ports"]), str(state["peer_id"]))


def jsipfs_executable(explicit: Path | None = None) -> Path:
    """`jsipfs`: the argument, else `$ODFD_JSIPFS`, else the one `scripts/setup` installs."""
    path = explicit or Path(os.environ.get(JSIPFS_ENV_VAR) or DEFAULT_JSIPFS)
    if not os.access(path, os.X_OK):
        raise IpfsNodeError(
            f"js-ipfs is not installed at {path}: run scripts/setup "
            f"(or set {JSIPFS_ENV_VAR} to a jsipfs executable)"
        )
    return path


def loopback_config(ports: NodePorts) -> dict[str, object]:
    """Init config: every listener on loopback, no bootstrap peers, no discovery, no NAT mapping."""
    return {
        "Addresses": _listen_addresses(ports),
        "Bootstrap": [],
        "Discovery": {"MDNS": {"Enabled": False}, "webRTCStar": {"Enabled": False}},
        "Swarm": {"DisableNatPortMap": True},
    }


def _listen_addresses(ports: NodePorts) -> dict[str, object]:
    return {
        "Swarm": [f"/ip4/{LOOPBACK}/tcp/{ports.swarm}"],
        "API": f"/ip4/{LOOPBACK}/tcp/{ports.api}",
        "Gateway": f"/ip4/{LOOPBACK}/tcp/{ports.gateway}",
        "RPC": "",
        "Delegates": [],
    }


def start_node(
    node_dir: Path,
    *,
    jsipfs: Path | None = None,
    timeout: float = 60.0,
    die_with_parent: bool = False,
) -> LocalIpfsNode:
    """Starts a daemon for `node_dir` (initialising its repo on first use) and waits until its
    RPC API answers. Returns the already running daemon if there is one.

    `die_with_parent` (Linux) has the kernel SIGTERM the daemon when the calling thread's process
    dies (strictly: when the calling thread exits, so call from the main thread), so a test run
    killed before its teardown leaves no node behind.
    """
    node_dir = node_dir.resolve()
    executable = jsipfs_executable(jsipfs)
    running = read_running_node(node_dir)
    if running is not None:
        return running
    node_dir.mkdir(parents=True, exist_ok=True)
    _clear_stale_daemon_files(node_dir)
    last_error: IpfsNodeError | None = None
    for _ in range(START_ATTEMPTS):
        ports = NodePorts.pick_free()
        if (node_dir / "repo/config").exists():
            _set_listen_ports(node_dir / "repo", ports)
        else:
            _init_repo(executable, node_dir, ports)
        try:
            node = _launch_daemon(executable, node_dir, ports, timeout, die_with_parent)
        except _PortTakenError as err:
            last_error = err
            continue
        (node_dir / "node.json").write_text(node.to_json())
        return node
    raise IpfsNodeError(
        f"IPFS node in {node_dir}: no free ports after {START_ATTEMPTS} tries: {last_error}"
    )


def stop_node(node: LocalIpfsNode | Path, *, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; clears what a killed daemon leaves behind."""
    if isinstance(node, Path):
        running = read_running_node(node.resolve())
        if running is None:
            return
        node = running
    if _is_daemon_of(node.pid, node.repo_dir):
        _terminate(node.pid, grace)
    launched = _LAUNCHED.pop(node.pid, None)
    if launched is not None:
        launched.poll()  # reaps a daemon of ours that had already died on its own
    _clear_stale_daemon_files(node.node_dir)
    (node.node_dir / "node.json").unlink(missing_ok=True)


def read_running_node(node_dir: Path) -> LocalIpfsNode | None:
    """The daemon recorded in `node.json` if it is still alive and serving this repo."""
    state_file = node_dir / "node.json"
    if not state_file.exists():
        return None
    node = LocalIpfsNode.from_json(node_dir, state_file.read_text())
    return node if _is_daemon_of(node.pid, node.repo_dir) else None


class _PortTakenError(IpfsNodeError):
    """The daemon could not bind one of its ports; a retry with fresh ports may succeed."""


def _init_repo(executable: Path, node_dir: Path, ports: NodePorts) -> None:
    config_file = node_dir / "init.json"
    config_file.write_text(json.dumps(loopback_config(ports)))
    repo = node_dir / "repo"
    try:
        result = subprocess.run(
            [str(executable), "init", "--empty-repo", str(config_file)],
            env=_node_env(repo),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise IpfsNodeError(f"`jsipfs init` for {repo} did not finish within 120 s") from err
    # Without a config the daemon would silently create a default repo listening on all interfaces.
    if result.returncode != 0 or not (repo / "config").is_file():
        raise IpfsNodeError(
            f"`jsipfs init` failed for {repo} (exit code {result.returncode}): "
            f"{(result.stdout + result.stderr)[-LOG_TAIL_CHARS:]}"
        )


def _set_listen_ports(repo: Path, ports: NodePorts) -> None:
    """Rewrites the listen addresses of an existing repo, keeping its identity, keys and data."""
    config_path = repo / "config"
    config = json.loads(config_path.read_text())
    config["Addresses"].update(_listen_addresses(ports))
    config_path.write_text(json.dumps(config, indent=2))


def _launch_daemon(
    executable: Path, node_dir: Path, ports: NodePorts, timeout: float, die_with_parent: bool
) -> LocalIpfsNode:
    repo = node_dir / "repo"
    log_path = node_dir / "daemon.log"
    # A file, not a pipe: nobody reads a pipe after start-up, and a full one blocks the daemon.
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(executable), "daemon", "--enable-preload=false"],
            env=_node_env(repo),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_parent_death_signal_setter() if die_with_parent else None,
        )
    _LAUNCHED[process.pid] = process
    deadline = time.monotonic() + timeout
    while True:
        log_text = _tail(log_path)
        if "EADDRINUSE" not in log_text and READY_LINE in log_text:
            # The API comes up before the gateway: only the log says both listen.
            peer_id = _query_peer_id(ports.api)
            if peer_id is not None:
                return LocalIpfsNode(node_dir, process.pid, ports, peer_id)
        if process.poll() is not None:
            _LAUNCHED.pop(process.pid, None)
            raise IpfsNodeError(
                f"IPFS daemon for {repo} exited with code {process.returncode} before its API "
                f"answered: {log_text}"
            )
        if "EADDRINUSE" in log_text:
            # js-ipfs logs the failed listen and then hangs instead of exiting.
            _terminate(process.pid, grace=5.0)
            _clear_stale_daemon_files(node_dir)
            raise _PortTakenError(f"IPFS daemon for {repo} could not listen: {log_text}")
        if time.monotonic() > deadline:
            _terminate(process.pid, grace=5.0)
            _clear_stale_daemon_files(node_dir)
            raise IpfsNodeError(
                f"IPFS daemon for {repo} was not ready within {timeout:.0f} s (log line "
                f"{READY_LINE!r}, then POST {_id_url(ports.api)} answering 200): {log_text}"
            )
        time.sleep(0.1)


def _parent_death_signal_setter() -> Callable[[], object] | None:
    """A function for the forked child (before exec) that asks Linux to SIGTERM it when its
    parent dies. `prctl` is looked up here, in the parent: the child only makes the call."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, signal.SIGTERM)


def _query_peer_id(api_port: int) -> str | None:
    request = urllib.request.Request(_id_url(api_port), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=2.0) as response:
            if response.status == 200:
                return str(json.load(response)["ID"])
    except (OSError, http.client.HTTPException, ValueError, KeyError):
        return None
    return None


def _id_url(api_port: int) -> str:
    return f"http://{LOOPBACK}:{api_port}/api/v0/id"


def _node_env(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["IPFS_PATH"] = str(repo)
    env.pop("DEBUG", None)
    return env


def _terminate(pid: int, grace: float) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not _wait_exit(pid, grace):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if not _wait_exit(pid, grace):
            raise IpfsNodeError(f"IPFS daemon (pid {pid}) survived SIGKILL for {grace:.0f} s")


def _wait_exit(pid: int, timeout: float) -> bool:
    process = _LAUNCHED.get(pid)
    if process is not None:
        try:
            process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != b"Z"


def _is_daemon_of(pid: int, repo: Path) -> bool:
    """Whether `pid` is alive and runs with `IPFS_PATH=repo` (a recycled pid is someone else)."""
    if not _pid_alive(pid):
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return False
    return f"IPFS_PATH={repo}".encode() in environ


def _clear_stale_daemon_files(node_dir: Path) -> None:
    """Removes what a killed daemon leaves: `repo.lock` (a directory that blocks a restart for
    20 s) and `api` (makes `jsipfs` commands talk to a dead address). Only called when no live
    daemon serves the repo."""
    repo = node_dir / "repo"
    lock = repo / "repo.lock"
    if lock.is_dir():
        shutil.rmtree(lock, ignore_errors=True)
    else:
        lock.unlink(missing_ok=True)
    (repo / "api").unlink(missing_ok=True)


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-LOG_TAIL_CHARS:].strip()
    except FileNotFoundError:
        return ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odfd.ipfs_node",
        description="Start, stop or inspect a local loopback-only IPFS node (js-ipfs).",
    )
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("node_dir", type=Path, help="folder holding the node's repo and log")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for start-up")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            print(_shell_exports(start_node(args.node_dir, timeout=args.timeout)))
        elif args.action == "stop":
            stop_node(args.node_dir)
        else:
            running = read_running_node(args.node_dir.resolve())
            if running is None:
                print(f"no IPFS node running in {args.node_dir}", file=sys.stderr)
                return 1
            print(_shell_exports(running))
    except OdfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def _shell_exports(node: LocalIpfsNode) -> str:
    """`KEY=value` lines a shell script can `eval`."""
    return "\n".join(
        [
            f"ODFD_IPFS_API={node.api_multiaddr}",
            f"ODFD_IPFS_GATEWAY={node.gateway_url}",
            f"ODFD_IPFS_PEER_ID={node.peer_id}",
            f"ODFD_IPFS_SWARM={node.swarm_multiaddr}",
            f"ODFD_IPFS_PID={node.pid}",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
