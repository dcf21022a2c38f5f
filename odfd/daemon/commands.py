"""Commands run by the daemon for a thin ``odfd`` client (``odfd.cli.via_daemon``).

``POST /run`` on the admin socket carries a typed request (``odfd.app.forwarding``: the JSON
form of one of the requests of ``odfd.app.ingest``, ``pull``, ``verify``, ``sql``,
``provenance``); the daemon calls that use case in its own event loop with the node it holds
(its warm engines included) and streams the use case's events and then its result, or its
error, back as JSON lines, which the client renders as a local run would.

A command is refused (the client then runs it itself) when it could not run here as it would
there: another odfd version, another workspace, a different ``ODFD_*`` environment, the daemon
still starting, or ``MAX_COMMANDS`` already running. ``POST /run/{job}/cancel`` (the client's
Ctrl-C) or the client going away cancels the task running the use case, and with it the engine
jobs it started (``odfd.app.engine_jobs``); a dataset's head moves only after
everything it reaches is stored, so nothing is half-committed.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from odfd import __version__
from odfd.app.engine_jobs import cancellable_engine_work
from odfd.app.events import Event, Recovered, announcing
from odfd.app.failures import describe_failure
from odfd.app.forwarding import (
    ACCEPTED,
    ERROR,
    EVENT,
    FORWARDED,
    INTERRUPTED,
    PROTOCOL,
    REFUSED,
    RESULT,
    RUN_PATH,
    Request,
    env_difference,
    relevant_env,
)
from odfd.app.ingest import IngestRequest, ingest
from odfd.app.provenance import ProvenanceRequest, trace
from odfd.app.pull import PullRequest, pull
from odfd.app.recovery import settle_orphans
from odfd.app.sql import SqlRequest, run_statements
from odfd.app.verify import ReportedProgress, VerifyRequest, result_json, verify

if TYPE_CHECKING:
    from odfd.app.events import EventSink
    from odfd.app.node import Node

log = logging.getLogger(__name__)

MAX_COMMANDS = 4
"""Commands run at once for clients; more are refused (each client then runs its own)."""
#: Seconds between checks that a silent command's client is still there.
CLIENT_CHECK_SECONDS = 1.0
#: What a client's first command would otherwise wait for while the daemon imports it.
WARM_MODULES = (
    "odfd.coordinator.ingest",
    "odfd.coordinator.pull",
    "odfd.coordinator.query",
    "odfd.app.result_formats",
    "odfd.app.csv_text",
    "protocol.query.render.columns",
    "verifier.audit",
    "verifier.report_text",
    "verifier.provenance.trace",
)

UseCase = Callable[[Any, Any, "EventSink"], Awaitable[Any]]
"""Runs a request on the node, emitting events; returns the result's JSON form."""


async def _ingest(node: Node, request: IngestRequest, sink: EventSink) -> None:
    await ingest(node, request, sink, around=announcing(sink))


async def _pull(node: Node, request: PullRequest, sink: EventSink) -> None:
    await pull(node, request, sink, around=announcing(sink))


async def _verify(node: Node, request: VerifyRequest, sink: EventSink) -> dict[str, Any]:
    report = await verify(node, request, ReportedProgress(sink))
    return await asyncio.to_thread(result_json, report)


async def _sql(node: Node, request: SqlRequest, sink: EventSink) -> None:
    await run_statements(node, request, sink)


async def _provenance(node: Node, request: ProvenanceRequest, sink: EventSink) -> dict[str, Any]:
    return (await trace(node, request, sink)).to_json()


#: Command -> its request type and what runs it.
USE_CASES: dict[str, tuple[type[Request], UseCase]] = {
    "ingest": (IngestRequest, _ingest),
    "pull": (PullRequest, _pull),
    "verify": (VerifyRequest, _verify),
    "sql": (SqlRequest, _sql),
    "provenance": (ProvenanceRequest, _provenance),
}
assert set(USE_CASES) == FORWARDED, "every forwarded command has its use case here"


class _Frames:
    """The frames of one command, queued for its client (an ``EventSink`` for the use case)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def put(self, frame: dict[str, Any]) -> None:
        """Queues ``frame`` (from the loop or a worker thread, in order)."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, frame)

    def emit(self, event: Event) -> None:
        self.put({"frame": EVENT, "event": event.to_json()})


@dataclass
class Job:
    """One command running for a client."""

    id: str
    command: str
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    began: float = field(default_factory=time.monotonic)

    def cancel(self) -> None:
        """Ctrl-C for the command: its task (and so its engine jobs) is cancelled."""
        if self.task is not None and not self.task.done() and not self.cancelled:
            self.cancelled = True
            self.task.cancel()


