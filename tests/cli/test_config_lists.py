"""List settings (``server.push_tokens`` and the like) through ``odfd config set|get`` and
``ODFD_*`` variables: a comma list and a TOML/JSON array mean the same list, anything in between is
refused with the accepted forms named, and a list is shown as a list."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfd.config import load_config
from tests.cli.helpers import run


@pytest.fixture
def ws(workspace_root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    for name in [n for n in os.environ if n.startswith("ODFD_")]:
        monkeypatch.delenv(name)
    return ("--root", str(workspace_root))


@pytest.mark.parametrize(
    "typed",
    ["a,b", " a , b ", '["a","b"]', '["a", "b"]', "['a', 'b']", '[ "a",\n "b" ]'],
)
def test_a_list_typed_either_way_is_the_same_list(
    typed: str, ws: tuple[str, str], workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "config", "set", *ws, "server.push_tokens", typed)
    assert code == 0
    assert err.strip() == 'Set: server.push_tokens = ["a", "b"]'
    assert load_config(workspace_root / "config.toml").server.push_tokens == frozenset({"a", "b"})
    assert run(capsys, "config", "get", *ws, "server.push_tokens")[1] == '["a", "b"]\n'
    assert run(capsys, "config", "get", *ws, "server.push_tokens", "-o", "json")[1] == (
        '["a", "b"]\n'
    )


def test_a_one_element_list_is_shown_as_a_list(
    ws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "config", "set", *ws, "server.read_tokens", "a")[0] == 0
    assert run(capsys, "config", "get", *ws, "server.read_tokens")[1] == '["a"]\n'
    _, out, _ = run(capsys, "config", "list", *ws)
    assert "server.read_tokens" in out and '["a"]' in out


@pytest.mark.parametrize("typed", ['["a","b"', '["a", 1]', 'a,"b"', "[a, b]", "x],y"])
def test_ambiguous_list_text_is_refused_and_nothing_changes(
    typed: str, ws: tuple[str, str], workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = workspace_root / "config.toml"
    before = config.read_bytes()
    code, _, err = run(capsys, "config", "set", *ws, "server.push_tokens", typed)
    assert code == 1
    assert err.startswith("error: server.push_tokens: ")
    assert 'use a,b or an array such as ["a", "b"]' in err
    assert config.read_bytes() == before


def test_the_environment_reads_lists_the_same_way(workspace_root: Path) -> None:
    path = workspace_root / "config.toml"
    for typed in ('["a","b"]', "a,b"):
        env = {"ODFD_SERVER_PUSH_TOKENS": typed}
        assert load_config(path, env=env).server.push_tokens == frozenset({"a", "b"})
    with pytest.raises(Exception, match="ODFD_SERVER_PUSH_TOKENS") as info:
        load_config(path, env={"ODFD_SERVER_PUSH_TOKENS": 'a,"b"'})
    assert "ambiguous" in str(info.value)
