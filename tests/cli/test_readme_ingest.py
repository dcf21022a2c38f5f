"""The README's HTTP ingest and upload steps, run as written (bash and curl, from the repository's
root) against ``odfd serve`` of the README's own example: only the node's URL and the
``PUSH_TOKEN`` placeholder are filled in, and the upload's two answered values set as it says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.cli.helpers import odfd_serve

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "leaderboard" / "data"
TOKEN = "a-push-token-of-the-readme-node"


def _block(marker: str) -> list[str]:
    """The README's ``sh`` block holding ``marker``, as its commands (continued lines joined)."""
    blocks = re.findall(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    [block] = [b for b in blocks if marker in b]
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()]


def _bash(commands: list[str], url: str, env: dict[str, str] | None = None) -> str:
    script = "\n".join(commands).replace("http://node:8080/", url).replace("PUSH_TOKEN", TOKEN)
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=REPO, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(url: str) -> int:
    with urllib.request.urlopen(url + "match.scores/tail?limit=1000", timeout=30) as reply:
        return len(json.loads(reply.read())["data"])


def _lines(name: str) -> int:
    return len((DATA / name).read_text().splitlines())


def test_the_readme_ingest_and_upload_steps_work_as_written(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    odfd = [sys.executable, "-m", "odfd.cli.main", "-q"]
    subprocess.run([*odfd, "init", "--root", str(root)], check=True)
    subprocess.run(
        [*odfd, "add", "--root", str(root), str(REPO / "examples/leaderboard")], check=True
    )
    with (root / "config.toml").open("a") as config:
        config.write(f'\n[server]\npush_tokens = ["{TOKEN}"]\n')
    with odfd_serve(root) as (url, _):
        ingest = _block("/match.scores/ingest -H")
        assert "message" not in _bash(ingest, url)
        assert _rows(url) == _lines("1.ndjson")

        upload = _block("upload/prepare")
        setup, prepare, rest = upload[0], upload[1], upload[2:]
        answer = json.loads(_bash([setup, prepare], url))
        env = {"PATH": "/usr/bin:/bin", "UPLOAD_URL": answer["uploadUrl"]}
        env["UPLOAD_TOKEN"] = answer["uploadToken"]
        assert "message" not in _bash([setup, *rest], url, env)
        assert _rows(url) == _lines("1.ndjson") + _lines("2.ndjson")
