"""Running an engine command in the workspace's daemon instead of in this process.

A CLI process that starts Spark (even only as a Spark Connect client) or DataFusion pays seconds
of imports and session set-up; a running ``odfd daemon`` has paid them already. When the
workspace's daemon is up, ``odfd ingest|pull|verify|sql|provenance`` parse their command line
into the command's typed request (``odfd.app.forwarding``; the command module's ``forward``) and
send it, with the workspace root and the ``ODFD_*`` environment, over the daemon's admin socket
(``odfd.daemon.admin``: a Unix socket only the node's user can open); the daemon calls the use
case in its warm process (``odfd.daemon.commands``) and streams its events and result back, which
the command module's renderer prints as a local run prints them; this process exits with the
command's code. Ctrl-C asks the daemon to cancel the command (its task and its engine jobs).

Whenever the daemon cannot run a command exactly as this process would (no daemon, another
version, a different ``ODFD_*`` environment, input from stdin, a full queue), the command runs
here instead; ``-v`` says why. ``--no-daemon`` or ``ODFD_NO_DAEMON=1`` always run it here.

Imports only the standard library (``http.client`` over the socket, no aiohttp); the requests
and renderers it is handed import no engine either.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from odfd import __version__
from odfd.app.events import Recovered
from odfd.app.forwarding import (
    ACCEPTED,
    ERROR,
    EVENT,
    INTERRUPTED,
    NO_DAEMON_ENV,
    PROTOCOL,
    REFUSED,
    RESULT,
    RUN_PATH,
    Request,
    env_difference,
    relevant_env,
)
from odfd.cli import terminal
from protocol.errors import OdfError

#: The option that keeps a command in this process (``NO_DAEMON_ENV`` does too).
LOCAL_OPTION = "--no-daemon"
#: Seconds to wait for the daemon to accept the request (not for the command: that may run long).
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Route:
    """Where a command runs, and why (``odfd engine status`` prints it; ``-v`` on fallback)."""

    daemon: bool
    reason: str


def opted_out(argv: Sequence[str], env: Mapping[str, str] = os.environ) -> str | None:
    """Why the user keeps commands here, if they do."""
    if LOCAL_OPTION in _options(argv):
        return f"{LOCAL_OPTION} was given"
    if env.get(NO_DAEMON_ENV, "") not in ("", "0"):
        return f"{NO_DAEMON_ENV} is set"
    return None


class Rendering(Protocol):
    """How a command prints what the daemon answers: the renderer its local run uses."""

    def event(self, data: dict[str, Any]) -> None:
        """One of the use case's events (its JSON form)."""
        ...

    def result(self, data: Any) -> int:
        """The use case's result (its JSON form); returns the exit code."""
        ...


def run(args: argparse.Namespace, argv: Sequence[str], *, verbose: bool) -> int | None:
    """Runs the parsed command ``args`` (of the command line ``argv``) in the workspace's daemon
    and returns its exit code, or ``None`` when it must run in this process instead."""
    reason = opted_out(argv)
    if reason is None:
        forward = args.forward(args)
        if isinstance(forward, str):
            reason = forward
        else:
            request, rendering = forward
            done = _in_daemon(request, rendering, argv)
            if isinstance(done, int):
                return done
            reason = done
    if verbose:
        sys.stderr.write(f"running here, not in the daemon: {reason}\n")
    return None


def _in_daemon(request: Request, rendering: Rendering, argv: Sequence[str]) -> int | str:
    """The command's exit code, or why the daemon did not run it."""
    try:
        root = workspace_root(argv)
        session = _Session.open(root)
    except OSError as err:
        return f"no daemon answers on this workspace ({err.strerror or err})"
    except OdfError as err:  # e.g. a bad setting: the command itself reports it
        return f"the workspace's configuration does not load ({err})"
    try:
        return session.run(request, rendering, root)
    except KeyboardInterrupt:  # before the daemon took it, or a second Ctrl-C
        sys.stderr.write("interrupted\n")
        return 130
    except _Lost as lost:
        sys.stderr.write(f"error: {lost}\n")
        return 1
    except _Refused as refused:
        return str(refused)
    except (OSError, http.client.HTTPException) as err:
        return f"the daemon's admin socket failed ({err})"
    finally:
        session.close()


def route(root: Path, argv: Sequence[str] = ()) -> Route:
    """Where an engine command on ``root`` would run now (without running one)."""
    reason = opted_out(argv)
    if reason is not None:
        return Route(False, reason)
    try:
        connection = _connection(_socket_path(root))
        connection.request("GET", "/ping")
        response = connection.getresponse()
        ping = json.loads(response.read()) if response.status == 200 else {}
        connection.close()
    except (OSError, ValueError, http.client.HTTPException):
        return Route(False, "no daemon runs on this workspace")
    refusal = _mismatch(ping)
    if refusal is not None:
        return Route(False, refusal)
    return Route(True, f"the daemon (pid {ping.get('pid')}) runs it in its warm process")


def workspace_root(argv: Sequence[str]) -> Path:
    """The workspace ``odfd ARGV`` works on, as ``Workspace.open`` finds it (absolute)."""
    from storage.layout import WorkspaceLayout

    given = None
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word == "--root":
            given = next(words, None)
        elif word.startswith("--root="):
            given = word.removeprefix("--root=")
    root = Path(given) if given is not None else WorkspaceLayout.default_root()
    return root.absolute()


