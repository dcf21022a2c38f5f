"""The command surface users expect from the reference: global options, ``-o`` everywhere,
completions, ``config``, ``system``; and answers that need no engine never start one."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odfd.cli.main import build_parser
from odfd.cli.sql_script import shell_statements, split_statements
from tests.cli.helpers import MANIFESTS, fingerprint, run

REPO = Path(__file__).resolve().parents[2]


def _odfd_in_fresh_process(
    code: str, *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> list[str]:
    """Runs ``code`` in a new interpreter (so nothing is imported yet) and returns its lines."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=True,
    )
    return result.stdout.decode().splitlines()


def test_an_empty_stdin_ingest_answers_without_spark(workspace_root: Path) -> None:
    lines = _odfd_in_fresh_process(
        "import sys\n"
        "from odfd.cli.main import main\n"
        f"code = main(['ingest', '--root', {str(workspace_root)!r}, 'test.root.push-json', '--source-name', 'api', '-'])\n"
        "from verifier.engine.spark import session\n"
        "print(code, session.is_running())\n",
    )
    assert lines[-1] == "0 False"
    assert list((workspace_root / "run").iterdir()) == []  # the stdin copy is gone too


def test_listing_commands_do_not_load_spark(workspace_root: Path) -> None:
    root = str(workspace_root)
    lines = _odfd_in_fresh_process(
        "import sys\n"
        "from odfd.cli.main import main\n"
        f"for argv in (['list', '-w'], ['log', 'test.root.mqtt'], ['tail', 'test.root.mqtt'],\n"
        f"             ['config', 'list'], ['system', 'info']):\n"
        f"    assert main(['-q', *argv, '--root', {root!r}]) == 0, argv\n"
        "print('pyspark.sql' in sys.modules)\n"
    )
    assert lines[-1] == "False"


