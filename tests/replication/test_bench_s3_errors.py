"""``scripts/bench_s3.py`` stops on an S3 error: it exits with the error's first line, having
closed what it opened (an open workspace's catalog thread once kept the process waiting for
ever) and killed the SeaweedFS processes it started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fixtures.proc_state import process_alive

_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# Runs the benchmark's main() with the dataset generator of its first step replaced by one that
# uses the step's workspace, notes the PIDs of SeaweedFS (this process's children) and fails as
# a dead S3 server makes a step fail.
_FAILING_RUN = """
import asyncio, os, sys
from pathlib import Path
sys.argv = ["bench_s3.py", "--dir", sys.argv[1]]
sys.path.insert(0, {scripts!r})
import bench_s3
from storage.s3_client import S3Error

async def failing_create_root(workspace, alias, **options):
    await workspace.catalog.list_datasets()
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
                print(stat.parent.name, flush=True)
        except OSError:
            pass
    raise S3Error("http://127.0.0.1:1/bench-big/big/data/x: the S3 server cannot be reached")

bench_s3.create_root = failing_create_root
asyncio.run(bench_s3.main())
"""


def test_bench_s3_exits_on_an_s3_error_and_stops_seaweedfs(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _FAILING_RUN.format(scripts=str(_SCRIPTS)), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=_SCRIPTS.parent,
    )
    assert run.returncode == 1, run.stderr
    assert "bench_s3: stopped by an S3 error: http://127.0.0.1:1/bench-big" in run.stderr
    assert "Traceback" not in run.stderr
    pids = [int(pid) for pid in run.stdout.split()]
    assert len(pids) == 2
    for pid in pids:
        assert not process_alive(pid), f"SeaweedFS {pid} still runs"
    assert list(tmp_path.iterdir()) == []  # its work folder removed