def _options(argv: Sequence[str]) -> list[str]:
    words = list(argv)
    return words[: words.index("--")] if "--" in words else words


def _mismatch(ping: Mapping[str, object]) -> str | None:
    """Why a daemon that answered ``/ping`` with ``ping`` cannot run our commands, if it cannot."""
    if ping.get("version") != __version__ or ping.get("protocol") != PROTOCOL:
        return (
            f"the daemon runs odfd {ping.get('version', 'of an older kind')}, this is {__version__}"
        )
    theirs = ping.get("env")
    if not isinstance(theirs, dict):
        return "the daemon did not say its environment"
    differ = env_difference(relevant_env(os.environ), theirs)
    if differ:
        return "the daemon's environment differs in " + ", ".join(differ)
    return None


class _Refused(Exception):
    """The daemon will not run the command; the message says why."""


class _Lost(Exception):
    """The daemon took the command and then the connection broke: it must not run again here."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("odfd", timeout=CONNECT_TIMEOUT)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _socket_path(root: Path) -> Path:
    """Where the daemon of ``root`` listens (``odfd.daemon.admin_client.socket_path``)."""
    from odfd.daemon.admin_client import socket_path
    from storage.layout import WorkspaceLayout

    layout = WorkspaceLayout(root)
    if not layout.config_path.is_file():
        raise FileNotFoundError(2, "no workspace here", str(root))
    return socket_path(layout, _configured_socket(layout.config_path))


def _configured_socket(config_path: Path) -> str | None:
    from odfd.app.node import read_config

    return read_config(config_path).daemon.admin_socket


def _connection(path: Path) -> _UnixConnection:
    if not path.exists():
        raise FileNotFoundError(2, "no daemon socket", str(path))
    connection = _UnixConnection(path)
    connection.connect()
    return connection


class _Session:
    """One command's request to the daemon and its streamed answer."""

    def __init__(self, path: Path, connection: _UnixConnection) -> None:
        self.path = path
        self.connection = connection

    @classmethod
    def open(cls, root: Path) -> _Session:
        path = _socket_path(root)
        return cls(path, _connection(path))

    def close(self) -> None:
        self.connection.close()

    def run(self, request: Request, rendering: Rendering, root: Path) -> int:
        job = secrets.token_hex(16)
        body = {
            "protocol": PROTOCOL,
            "version": __version__,
            "job": job,
            "command": request.command,
            "request": request.to_json(),
            "root": str(root),
            "env": relevant_env(os.environ),
        }
        self.connection.request(
            "POST", RUN_PATH, body=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        response = self.connection.getresponse()
        if response.status != 200:
            raise _Refused(f"the daemon does not run commands (HTTP {response.status})")
        if self.connection.sock is not None:
            self.connection.sock.settimeout(None)  # the command may run for hours
        first = self._frame(response)
        if first["frame"] == REFUSED:
            raise _Refused(str(first.get("reason")))
        if first["frame"] != ACCEPTED:
            raise _Refused(f"the daemon answered with an unknown frame {first['frame']!r}")
        with self._ctrl_c_cancels(job):
            try:
                return self._relay(response, rendering)
            except (OSError, http.client.HTTPException, ValueError) as err:
                raise _Lost(f"lost the daemon while it ran the command ({err})") from None

    @contextlib.contextmanager
    def _ctrl_c_cancels(self, job: str) -> Iterator[None]:
        """While the command runs, Ctrl-C asks the daemon to interrupt it and the relay goes on
        (the socket read resumes after the handler), so the command's own "interrupted" and exit
        code arrive; a second Ctrl-C stops waiting."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        asked = False

        def on_sigint(signum: int, frame: object) -> None:
            nonlocal asked
            if asked:
                raise KeyboardInterrupt
            asked = True
            self._cancel(job)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @staticmethod
    def _frame(response: http.client.HTTPResponse) -> dict[str, Any]:
        line = response.readline()
        if not line.endswith(b"\n"):
            raise ConnectionError("the daemon closed the connection")
        frame = json.loads(line)
        if not isinstance(frame, dict) or "frame" not in frame:
            raise ValueError(f"not a frame: {line[:80]!r}")
        return frame

    def _relay(self, response: http.client.HTTPResponse, rendering: Rendering) -> int:
        while True:
            frame = self._frame(response)
            kind = frame["frame"]
            if kind == EVENT and frame["event"].get("event") == Recovered.name:
                terminal.info(f"Recovered: {frame['event'].get('what')}")  # any command's
            elif kind == EVENT:
                rendering.event(frame["event"])
            elif kind == RESULT:
                return rendering.result(frame.get("result"))
            elif kind == ERROR:
                return _report(frame)
            elif kind == INTERRUPTED:
                sys.stderr.write("interrupted\n")
                return 130

    def _cancel(self, job: str) -> None:
        try:
            connection = _connection(self.path)
            connection.request("POST", f"{RUN_PATH}/{job}/cancel")
            connection.getresponse().read()
            connection.close()
        except (OSError, http.client.HTTPException):
            self.close()  # the daemon cancels a command whose client went away
            raise KeyboardInterrupt from None


def _report(frame: dict[str, Any]) -> int:
    """A failed command's error as a local run prints it: one line (with the traceback first
    under ``-v``), or the traceback of a bug."""
    message = frame.get("message")
    if message is None or terminal.is_verbose():
        sys.stderr.write(str(frame.get("traceback", "")))
    if message is not None:
        terminal.error(str(message))
    return int(frame.get("exitCode", 1))
