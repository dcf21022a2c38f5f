"""A query never holds the server's event loop: not the node's first (DataFusion and the
renderers are loaded in worker threads as the server starts, before it listens, not on the loop
when the first query comes), nor one stopped at its time limit (stopping it and dropping its execution happen
off the loop), nor two stopped at once while a transfer is served. Measured in a fresh
interpreter (``loop_probe``) with the daemon tests' check: asyncio's debug mode reports every
step that ran longer than 100 ms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.daemon.loop_check import SLOW_CALLBACK_SECONDS
from tests.daemon.processes import REPO


def test_no_query_holds_the_event_loop(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.query_api.loop_probe", str(tmp_path / "ws")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["preloaded"] is False, "DataFusion was loaded before the server started"
    assert result["first"] == [200, {"output": {"data": [{"total": 10}], "dataFormat": "JsonAoS"}}]
    assert result["stopped"] == 400
    assert result["together"] == [400, 400, 200]
    assert result["after"] == result["first"]
    assert not result["slow"], (
        f"the event loop was held for more than {SLOW_CALLBACK_SECONDS * 1000:.0f} ms:\n"
        + "\n".join(result["slow"])
    )
