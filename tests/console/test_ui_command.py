"""``odfd ui`` on a workspace with no daemon: it serves the console on loopback and prints a URL
whose fragment carries a one-time token that unlocks what a read token may do."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp

from storage.workspace import Workspace
from tests.console.pipelines import three_levels

REPO = Path(__file__).resolve().parents[2]


async def test_odfd_ui_serves_the_workspace_with_a_one_time_token(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    async with await Workspace.init(root) as workspace:
        await three_levels(workspace)
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "odfd", "ui", "--no-browser", "--root", str(root)),
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line.startswith("console: http://127.0.0.1:") and "/ui/#token=" in line
        page, _, token = line.split(" ", 1)[1].strip().partition("#token=")
        api = page.removesuffix("ui/") + "ui/api/"
        async with aiohttp.ClientSession() as http:
            async with http.get(api + "datasets") as response:
                body = await response.json()
                assert body["total"] == 3
            async with http.get(api + "node") as response:
                assert (await response.json())["tokens"] == {"read": False, "admin": False}
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get(api + "node", headers=headers) as response:
                assert (await response.json())["tokens"] == {"read": True, "admin": False}
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)
