"""Commands that need no engine load none: ``--help``, ``list``, ``log``, ``status``, ``tail`` and
``data hash``
import neither Spark (pyspark, py4j) nor DataFusion, nor pandas (Spark Connect's companion), nor
the HTTP and IPFS clients (aiohttp, ipfshttpclient: only a daemon's socket or a remote needs them).
A pull of a DataFusion derivative loads DataFusion and nothing it does not run: no Spark, no
ingest readers or fetchers, no compaction, no verification report."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.cli.main import COMMANDS, ENV_PREFIX, build_parser
from odfd.cli.workspace_args import WORKSPACE_ENV
from odfd.config import ENV_PREFIX as CONFIG_ENV_PREFIX

REPO = Path(__file__).resolve().parents[2]
ENGINE_MODULES = ("pyspark", "py4j", "datafusion", "pandas")
CLIENT_MODULES = ("aiohttp", "ipfshttpclient", "requests")

#: Modules a DataFusion derivative's pull has no use for (Spark, its engine and checkpoints, replication,
#: ingest, compaction, the verification report).
NOT_FOR_A_DATAFUSION_PULL = (
    "pyspark",
    "py4j",
    *CLIENT_MODULES,
    "odfd.ingest",
    "odfd.coordinator.ingest",
    "odfd.coordinator.compact",
    "odfd.sync.pull",
    "verifier.report",
    "verifier.engine.spark.checkpoint",
    "verifier.engine.spark.engine",
)

_PROBE = """
import json, sys
from odfd.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    """Every module ``odfd ARGV`` has imported by the time it ends."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env=env,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return list(report["loaded"])


def _loaded(*argv: str) -> list[str]:
    """The top-level packages ``odfd ARGV`` imported."""
    return sorted({name.split(".")[0] for name in _modules(*argv)})


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
    # the dataset's folder read as files, the catalog with plain sqlite3; summary lines decode
    # blocks but print no YAML and check no signature
    "log": ("asyncio", "aiosqlite", "ssl", "nacl", "yaml"),
    # no daemon: the catalog's rows read with plain sqlite3, no HTTP client; the datasets' IPNS
    # names written out without multiformats or protobuf (google)
    "status": ("asyncio", "aiosqlite", "ssl", "aiohttp", "yaml", "multiformats", "google"),
}


@pytest.mark.parametrize("argv", [["list"], ["log", "match.scores"], ["status"]])
def test_a_catalog_read_builds_no_transports(root: Path, argv: list[str]) -> None:
    """A command that only reads the catalog gets the node's layout and configuration
    (``NodeView``), never its transports or login store (issue 30's <= 1.05x of the baseline)."""
    modules = _modules(*argv, "--root", str(root))
    assert "odfd.app.node" in modules
    unneeded = ("odfd.sync.transport", "odfd.app.login_store")
    assert [name for name in modules if name.startswith(unneeded)] == []


def test_data_hash_loads_no_engine_nor_pandas(tmp_path: Path) -> None:
    """Hashing strings with nulls and dictionary columns is Arrow and NumPy alone (``pa.array``
    of a NumPy array would load pandas: 0.3 s of the command's start-up)."""
    path = tmp_path / "slice.parquet"
    words = pa.array(["a", None, "bcd"] * 1000)
    pq.write_table(pa.table({"w": words, "d": words, "n": pa.array([1, None, 3] * 1000)}), path)
    loaded = _loaded("data", "hash", str(path))
    assert [name for name in loaded if name in ENGINE_MODULES] == []


def test_without_odfd_variables_no_command_loads_the_configuration_for_its_check(
    tmp_path: Path,
) -> None:
    """``odfd data hash`` reads no configuration: the check for misspelled ``ODFD_*`` variables
    loads the configuration module (~0.06 s of CPU) only when one is set."""
    path = tmp_path / "slice.parquet"
    pq.write_table(pa.table({"n": [1, 2, 3]}), path)
    env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
    assert "odfd.config" not in _modules("data", "hash", str(path), env=env)
    assert ENV_PREFIX == CONFIG_ENV_PREFIX


def test_each_commands_summary_is_its_own_help() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help for action in subparsers._choices_actions}
    assert helps == {name: summary for name, (_, summary) in COMMANDS.items()}


def test_the_workspace_variable_is_storages() -> None:
    from storage.layout import WORKSPACE_ENV as STORAGE_WORKSPACE_ENV

    assert WORKSPACE_ENV == STORAGE_WORKSPACE_ENV


def test_a_datafusion_pull_loads_only_what_it_runs(tmp_path: Path) -> None:
    from storage.workspace import Workspace
    from tests.verifier.builders import DOUBLED_SNAPSHOT, root_with_slices

    root = tmp_path / "ws"

    async def build() -> None:
        async with await Workspace.init(root) as workspace:
            await root_with_slices(workspace, "nums", [[1, 2, 3]])

    asyncio.run(build())
    (tmp_path / "doubled.yaml").write_text(DOUBLED_SNAPSHOT)
    added = subprocess.run(
        [sys.executable, "-m", "odfd", "add", str(tmp_path / "doubled.yaml"), "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert added.returncode == 0, added.stderr

    modules = _modules("pull", "doubled", "--root", str(root))
    assert "datafusion" in modules
    assert "verifier.engine.datafusion.engine" in modules
    unneeded = [
        name
        for name in modules
        if any(name == lazy or name.startswith(lazy + ".") for lazy in NOT_FOR_A_DATAFUSION_PULL)
    ]
    assert unneeded == []
