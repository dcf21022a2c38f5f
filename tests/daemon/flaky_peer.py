"""A failing peer for fault and soak runs: a real HTTP reverse proxy in front of an odfd server
that fails a share of requests at random, in the ways real peers fail.

Run as ``python -m tests.daemon.flaky_peer UPSTREAM_URL PORT_FILE [--fail-rate 0.3] [--seed 1]``:
it writes the port it listens on to PORT_FILE. Each failing request is, at random, answered 503,
cut off (connection closed before any answer), truncated (half the body, then closed) or
corrupted (one byte of the body flipped, length kept). The Smart Transfer endpoints answer 404,
so clients fall back to the Simple Transfer Protocol through the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

MODES = ("503", "cut", "truncate", "corrupt")
REPO = Path(__file__).resolve().parents[2]


class FlakyPeer:
    def __init__(self, upstream: str, fail_rate: float, rng: random.Random) -> None:
        self.upstream = upstream.rstrip("/")
        self.fail_rate = fail_rate
        self.rng = rng
        self.session: aiohttp.ClientSession | None = None
        self.failures = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.endswith(("/pull", "/push")):
            raise web.HTTPNotFound(text="no smart transfer through this peer")
        mode = self.rng.choice(MODES) if self.rng.random() < self.fail_rate else None
        if mode == "503":
            self.failures += 1
            return web.Response(status=503, text="peer failing")
        if mode == "cut":
            self.failures += 1
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        assert self.session is not None
        async with self.session.request(
            request.method, self.upstream + request.path_qs, headers=_forwarded(request.headers)
        ) as upstream:
            body = await upstream.read()
            headers = {
                k: v
                for k, v in upstream.headers.items()
                if k.lower() in ("content-type", "etag", "cache-control", "accept-ranges")
            }
        if mode == "corrupt" and body and upstream.status == 200:
            self.failures += 1
            flipped = bytearray(body)
            flipped[self.rng.randrange(len(flipped))] ^= 0xFF
            body = bytes(flipped)
        if mode == "truncate" and len(body) > 1 and upstream.status == 200:
            self.failures += 1
            response = web.StreamResponse(status=200, headers=headers)
            response.content_length = len(body)
            await response.prepare(request)
            await response.write(body[: len(body) // 2])
            assert request.transport is not None
            request.transport.close()
            return response
        return web.Response(status=upstream.status, body=body, headers=headers)


def _forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    keep = ("range", "if-none-match", "if-range", "authorization")
    return {k: v for k, v in headers.items() if k.lower() in keep}


async def serve(upstream: str, port_file: Path, fail_rate: float, seed: int) -> None:
    peer = FlakyPeer(upstream, fail_rate, random.Random(seed))
    async with aiohttp.ClientSession() as session:
        peer.session = session
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", peer.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.rename(port_file)
        await asyncio.Event().wait()


class FlakyPeerProcess:
    """The proxy as a child process (``start()`` returns its base URL; ``stop()`` kills it)."""

    def __init__(self, upstream: str, folder: Path, fail_rate: float, seed: int = 1) -> None:
        self.args = [upstream, str(folder / f"flaky-peer-{seed}.port"), "--fail-rate"]
        self.args += [str(fail_rate), "--seed", str(seed)]
        self.port_file = folder / f"flaky-peer-{seed}.port"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> str:
        self.port_file.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.daemon.flaky_peer", *self.args],
            cwd=REPO,
            stderr=subprocess.DEVNULL,  # the connections it cuts on purpose log tracebacks
        )
        deadline = time.monotonic() + timeout
        while not self.port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"flaky peer did not start (exit {self.process.poll()})")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port_file.read_text()}/"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("upstream")
    parser.add_argument("port_file", type=Path)
    parser.add_argument("--fail-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(serve(args.upstream, args.port_file, args.fail_rate, args.seed))


if __name__ == "__main__":
    main()
