"""Running an engine command in the workspace's daemon instead of in this process.

A CLI process that starts Spark (even only as a Spark Connect client) or DataFusion pays seconds
of imports and session set-up; a running ``odfd daemon`` has paid them already. When the
workspace's daemon is up, ``odfd ingest|pull|verify|sql|provenance`` send their command line
(argv, working folder, workspace root, terminal flags and the ``ODFD_*`` environment) over the
daemon's admin socket (``odfd.daemon.admin``: a Unix socket only the node's user can open); the
daemon runs the same ``odfd.cli.main.main`` in a worker thread (``odfd.daemon.commands``) and
streams its stdout and stderr back as frames; this process writes them out and exits with the
command's code. Ctrl-C asks the daemon to interrupt the command as Ctrl-C would have here.

Whenever the daemon cannot run a command exactly as this process would (no daemon, another
version, a different ``ODFD_*`` environment, input from stdin, a full queue), the command runs
here instead; ``-v`` says why. ``--no-daemon`` or ``ODFD_NO_DAEMON=1`` always run it here.

Imported before any command module, so it imports only the standard library (``http.client``
over the socket, no aiohttp).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import struct
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from odfd import __version__
from odfd.cli.forwarding import DAEMON_COMMANDS as FORWARDED
from odfd.cli.forwarding import serves_here
from protocol.errors import OdfError

#: The option and the variable that keep a command in this process.
LOCAL_OPTION = "--no-daemon"
NO_DAEMON_ENV = "ODFD_NO_DAEMON"
#: Bumped when the request or the frames change; a daemon speaking another one is not used.
PROTOCOL = 1
RUN_PATH = "/run"
#: ``ODFD_*`` variables that do not change what a command does (they are sent as arguments or
#: only steer the daemon itself); every other one must be equal in the CLI and the daemon.
IGNORED_ENV = ("ODFD_HOME", "ODFD_VERBOSE", NO_DAEMON_ENV)
IGNORED_ENV_PREFIX = "ODFD_DAEMON_"
#: Other variables a command reads (colour, time zone, locale of printed numbers and times).
COMPARED_ENV = ("NO_COLOR", "TZ", "LANG", "LC_ALL")

#: Frames from the daemon: kind (1 byte) + length (4 bytes, big-endian) + payload.
FRAME_HEADER = struct.Struct(">cI")
ACCEPTED, REFUSED, STDOUT, STDERR, EXIT = b"a", b"r", b"o", b"e", b"x"
#: Seconds to wait for the daemon to accept the request (not for the command: that may run long).
CONNECT_TIMEOUT = 5.0


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that must be equal in the CLI and the daemon for a command to behave alike."""
    return {
        name: value
        for name, value in env.items()
        if (name.startswith("ODFD_") and name not in IGNORED_ENV)
        and not name.startswith(IGNORED_ENV_PREFIX)
        or name in COMPARED_ENV
    }


def env_difference(ours: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """Names of the variables set differently on the two sides."""
    return sorted(n for n in ours.keys() | theirs.keys() if ours.get(n) != theirs.get(n))


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


def run(argv: Sequence[str], command: str) -> int | None:
    """Runs ``odfd ARGV`` (whose command is ``command``) in the workspace's daemon and returns its
    exit code, or ``None`` when it must run in this process instead."""
    if command not in FORWARDED or serves_here(command, argv):
        return None
    options = _options(argv)
    verbose = bool({"-v", "--verbose"} & set(options)) or os.environ.get(
        "ODFD_VERBOSE", ""
    ) not in ("", "0")
    if "-h" in options or "--help" in options:
        return None  # argparse fits help to this terminal's width
    reason = opted_out(argv)
    if reason is None:
        try:
            root = workspace_root(argv)
            session = _Session.open(root)
        except OSError as err:
            reason = f"no daemon answers on this workspace ({err.strerror or err})"
        except OdfError as err:  # e.g. a bad setting: the command itself reports it
            reason = f"the workspace's configuration does not load ({err})"
        else:
            try:
                return session.run(argv, command, root)
            except KeyboardInterrupt:  # before the daemon took it, or a second Ctrl-C
                sys.stderr.write("interrupted\n")
                return 130
            except _Lost as lost:
                sys.stderr.write(f"error: {lost}\n")
                return 1
            except _Refused as refused:
                reason = str(refused)
            except (OSError, http.client.HTTPException) as err:
                reason = f"the daemon's admin socket failed ({err})"
            finally:
                session.close()
    if verbose:
        sys.stderr.write(f"running here, not in the daemon: {reason}\n")
    return None


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
    from odfd.config import load_config

    return load_config(config_path).daemon.admin_socket


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

    def run(self, argv: Sequence[str], command: str, root: Path) -> int:
        job = secrets.token_hex(16)
        body = {
            "protocol": PROTOCOL,
            "version": __version__,
            "job": job,
            "command": command,
            "argv": list(argv),
            "cwd": os.getcwd(),
            "root": str(root),
            "env": relevant_env(os.environ),
            "tty": {name: _isatty(name) for name in ("stdin", "stdout", "stderr")},
            "encodings": {
                name: [getattr(stream, "encoding", None) or "utf-8", stream.errors or "strict"]
                for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr))
            },
        }
        self.connection.request(
            "POST", RUN_PATH, body=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        response = self.connection.getresponse()
        if response.status != 200:
            raise _Refused(f"the daemon does not run commands (HTTP {response.status})")
        if self.connection.sock is not None:
            self.connection.sock.settimeout(None)  # the command may run for hours
        kind, payload = self._frame(response)
        if kind == REFUSED:
            raise _Refused(payload.decode())
        if kind != ACCEPTED:
            raise _Refused(f"the daemon answered with an unknown frame {kind!r}")
        with self._ctrl_c_cancels(job):
            try:
                return self._relay(response)
            except (OSError, http.client.HTTPException) as err:
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
    def _frame(response: http.client.HTTPResponse) -> tuple[bytes, bytes]:
        header = response.read(FRAME_HEADER.size)
        if len(header) < FRAME_HEADER.size:
            raise ConnectionError("the daemon closed the connection")
        kind, size = FRAME_HEADER.unpack(header)
        payload = response.read(size) if size else b""
        if len(payload) < size:
            raise ConnectionError("the daemon closed the connection")
        return kind, payload

    def _relay(self, response: http.client.HTTPResponse) -> int:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        while True:
            kind, payload = self._frame(response)
            if kind == STDOUT:
                out.write(payload)
                out.flush()
            elif kind == STDERR:
                err.write(payload)
                err.flush()
            elif kind == EXIT:
                return int(payload)

    def _cancel(self, job: str) -> None:
        try:
            connection = _connection(self.path)
            connection.request("POST", f"{RUN_PATH}/{job}/cancel")
            connection.getresponse().read()
            connection.close()
        except (OSError, http.client.HTTPException):
            self.close()  # the daemon cancels a command whose client went away
            raise KeyboardInterrupt from None


def _isatty(name: str) -> bool:
    stream = getattr(sys, name)
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
