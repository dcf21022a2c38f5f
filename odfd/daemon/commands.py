"""CLI commands run by the daemon for a thin ``odfd`` client (``odfd.cli.via_daemon``).

``POST /run`` on the admin socket carries a command line; a worker thread of this process runs
the same ``odfd.cli.main.main`` the CLI would, against the daemon's warm engine session, while
the handler streams what it prints back as frames. Nothing is shared with the command but the
process: it opens its own ``Workspace`` (its own flocks and staging folder, so it meets the
daemon's own syncs and audits exactly as a second CLI process would), and its stdout, stderr,
stdin and console settings are its own (``sys.std*`` are routed by a context variable, which
``asyncio`` tasks and ``asyncio.to_thread`` inherit).

A command is refused (the client then runs it itself) when it could not run here as it would
there: another odfd version, a different ``ODFD_*`` environment, input read from stdin, a pull
from a remote URL (no engine: nothing to gain), the daemon still starting, or
``MAX_COMMANDS`` already running. ``POST /run/{job}/cancel`` (the client's Ctrl-C) or the
client going away interrupts the command as Ctrl-C would: ``KeyboardInterrupt`` in its event
loop, whose tasks are cancelled; work already in a worker thread finishes its step first, and
a dataset's head moves only after everything it reaches is stored, so nothing is half-committed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import ctypes
import io
import json
import logging
import os
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from aiohttp import web

from odfd import __version__
from odfd.app.forwarding import (
    ACCEPTED,
    EXIT,
    FORWARDED,
    FRAME_HEADER,
    PROTOCOL,
    REFUSED,
    RUN_PATH,
    STDERR,
    STDOUT,
    CommandLine,
    env_difference,
    relevant_env,
)

if TYPE_CHECKING:
    from verifier.engine.registry import Engines

log = logging.getLogger(__name__)

MAX_COMMANDS = 4
"""Commands run at once for clients; more are refused (each client then runs its own)."""
#: Seconds between checks that a silent command's client is still there.
CLIENT_CHECK_SECONDS = 1.0
#: Arguments holding paths, per command: made absolute against the client's folder.
PATH_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "ingest": ("files",),
    "sql": ("script", "output_path"),
}

_job: contextvars.ContextVar[Job | None] = contextvars.ContextVar("odfd_command_job", default=None)


class Refused(Exception):
    """The command cannot run in the daemon as it would in the client; the message says why."""


def refusal_of(command: str, args: argparse.Namespace, stdin_tty: bool) -> str | None:
    """Why the parsed command must run in the client, if it must."""
    if command == "ingest" and "-" in args.files:
        return "it reads stdin"
    if command == "sql" and args.query is None and args.command is None and args.script is None:
        return "it reads stdin" if not stdin_tty else "it opens an interactive shell"
    if command == "pull":
        from odfd.sync.transport.url import looks_like_url

        if any(looks_like_url(ref) for ref in args.datasets):
            return "it pulls from a remote URL (no engine to share)"
    return None


class _FrameSink(io.RawIOBase):
    """One output stream of a job: each write becomes a frame to the client."""

    def __init__(self, job: Job, kind: bytes, tty: bool) -> None:
        self.job, self.kind, self.tty = job, kind, tty

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        payload = bytes(data)
        if payload:
            self.job.emit(self.kind, payload)
        return len(payload)

    def isatty(self) -> bool:
        return self.tty


class _NoInput(io.RawIOBase):
    """A job's stdin: empty (commands that read stdin are refused), a terminal if the client's is."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return 0

    def isatty(self) -> bool:
        return self.tty


class _Routed:
    """Stands for ``sys.stdout`` (or stderr, stdin) in the daemon: the running job's stream in a
    job's context, the daemon's own stream everywhere else."""

    def __init__(self, name: str, own: TextIO) -> None:
        self._name = name
        self._own = own

    def _target(self) -> TextIO:
        job = _job.get()
        return self._own if job is None else getattr(job, self._name)

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


