"""``odfd COMMAND --help`` answers what a new user asks of it: what the command does, and what
each of its arguments and options means, for every command and subcommand."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.cli.main import build_parser
from tests.cli.helpers import run


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def test_every_command_says_what_it_does_and_what_each_argument_means() -> None:
    commands = dict(_commands(build_parser()))
    assert len(commands) > 70  # every command and subcommand, registered in full
    undescribed, unexplained = [], []
    for path, parser in commands.items():
        text = " ".join(parser.format_help().split())
        if not parser.description or " ".join(parser.description.split()) not in text:
            undescribed.append(" ".join(path))
        for action in parser._actions:
            if action.help is None and not isinstance(action, argparse._SubParsersAction):
                unexplained.append(
                    f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
                )
    assert undescribed == []
    assert unexplained == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["mirror", "sync"], "sync now (needs a running daemon)"),
        (["pull"], "update datasets from their sources (ingest or transform)"),
        (["account", "token", "revoke"], "as `odfd account token list` shows it"),
    ],
)
def test_help_of_a_subcommand_names_it_and_its_arguments(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser(argv[0]).parse_args([*argv, "--help"])
    assert exit_.value.code == 0
    assert said in " ".join(capsys.readouterr().out.split())


def test_sql_server_help_is_the_servers_own(capsys: pytest.CaptureFixture[str]) -> None:
    """``server`` is ``odfd sql``'s QUERY word: its --help showed the query options."""
    with pytest.raises(SystemExit) as exit_:
        build_parser("sql").parse_args(["sql", "server", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: odfd sql server [-h] [--address ADDRESS] [--port PORT]")
    assert "Arrow Flight SQL until interrupted" in " ".join(out.split())
    assert "--script" not in out and "--engine" not in out
    with pytest.raises(SystemExit):
        build_parser("sql").parse_args(["sql", "--help"])
    assert "--script FILE" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["tail", "--bogus", "x"], "odfd tail: error: unrecognized arguments: --bogus; "),
        (["repo", "list", "--x"], "odfd repo list: error: unrecognized arguments: --x; "),
        (
            ["sql", "select 1", "--limt", "3"],
            "odfd sql: error: unrecognized arguments: --limt 3 (did you mean --limit?); ",
        ),
    ],
)
def test_an_unknown_argument_is_refused_by_the_command_it_was_given_to(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was ``odfd: error: unrecognized arguments`` under ``odfd``'s own usage, which lists
    no option of the command: now the command's usage, its name and the option most alike."""
    code, out, err = run(capsys, *argv)
    command = said.split(":")[0]
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: {command} ")
    assert err.splitlines()[-1] == f"{said}`{command} --help` lists its options"


@pytest.mark.parametrize("command", ["serve", "daemon", "ui"])
def test_kamus_http_port_flag_names_the_port(command: str) -> None:
    """``kamu system api-server --http-port`` / ``kamu ui --http-port``: a kamu user's flag was
    refused (``unrecognized arguments``); it is ``--port``."""
    args = build_parser(command).parse_args([command, "--http-port", "8181"])
    assert args.port == 8181


def test_kamus_livy_server_is_refused_saying_what_to_connect_to(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``kamu sql server --livy`` (what ``kamu.connect(URL, engine="spark")`` starts) was
    ``unrecognized arguments: --livy``; now why not, and the URL the kamu client takes."""
    code, _, err = run(capsys, "sql", "server", "--livy", "--root", str(tmp_path))
    assert code == 2
    assert "`odfd sql server` serves no Livy" in err
    assert 'kamu.connect("grpc://HOST:PORT")' in err
    code, _, err = run(capsys, "sql", "select 1", "--livy", "--root", str(tmp_path))
    assert code == 2 and "--livy are options of `odfd sql server`" in err