class CommandRunner:
    """The ``/run`` routes of the admin API and the jobs they started."""

    def __init__(self, node: Callable[[], Node]) -> None:
        self.node = node
        """The node commands run on: the daemon's current one (a reload swaps it)."""
        self.ready = False
        """Set once the daemon has started: before that its engine is not configured."""
        self.jobs: dict[str, Job] = {}

    def warm_up(self, start_engines: Callable[[], None] | None) -> None:
        """Blocking: what a client's first command would otherwise wait for here: the use cases'
        modules, and (``start_engines`` given: the node's engines run on a server) the engines'
        clients."""
        try:
            for module in WARM_MODULES:
                importlib.import_module(module)
            if start_engines is not None:
                start_engines()
        except Exception as err:  # noqa: BLE001 - the first command meets (and reports) it
            log.warning("warming up for CLI commands failed", extra={"error": str(err)})

    async def close(self, grace: float) -> None:
        """Cancel the commands still running (shutdown) and give them ``grace`` s to end."""
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        for job in self.jobs.values():
            job.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    def routes(self) -> list[tuple[str, str, Callable[[web.Request], Any]]]:
        return [
            ("POST", RUN_PATH, self.run),
            ("POST", RUN_PATH + "/{job}/cancel", self.cancel),
        ]

    def ping(self) -> dict[str, Any]:
        """What a client checks before sending a command (``via_daemon.route``)."""
        return {"version": __version__, "protocol": PROTOCOL, "env": relevant_env(os.environ)}

    async def cancel(self, request: web.Request) -> web.Response:
        job = self.jobs.get(request.match_info["job"])
        if job is not None:
            job.cancel()
        return web.json_response({"cancelled": job is not None})

    async def run(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        reason = self._refusal(body)
        parsed: Request | None = None
        if reason is None:
            kind, _ = USE_CASES[body["command"]]
            try:
                parsed = kind.from_json(body.get("request"))
            except (TypeError, ValueError) as err:
                reason = f"the daemon cannot read the request ({err})"
        if reason is not None or parsed is None:
            await _write(response, {"frame": REFUSED, "reason": reason})
            await response.write_eof()
            return response
        job = Job(str(body.get("job", "")), parsed.command)
        frames = _Frames()
        await _write(response, {"frame": ACCEPTED})
        log.info(
            "running a command for a client",
            extra={"job": job.id, "request": json.dumps(body["request"])},
        )
        job.task = asyncio.create_task(self._execute(job, parsed, frames))
        self.jobs[job.id] = job
        job.task.add_done_callback(lambda _: self.jobs.pop(job.id, None))
        try:
            await self._relay(request, response, job, frames)
        except (asyncio.CancelledError, ConnectionError):
            job.cancel()
            raise
        return response

    async def _execute(self, job: Job, request: Request, frames: _Frames) -> None:
        """The use case, then the frame that ends the command."""
        _, use_case = USE_CASES[request.command]
        node = self.node()
        try:
            # what a local run settles first (``workspace_args.report_orphans``), said alike
            for fixed in await settle_orphans(node.workspace):
                frames.emit(Recovered(fixed))
            async with cancellable_engine_work(f"command-{request.command}"):
                result = await use_case(node, request, frames)
            end: dict[str, Any] = {"frame": RESULT, "result": result}
        except asyncio.CancelledError:
            end = {"frame": INTERRUPTED}
        except Exception as err:  # noqa: BLE001 - every failure goes to the client, as a local run prints it
            message, code = describe_failure(err)
            end = {"frame": ERROR, "message": message, "exitCode": code}
            end["traceback"] = "".join(traceback.format_exception(err))
        frames.put(end)
        log.info(
            "command for a client ended",
            extra={
                "job": job.id,
                "end": end["frame"],
                "exit_code": end.get("exitCode", 0),
                "seconds": round(time.monotonic() - job.began, 3),
            },
        )

    async def _relay(
        self, request: web.Request, response: web.StreamResponse, job: Job, frames: _Frames
    ) -> None:
        while True:
            try:
                frame = await asyncio.wait_for(frames.queue.get(), CLIENT_CHECK_SECONDS)
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    job.cancel()  # the client went away (killed, or its socket closed)
                    return
                continue
            await _write(response, frame)
            if frame["frame"] in (RESULT, ERROR, INTERRUPTED):
                await response.write_eof()
                return

    def _refusal(self, body: dict[str, Any]) -> str | None:
        if body.get("protocol") != PROTOCOL or body.get("version") != __version__:
            return f"the daemon runs odfd {__version__} (protocol {PROTOCOL})"
        if not self.ready:
            return "the daemon is still starting"
        if body.get("command") not in FORWARDED:
            return f"the daemon does not run `odfd {body.get('command')}`"
        root = self.node().root
        if Path(str(body.get("root"))).resolve() != root.resolve():
            return f"the daemon serves the workspace {root}"
        differ = env_difference(body.get("env", {}), relevant_env(os.environ))
        if differ:
            return "the daemon's environment differs in " + ", ".join(differ)
        running = sum(1 for job in self.jobs.values() if job.task and not job.task.done())
        if running >= MAX_COMMANDS:
            return f"the daemon already runs {running} commands"
        return None


async def _write(response: web.StreamResponse, frame: dict[str, Any]) -> None:
    await response.write(json.dumps(frame).encode() + b"\n")