def test_global_options_before_or_after_the_command(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("odfd ")
    manifest = str(MANIFESTS / "root-ethereum.yaml")
    code, _, err = run(capsys, "add", "--root", str(workspace_root), "--name", "x", manifest)
    assert code == 0 and err.startswith("Added: x ")
    for argv in (
        ("-q", "add", "--root", str(workspace_root), "--name", "y", manifest),
        ("add", "-q", "--root", str(workspace_root), "--name", "z", manifest),
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0 and out == "" and err == ""
    # errors still show under --quiet, never coloured when not on a terminal
    code, _, err = run(capsys, "-q", "--no-color", "tail", "--root", str(workspace_root), "nosuch")
    assert code == 1 and err.startswith("error: dataset nosuch is not in the workspace")
    assert "\033[" not in err
    code, _, err = run(capsys, "tail", "-v", "--root", str(workspace_root), "nosuch")
    assert code == 1 and err.startswith("Traceback")
    assert err.splitlines()[-1] == f"error: dataset nosuch is not in the workspace {workspace_root}"
    # --root too, before the command (the value is not taken for the command) or after it
    listed = [
        run(capsys, *argv)
        for argv in (
            ("--root", str(workspace_root), "list", "-o", "json"),
            (f"--root={workspace_root}", "list", "-o", "json"),
            ("list", "-o", "json", "--root", str(workspace_root)),
        )
    ]
    assert [code for code, _, _ in listed] == [0, 0, 0]
    assert len({out for _, out, _ in listed}) == 1 and '"x"' in listed[0][1]
    code, out, _ = run(
        capsys, "--root", str(workspace_root), "new", "n", "--root", "--output-path", "-"
    )
    assert code == 0 and "kind: Root" in out  # `new --root` still means a root dataset


def test_every_listing_command_takes_the_same_output_format_names() -> None:
    parser = build_parser()
    listings = {
        ("list",): {"table", "csv", "json", "ndjson", "yaml"},
        ("log",): {"table", "yaml", "json", "ndjson"},
        ("tail",): {"table", "csv", "json", "ndjson", "yaml", "parquet"},
        ("sql",): {"table", "csv", "json", "ndjson", "yaml", "parquet"},
        ("config", "list"): {"table", "csv", "json", "ndjson", "yaml"},
        ("system", "gc"): {"table", "csv", "json", "ndjson", "yaml"},
        ("system", "diagnose"): {"table", "csv", "json", "ndjson", "yaml"},
        ("system", "info"): {"table", "json", "yaml"},
    }
    for path, formats in listings.items():
        sub = parser
        for word in path:
            sub = next(
                a for a in sub._actions if isinstance(a, argparse._SubParsersAction)
            ).choices[word]
        (option,) = [a for a in sub._actions if "--output-format" in a.option_strings]
        assert option.choices is not None
        assert {"-o", "--output-format", "--output"} <= set(option.option_strings), path
        assert set(option.choices) == formats, path


def test_bash_completion_completes_commands_actions_choices_and_datasets(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, script, _ = run(capsys, "completions", "bash")
    assert code == 0 and "complete -F _odfd odfd" in script
    probe = "\n".join(
        [
            script,
            'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _odfd; '
            'echo "${COMPREPLY[*]}"; }',
            "complete_words odfd li",
            "complete_words odfd system d",
            "complete_words odfd tail -o nd",
            "complete_words odfd tail test.root.m",
        ]
    )
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        ["bash", "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "ODFD_HOME": str(workspace_root),
        },
        check=True,
    )
    assert result.stdout.splitlines() == ["list", "diagnose", "ndjson", "test.root.mqtt"]
    for shell in ("zsh", "fish"):
        code, script, _ = run(capsys, "completions", shell)
        assert code == 0 and "system" in script and "output-format" in script


def test_config_get_set_list_use_the_keys_of_config_toml(
    workspace_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("ODFD_")]:
        monkeypatch.delenv(name)  # only the file and the one variable below count
    ws = ("--root", str(workspace_root))
    config = workspace_root / "config.toml"
    assert run(capsys, "config", "set", *ws, "server.port", "9000")[0] == 0
    assert run(capsys, "config", "set", *ws, "sync.default_interval", "5m")[0] == 0
    assert run(capsys, "config", "set", *ws, "spark.driver_memory", "2g")[0] == 0
    assert "[server]\nport = 9000\n" in config.read_text()
    assert run(capsys, "config", "get", *ws, "server.port")[1] == "9000\n"
    assert run(capsys, "config", "get", *ws, "sync.default_interval", "-o", "json")[1] == '"5m"\n'
    monkeypatch.setenv("ODFD_SERVER_ADDRESS", "0.0.0.0")
    _, out, _ = run(capsys, "config", "list", *ws, "-o", "json")
    assert {row["key"]: (row["value"], row["source"]) for row in json.loads(out)} == {
        "server.port": (9000, "file"),
        "sync.default_interval": ("5m", "file"),
        "spark.driver_memory": ("2g", "file"),
        "server.address": ("0.0.0.0", "environment ODFD_SERVER_ADDRESS"),
    }
    _, out, _ = run(capsys, "config", "list", *ws, "--with-defaults", "-o", "json")
    assert {"audit.interval", "ipfs.api", "spark.master"} <= {r["key"] for r in json.loads(out)}

    before = config.read_bytes()
    code, _, err = run(capsys, "config", "set", *ws, "server.port", "eighty")
    assert code == 1 and err.strip() == "error: server.port: expected an integer, got 'eighty'"
    code, _, err = run(capsys, "config", "set", *ws, "server.prot", "1")
    assert code == 1 and "unknown setting 'server.prot' (did you mean server.port?)" in err
    code, _, err = run(capsys, "config", "set", *ws, "spark.master", "sprak://x")
    assert code == 1 and "is not a Spark master URL" in err
    assert config.read_bytes() == before
    assert run(capsys, "config", "set", *ws, "server.port")[0] == 0  # no value: back to default
    assert run(capsys, "config", "get", *ws, "server.port")[1] == "8080\n"
    assert "port" not in config.read_text()


def test_system_info_and_diagnose(workspace_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "system", "info", "--root", str(workspace_root), "-o", "json")
    (info,) = json.loads(out)
    assert code == 0 and info["workspace"] == str(workspace_root) and info["datasets"] == 11
    before = fingerprint(workspace_root)
    code, out, _ = run(capsys, "system", "diagnose", "--root", str(workspace_root), "-o", "json")
    checks = {row["check"]: row for row in json.loads(out)}
    assert set(checks) == {
        "config",
        "environment",
        "java",
        "spark",
        "catalog",
        "datasets",
        "disk",
        "leftovers",
        "ipfs",
    }
    assert code == (0 if all(c["ok"] or not c["required"] for c in checks.values()) else 1)
    assert checks["catalog"]["ok"] and checks["datasets"]["ok"] and checks["java"]["ok"]
    assert not checks["ipfs"]["required"]
    assert fingerprint(workspace_root) == before
    # a dataset folder removed by hand is a finding, with the fix
    folder = next((workspace_root / "datasets").iterdir())
    (folder / "refs" / "head").unlink()
    code, out, _ = run(capsys, "system", "diagnose", "--root", str(workspace_root))
    (line,) = [line for line in out.splitlines() if line.startswith("datasets")]
    assert code == 1 and "PROBLEM" in line and "run `odfd repair`" in line


def test_sql_statements_split_at_semicolons_outside_quotes_and_comments() -> None:
    text = "SELECT ';' AS a; -- a; comment\nSELECT `b;c` FROM t /* x; */ ;\n\n;  "
    assert split_statements(text) == [
        "SELECT ';' AS a",
        "-- a; comment\nSELECT `b;c` FROM t /* x; */",
    ]
    lines = iter(["SELECT 1", "  + 1;  SELECT", "2;", "\\q", "SELECT 3;"])
    prompts: list[str] = []

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        return next(lines)

    assert list(shell_statements(read_line)) == ["SELECT 1\n  + 1", "SELECT\n2"]
    assert prompts == ["odfd> ", "...> ", "...> ", "odfd> "]
    unfinished = iter(["SELECT 4"])

    def until_eof(prompt: str) -> str:
        try:
            return next(unfinished)
        except StopIteration:
            raise EOFError from None

    assert list(shell_statements(until_eof)) == ["SELECT 4"]


def test_reference_spellings_of_options(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    code, _, err = run(capsys, "init", *ws, "--exists-ok")
    assert code == 0 and err.startswith("An odfd workspace exists already")
    assert run(capsys, "init", *ws)[0] == 1
    _, out, _ = run(capsys, "log", *ws, "-f", "source", "-o", "ndjson", "test.root.url-csv")
    kinds = [json.loads(line)["block"]["content"]["event"]["kind"] for line in out.splitlines()]
    assert kinds == ["SetVocab", "SetPollingSource", "Seed"]
    code, out, _ = run(capsys, "verify", *ws, "--integrity", "test.root.url-csv")
    assert code == 0 and "all verified" in out
    remote = f"file://{tmp_path / 'remote'}"
    assert run(capsys, "push", *ws, "test.root.mqtt", remote)[0] == 0
    code, _, err = run(capsys, "push", *ws, "-f", "test.root.mqtt", "--to", remote)
    assert code == 0 and "is up to date" in err
    # --yes is global, like the reference's: before or after the command
    assert run(capsys, "-y", "delete", *ws, "test.root.mqtt")[0] == 0
    assert run(capsys, "delete", *ws, "--yes", "test.root.ethereum")[0] == 0
    _, out, _ = run(capsys, "list", *ws, "-o", "csv")
    assert "test.root.mqtt" not in out and "test.root.ethereum" not in out