class _JobLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """Notes each event loop a job creates (its ``asyncio.run``), so a cancel can reach it."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        job = _job.get()
        if job is not None:
            job.loops.append(loop)
        return loop


@dataclass
class Job:
    """One command running for a client."""

    id: str
    command: str
    argv: list[str]
    cwd: Path
    root: Path
    tty: dict[str, bool]
    encodings: dict[str, list[str]]
    loop: asyncio.AbstractEventLoop
    command_line: CommandLine
    frames: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    loops: list[asyncio.AbstractEventLoop] = field(default_factory=list)
    thread: threading.Thread | None = None
    accepted: bool = False
    finished: bool = False
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.stdout = self._text(STDOUT, "stdout")
        self.stderr = self._text(STDERR, "stderr")
        self.stdin = io.TextIOWrapper(io.BufferedReader(_NoInput(self.tty.get("stdin", False))))

    def _text(self, kind: bytes, name: str) -> io.TextIOWrapper:
        encoding, errors = (self.encodings.get(name) or ["utf-8", "strict"])[:2]
        sink = _FrameSink(self, kind, self.tty.get(name, False))
        return io.TextIOWrapper(sink, encoding=encoding, errors=errors, write_through=True)  # type: ignore[arg-type]  # a raw sink: every write goes out at once

    def accept(self) -> None:
        """Tell the client the command runs here (before its first output)."""
        if not self.accepted:
            self.accepted = True
            self._put(ACCEPTED, b"")

    def emit(self, kind: bytes, payload: bytes) -> None:
        """Queue a frame for the client (from any thread)."""
        self.accept()
        self._put(kind, payload)

    def _put(self, kind: bytes, payload: bytes) -> None:
        frame = FRAME_HEADER.pack(kind, len(payload)) + payload
        self.loop.call_soon_threadsafe(self.frames.put_nowait, frame)

    def prepare(self, args: argparse.Namespace) -> None:
        """Called by ``main`` once it has parsed the command line, before anything runs."""
        reason = refusal_of(self.command, args, self.tty.get("stdin", False))
        if reason is not None:
            raise Refused(reason)
        args.root = self.root if args.root is None else self.cwd / args.root
        for name in PATH_ARGUMENTS.get(self.command, ()):
            value = getattr(args, name, None)
            if isinstance(value, list):
                setattr(args, name, [v if v == "-" else str(self.cwd / v) for v in value])
            elif isinstance(value, Path):
                setattr(args, name, self.cwd / value)
        self.accept()

    def execute(self) -> None:
        """The worker thread: the command, then its exit frame."""
        _job.set(self)
        began = time.monotonic()
        code: int | None = 1
        try:
            code = self.command_line.main(self.argv, forward=False, prepare=self.prepare)
        except Refused as refused:
            self._put(REFUSED, str(refused).encode())
            code = None
        except SystemExit as done:
            code = _exit_code(done, self.stderr)
        except KeyboardInterrupt:
            self.stderr.write("interrupted\n")
            code = 130
        except BaseException:  # noqa: BLE001 - as uncaught in the CLI: a traceback, exit code 1
            traceback.print_exc(file=self.stderr)
            code = 1
        finally:
            try:
                self._finish(code, began)
            except KeyboardInterrupt:  # a cancel that raced the end: the end still goes out
                self._finish(code, began)

    def _finish(self, code: int | None, began: float) -> None:
        with self.lock:
            self.finished = True
        if code is not None:
            self.emit(EXIT, str(code).encode())
        log.info(
            "command for a client ended",
            extra={
                "job": self.id,
                "exit_code": "refused" if code is None else code,
                "seconds": round(time.monotonic() - began, 3),
            },
        )

    def cancel(self) -> None:
        """Ctrl-C for the command: KeyboardInterrupt in its event loop (or its thread)."""
        with self.lock:
            if self.finished or self.cancelled or self.thread is None:
                return
            self.cancelled = True
            running = [loop for loop in self.loops if loop.is_running()]
            if running:
                running[-1].call_soon_threadsafe(_interrupt)
            elif not self.loops and self.thread.ident is not None:  # still parsing
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self.thread.ident), ctypes.py_object(KeyboardInterrupt)
                )


def _interrupt() -> None:
    raise KeyboardInterrupt


def _exit_code(done: SystemExit, stderr: TextIO) -> int:
    if done.code is None:
        return 0
    if isinstance(done.code, int):
        return done.code
    print(done.code, file=stderr)
    return 1


class CommandRunner:
    """The ``/run`` routes of the admin API and the jobs they started."""

    def __init__(self, command_line: CommandLine | None = None) -> None:
        self.command_line = command_line
        """The CLI the jobs run (handed down by ``odfd daemon``); ``None``: none are run."""
        self.ready = False
        """Set once the daemon has started: before that its engine is not configured."""
        self.jobs: dict[str, Job] = {}

    def install(self) -> None:
        """Route ``sys.std*`` per job and note the jobs' event loops."""
        for name in ("stdout", "stderr", "stdin"):
            stream = getattr(sys, name)
            if not isinstance(stream, _Routed):
                setattr(sys, name, _Routed(name, stream))
        if not isinstance(asyncio.get_event_loop_policy(), _JobLoopPolicy):
            asyncio.set_event_loop_policy(_JobLoopPolicy())

    def uninstall(self) -> None:
        """Undo ``install`` where nobody replaced its objects since (tests swap ``sys.std*``)."""
        for name in ("stdout", "stderr", "stdin"):
            stream = getattr(sys, name)
            if isinstance(stream, _Routed):
                setattr(sys, name, stream._own)
        if isinstance(asyncio.get_event_loop_policy(), _JobLoopPolicy):
            asyncio.set_event_loop_policy(None)

    def warm_up(self, engines: Engines | None) -> None:
        """Blocking: what a client's first command would otherwise wait for here: the command
        modules, and (``engines`` given: they run on a server) the engines' clients."""
        try:
            if self.command_line is not None:
                self.command_line.warm_up(FORWARDED)
            if engines is not None:
                engines.start()
        except Exception as err:  # noqa: BLE001 - the first command meets (and reports) it
            log.warning("warming up for CLI commands failed", extra={"error": str(err)})

    async def close(self, grace: float) -> None:
        """Interrupt the commands still running (shutdown) and give them ``grace`` s to end."""
        jobs = [job for job in self.jobs.values() if not job.finished]
        for job in jobs:
            job.cancel()
        deadline = asyncio.get_running_loop().time() + grace
        for job in jobs:
            if job.thread is not None:
                left = max(deadline - asyncio.get_running_loop().time(), 0.0)
                await asyncio.to_thread(job.thread.join, left)

    def routes(self) -> list[tuple[str, str, Callable[[web.Request], Any]]]:
        return [
            ("POST", RUN_PATH, self.run),
            ("POST", RUN_PATH + "/{job}/cancel", self.cancel),
        ]

    def ping(self) -> dict[str, Any]:
        """What a client checks before sending a command (``via_daemon.route``)."""
        return {"version": __version__, "protocol": PROTOCOL, "env": relevant_env(os.environ)}

    async def cancel(self, request: web.Request) -> web.Response:
        _check_peer(request)
        job = self.jobs.get(request.match_info["job"])
        if job is not None:
            job.cancel()
        return web.json_response({"cancelled": job is not None})

    async def run(self, request: web.Request) -> web.StreamResponse:
        _check_peer(request)
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)
        command_line = self.command_line
        reason = (
            "the daemon was started without the command line: it runs no commands"
            if command_line is None
            else self._refusal(body)
        )
        if reason is not None or command_line is None:
            reason = reason or ""
            await response.write(FRAME_HEADER.pack(REFUSED, len(reason.encode())) + reason.encode())
            await response.write_eof()
            return response
        job = Job(
            id=str(body["job"]),
            command=str(body["command"]),
            argv=[str(a) for a in body["argv"]],
            cwd=Path(body["cwd"]),
            root=Path(body["root"]),
            tty={k: bool(v) for k, v in body.get("tty", {}).items()},
            encodings=body.get("encodings", {}),
            loop=asyncio.get_running_loop(),
            command_line=command_line,
        )
        self.jobs[job.id] = job
        job.thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(job.execute,),
            name=f"odfd-command-{job.command}",
            daemon=True,
        )
        log.info("running a command for a client", extra={"job": job.id, "argv": job.argv})
        try:
            job.thread.start()
            await self._relay(request, response, job)
        except (asyncio.CancelledError, ConnectionError):
            job.cancel()
            raise
        finally:
            if job.finished:
                self.jobs.pop(job.id, None)
            else:  # forgotten once its thread ends
                asyncio.get_running_loop().run_in_executor(None, self._forget, job)
        return response

    def _forget(self, job: Job) -> None:
        if job.thread is not None:
            job.thread.join()
        self.jobs.pop(job.id, None)

    async def _relay(self, request: web.Request, response: web.StreamResponse, job: Job) -> None:
        while True:
            try:
                frame = await asyncio.wait_for(job.frames.get(), CLIENT_CHECK_SECONDS)
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    job.cancel()  # the client went away (killed, or its socket closed)
                    return
                if job.thread is not None and not job.thread.is_alive() and job.frames.empty():
                    # the thread died without its exit frame (it never should): end the client
                    await response.write(FRAME_HEADER.pack(EXIT, 1) + b"1")
                    await response.write_eof()
                    return
                continue
            await response.write(frame)
            if frame[:1] in (EXIT, REFUSED):
                await response.write_eof()
                return

    def _refusal(self, body: dict[str, Any]) -> str | None:
        if body.get("protocol") != PROTOCOL or body.get("version") != __version__:
            return f"the daemon runs odfd {__version__} (protocol {PROTOCOL})"
        if not self.ready:
            return "the daemon is still starting"
        if body.get("command") not in FORWARDED:
            return f"the daemon does not run `odfd {body.get('command')}`"
        differ = env_difference(body.get("env", {}), relevant_env(os.environ))
        if differ:
            return "the daemon's environment differs in " + ", ".join(differ)
        running = sum(1 for job in self.jobs.values() if not job.finished)
        if running >= MAX_COMMANDS:
            return f"the daemon already runs {running} commands"
        return None


_PEER_CREDENTIALS = struct.Struct("3i")


def _check_peer(request: web.Request) -> None:
    """Only the daemon's own user may run commands in it: the socket's mode says so already;
    the peer's credentials say it again, should the socket's folder be shared."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is None or sock.family != socket.AF_UNIX:
        raise web.HTTPForbidden(text=json.dumps({"error": "commands run over the admin socket"}))
    _pid, uid, _gid = _PEER_CREDENTIALS.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
    )
    if uid != os.getuid():
        raise web.HTTPForbidden(text=json.dumps({"error": "another user's process"}))
