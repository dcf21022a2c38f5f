"""The ``workspace_root`` fixture: a workspace with the test datasets (metadata only); and
``empty_root``: a workspace just initialized."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from odfd.cli.main import main
from tests.cli.helpers import MANIFESTS


@pytest.fixture(scope="session")
def _template_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("template") / "ws"
    assert main(["init", "--root", str(ws)]) == 0
    assert main(["-q", "add", "--root", str(ws), str(MANIFESTS)]) == 0
    return ws


@pytest.fixture
def workspace_root(_template_workspace: Path, tmp_path: Path) -> Path:
    """A workspace with the eleven test datasets (metadata only: no Spark needed), copied from
    one made once per session."""
    ws = tmp_path / "ws"
    shutil.copytree(_template_workspace, ws, symlinks=True)
    return ws


@pytest.fixture
def empty_root(tmp_path: Path) -> Path:
    """A workspace just made by ``odfd init``."""
    ws = tmp_path / "ws"
    assert main(["init", "--root", str(ws)]) == 0
    return ws
