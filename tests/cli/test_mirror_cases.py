"""Mirror management through the application layer (``odfd.app.mirrors``) and the CLI that
renders it, without a daemon: the catalog holds the mirror list."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from odfd.app.mirrors import MirrorState, find_mirror, list_mirrors
from odfd.app.node import open_node
from storage.catalog.mirror_records import MirrorRecord
from storage.errors import StorageError
from tests.cli.helpers import run


def test_add_list_pause_and_remove_a_mirror(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    source = (tmp_path / "remote" / "weather").as_uri()
    code, _, err = run(capsys, "mirror", "add", *ws, source, "--every", "5m")
    assert code == 0 and f"Mirroring {source} as weather every 5m" in err
    assert "takes effect when the daemon runs" in err

    [mirror] = _mirrors(workspace_root)
    assert (mirror.record.name, mirror.last_outcome, mirror.state) == ("weather", None, "new")
    assert _find(workspace_root, "weather").source == source
    code, out, _ = run(capsys, "mirror", "list", *ws, "-o", "json")
    assert code == 0
    [listed] = json.loads(out)
    assert (listed["name"], listed["every"], listed["lastOutcome"]) == ("weather", "5m", None)

    assert run(capsys, "mirror", "pause", *ws, "weather")[0] == 0
    assert [m.state for m in _mirrors(workspace_root)] == ["paused"]
    code, out, _ = run(capsys, "mirror", "list", *ws)
    assert code == 0 and out.splitlines()[1].split()[:3] == ["weather", "5m", "paused"]

    code, _, err = run(capsys, "mirror", "sync", *ws, "weather")
    assert code != 0 and "daemon" in err  # a sync now needs a running daemon

    code, _, err = run(capsys, "mirror", "remove", *ws, "weather")
    assert code == 0 and "Removed mirror weather; the dataset stays" in err
    assert _mirrors(workspace_root) == []
    with pytest.raises(StorageError, match="weather"):
        _find(workspace_root, "weather")


def _mirrors(root: Path) -> list[MirrorState]:
    async def read() -> list[MirrorState]:
        async with await open_node(root) as node:
            return await list_mirrors(node)

    return asyncio.run(read())


def _find(root: Path, name: str) -> MirrorRecord:
    async def find() -> MirrorRecord:
        async with await open_node(root) as node:
            return await find_mirror(node, name)

    return asyncio.run(find())
