"""Commands that need no engine load none: ``--help``, ``list``, ``log``, ``status`` and ``tail``
import neither Spark (pyspark, py4j) nor DataFusion, nor pandas (Spark Connect's companion), nor
the HTTP and IPFS clients (aiohttp, ipfshttpclient: only a daemon's socket or a remote needs them)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from odfd.cli.main import COMMANDS, build_parser
from odfd.cli.workspace_args import WORKSPACE_ENV

REPO = Path(__file__).resolve().parents[2]
ENGINE_MODULES = ("pyspark", "py4j", "datafusion", "pandas")
CLIENT_MODULES = ("aiohttp", "ipfshttpclient", "requests")

_PROBE = """
import json, sys
from odfd.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as done:
    code = done.code
loaded = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _loaded(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return report["loaded"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lazy") / "ws"
    for argv in (["init"], ["add", str(REPO / "examples" / "leaderboard")]):
        subprocess.run(
            [sys.executable, "-m", "odfd", *argv, "--root", str(root)],
            check=True,
            capture_output=True,
            cwd=REPO,
        )
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["list"],
        ["log", "match.scores"],
        ["status"],
        ["tail", "match.scores"],
        ["engine", "status"],
        ["provenance", "--help"],
    ],
)
def test_commands_without_an_engine_load_none(root: Path, argv: list[str]) -> None:
    extra = [] if argv == ["--help"] else ["--root", str(root)]
    loaded = _loaded(*argv, *extra)
    assert "odfd" in loaded
    assert [name for name in loaded if name in ENGINE_MODULES] == []
    assert [name for name in loaded if name in CLIENT_MODULES] == []
    assert [name for name in loaded if name in NOT_LOADED.get(argv[0], ())] == []


#: What else a command must not load, beyond engines and clients (start-up cost, issue 14).
NOT_LOADED = {
    # building the parser runs nothing: no event loop, not even the config or dataclasses
    "--help": ("asyncio", "dataclasses", "tomllib", "storage"),
    # the catalog read with plain sqlite3: no event loop (asyncio loads ssl, sockets, logging)
    "list": ("asyncio", "aiosqlite", "ssl", "nacl", "yaml"),
    # summary lines decode blocks but print no YAML and check no signature
    "log": ("nacl", "yaml"),
}


def test_each_commands_summary_is_its_own_help() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help for action in subparsers._choices_actions}
    assert helps == {name: summary for name, (_, summary) in COMMANDS.items()}


def test_the_workspace_variable_is_storages() -> None:
    from storage.layout import WORKSPACE_ENV as STORAGE_WORKSPACE_ENV

    assert WORKSPACE_ENV == STORAGE_WORKSPACE_ENV
