"""The reference's commands that odfd now has: ``repo``, ``repo alias``, ``push --all/--recursive
/--to``, ``pull --all`` and ``REPO/NAME``, ``reset``, ``new``, ``search`` (metadata-only datasets
over ``file://``, so no engine is needed)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli.helpers import fingerprint, run


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict]:
    code, out, err = run(capsys, *argv, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def test_repositories_and_aliases(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    hub = f"file://{tmp_path / 'hub'}"
    assert run(capsys, "repo", "add", *ws, "hub", hub)[0] == 0
    code, _, err = run(capsys, "repo", "add", *ws, "hub", "file:///elsewhere")
    assert code == 1 and "a repository named hub exists already" in err
    code, _, err = run(capsys, "repo", "add", *ws, "a/b", hub)
    assert code == 1 and "'a/b' is not a repository name" in err
    code, _, err = run(capsys, "repo", "add", *ws, "other", "not a url")
    assert code == 1 and "is not a URL" in err
    assert _json(capsys, "repo", "list", *ws) == [{"name": "hub", "url": hub}]

    mqtt = "test.root.mqtt"
    assert run(capsys, "repo", "alias", "add", *ws, mqtt, "hub/mqtt", "--push")[0] == 0
    assert run(capsys, "repo", "alias", "add", *ws, mqtt, "http://peer:8080/mqtt")[0] == 0
    assert _json(capsys, "repo", "alias", "list", *ws, mqtt) == [
        {"dataset": mqtt, "kind": kind, "remote": remote, "synced_head": None, "synced_at": None}
        for kind, remote in (("pull", "http://peer:8080/mqtt"), ("push", f"{hub}/mqtt"))
    ]
    # kept where the reference keeps them, so `odfd repair` and kamu see them too
    _, out, _ = run(capsys, "list", *ws, "-o", "json")
    folder = (
        workspace_root
        / "datasets"
        / next(r["id"] for r in json.loads(out) if r["alias"] == mqtt).removeprefix("did:odf:")
    )
    assert f"{hub}/mqtt" in (folder / "info" / "config").read_text()
    code, _, err = run(capsys, "repo", "alias", "delete", *ws, mqtt, "http://peer:8080/other")
    assert code == 1 and "has no pull remote http://peer:8080/other" in err
    assert run(capsys, "repo", "alias", "delete", *ws, mqtt, "--all")[0] == 0
    assert _json(capsys, "repo", "alias", "list", *ws) == []

    code, _, err = run(capsys, "repo", "delete", *ws, "hub", "nosuch")
    assert code == 1 and "no repository named nosuch; nothing was deleted" in err
    assert run(capsys, "repo", "delete", *ws, "--all")[0] == 0
    assert _json(capsys, "repo", "list", *ws) == []


def test_push_all_recursive_and_to_a_repository_then_pull_all(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    hub = tmp_path / "hub"
    before = fingerprint(workspace_root / "datasets")
    code, _, err = run(capsys, "push", *ws, "--all")
    assert code == 1 and "no push remote for test.deriv.joined" in err
    assert "nothing was pushed" in err and not hub.exists()
    assert fingerprint(workspace_root / "datasets") == before

    assert run(capsys, "repo", "add", *ws, "hub", f"file://{hub}")[0] == 0
    code, _, err = run(capsys, "push", *ws, "test.deriv.summary", "--recursive", "--to", "hub")
    assert code == 0, err
    pushed = [line.split()[1].rstrip(":") for line in err.splitlines()]
    assert pushed == ["test.root.url-csv", "test.deriv.summary"]  # inputs first
    assert sorted(p.name for p in hub.iterdir()) == ["test.deriv.summary", "test.root.url-csv"]
    code, _, err = run(capsys, "push", *ws, "--all", "--to", "hub")
    assert code == 0 and len(list(hub.iterdir())) == 11
    assert err.count("Skipped: ") == 2 and err.count("Pushed: ") == 9
    # the long-standing form still works, and remembers the remote for a bare `push DATASET`
    assert run(capsys, "push", *ws, "test.root.mqtt", f"file://{tmp_path / 'solo'}")[0] == 0
    code, _, err = run(capsys, "push", *ws, "test.root.mqtt")
    assert code == 0 and f"file://{tmp_path / 'solo'} is up to date" in err
    # each remote shows the head both sides had after the last push or pull between them
    head = _json(capsys, "log", *ws, "test.root.mqtt")[0]["hash"]
    remotes = _json(capsys, "repo", "alias", "list", *ws, "test.root.mqtt")
    assert [(r["kind"], r["remote"], r["synced_head"]) for r in remotes] == [
        ("push", f"file://{hub}/test.root.mqtt", head),
        ("push", f"file://{tmp_path / 'solo'}", head),
    ]
    solo = remotes[1]
    assert solo["synced_at"].endswith("Z") and solo["synced_at"] >= remotes[0]["synced_at"]
    _, table, _ = run(capsys, "repo", "alias", "list", *ws, "test.root.mqtt")
    assert table.splitlines()[0].split("  ")[-2:] == ["Synced head", "Synced at"]
    assert table.splitlines()[-1].split()[-3:] == [
        head[-8:],
        *solo["synced_at"][:19].split("T"),
    ]

    mirror = tmp_path / "mirror"
    assert run(capsys, "init", "--root", str(mirror))[0] == 0
    mirror_ws = ("--root", str(mirror))
    assert run(capsys, "repo", "add", *mirror_ws, "hub", f"file://{hub}")[0] == 0
    code, _, err = run(capsys, "pull", *mirror_ws, "hub/test.root.ethereum")
    assert code == 0 and err.startswith("Updated: test.root.ethereum from file://")
    pulled = _json(capsys, "repo", "alias", "list", *mirror_ws)
    assert [(r["kind"], r["remote"], r["synced_head"]) for r in pulled] == [
        (
            "pull",
            f"file://{hub}/test.root.ethereum",
            _json(capsys, "log", *ws, "test.root.ethereum")[0]["hash"],
        )
    ]
    code, _, err = run(capsys, "pull", *mirror_ws, "--all")
    assert code == 0 and err.startswith("Skipped: test.root.ethereum from ") and "up to date" in err
    code, _, err = run(capsys, "pull", *mirror_ws, "-f", "test.root.ethereum")
    assert code == 0 and "up to date" in err
    code, _, err = run(capsys, "pull", *mirror_ws)
    assert code == 1 and "name the datasets to pull, or pass --all" in err
    # a dataset without a polling source is skipped, whatever the fetch options
    code, _, err = run(capsys, "pull", *ws, "--fetch-uncacheable", "test.root.push-json")
    assert code == 0 and err.startswith("Skipped: test.root.push-json: no polling source")


def test_reset_moves_the_head_back_after_asking(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    blocks = _json(capsys, "log", *ws, "test.root.url-csv")
    assert len(blocks) == 6
    second = blocks[-2]["hash"]
    before = fingerprint(workspace_root)
    code, _, err = run(capsys, "reset", *ws, "test.root.url-csv", second)
    assert (
        code == 1
        and "dropping its last 4 block(s) (test.deriv.joined, test.deriv.summary read it)?" in err
    )
    assert "not confirmed: pass -y" in err
    other = _json(capsys, "log", *ws, "test.root.mqtt")[0]["hash"]
    code, _, err = run(capsys, "reset", *ws, "-y", "test.root.url-csv", other)
    assert code == 1 and "is not in the history of test.root.url-csv" in err
    code, _, err = run(capsys, "reset", *ws, "-y", "test.root.url-csv", "f1620nothex")
    assert code == 2 and "is not a block hash" in err
    assert fingerprint(workspace_root) == before

    code, _, err = run(capsys, "reset", *ws, "-y", "test.root.url-csv", second)
    assert code == 0 and "(4 block(s) dropped)" in err
    assert [b["hash"] for b in _json(capsys, "log", *ws, "test.root.url-csv")] == [
        b["hash"] for b in blocks[-2:]
    ]
    (row,) = [r for r in _json(capsys, "list", *ws) if r["alias"] == "test.root.url-csv"]
    assert row["head"] == second and row["blocks"] == 2
    code, _, _ = run(capsys, "verify", *ws, "--integrity-only", "test.root.url-csv")
    assert code == 0


def test_new_writes_manifests_add_accepts(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    root_manifest = tmp_path / "cities.yaml"
    code, _, err = run(capsys, "new", "my.cities", "--root", "--output-path", str(root_manifest))
    assert code == 0 and f"odfd add {root_manifest}" in err
    code, _, err = run(capsys, "new", "my.cities", "--root", "--output-path", str(root_manifest))
    assert code == 1 and "exists already" in err
    code, derivative, _ = run(capsys, "new", "my.big", "--derivative", "--output-path", "-")
    assert code == 0 and "kind: Derivative" in derivative
    derivative_manifest = tmp_path / "big.yaml"
    derivative_manifest.write_text(derivative.replace("my.input.dataset", "my.cities"))
    code, _, err = run(capsys, "add", *ws, str(root_manifest), str(derivative_manifest))
    assert code == 0 and "Added: my.cities" in err and "Added: my.big" in err
    kinds = {r["alias"]: r["kind"] for r in _json(capsys, "list", *ws)}
    assert kinds["my.cities"] == "Root" and kinds["my.big"] == "Derivative"
    code, _, _ = run(capsys, "new", "my.x", "--root", "--derivative")
    assert code == 2


def test_search_here_and_on_repositories(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    assert {r["alias"] for r in _json(capsys, "search", *ws, "DERIV")} == {
        "test.deriv.joined",
        "test.deriv.summary",
    }
    hub = tmp_path / "hub"
    assert run(capsys, "push", *ws, "test.root.mqtt", f"file://{hub}/mqtt-copy")[0] == 0
    assert run(capsys, "repo", "add", *ws, "hub", f"file://{hub}")[0] == 0
    found = _json(capsys, "search", *ws, "mqtt")
    assert [(r["repo"], r["alias"]) for r in found] == [
        ("(local)", "test.root.mqtt"),
        ("hub", "test.root.mqtt"),
    ]
    assert found[1]["url"] == f"file://{hub}/mqtt-copy"
    assert [r["repo"] for r in _json(capsys, "search", *ws, "mqtt", "--repo", "hub")] == ["hub"]
    assert [r["repo"] for r in _json(capsys, "search", *ws, "mqtt", "--local")] == ["(local)"]
    assert len(_json(capsys, "search", *ws, "test", "-n", "3")) == 3

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert run(capsys, "repo", "add", *ws, "down", f"http://127.0.0.1:{port}/")[0] == 0
    code, out, err = run(capsys, "search", *ws, "mqtt", "-o", "json")
    assert code == 1 and len(json.loads(out)) == 2
    assert err.startswith(f"warning: repository down: http://127.0.0.1:{port}/: cannot read")
