"""Shell completion scripts generated from the parser itself, so they never fall behind it:
commands, their actions (``system gc``), options, fixed choices (``-o json``) and, for
arguments named DATASET, the datasets of the workspace (from ``odfd list``)."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")


@dataclass
class _Command:
    path: str
    """Space-separated command words after ``odfd`` (``""`` for the top level)."""
    words: list[str] = field(default_factory=list)
    """Sub-commands and options."""
    choices: dict[str, list[str]] = field(default_factory=dict)
    """Option -> its fixed values."""
    datasets: bool = False


def _walk(parser: argparse.ArgumentParser, path: str, out: list[_Command]) -> None:
    command = _Command(path)
    out.append(command)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                command.words.append(name)
                _walk(sub, f"{path} {name}".strip(), out)
        elif action.option_strings:
            command.words.extend(action.option_strings)
            if action.choices:
                for option in action.option_strings:
                    command.choices[option] = [str(c) for c in action.choices]
        elif action.metavar == "DATASET":
            command.datasets = True


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    commands: list[_Command] = []
    _walk(parser, "", commands)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](commands)


_DATASETS = "odfd list -q -o csv 2>/dev/null | tail -n +2 | cut -d, -f2"


def _bash(commands: list[_Command]) -> str:
    cases = []
    for c in commands:
        lines = [f"        {shlex.quote(c.path)})"]
        for option, values in c.choices.items():
            lines.append(
                f'            if [ "$prev" = {shlex.quote(option)} ]; then '
                f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(values))} -- "$cur")); return; fi'
            )
        words = " ".join(c.words)
        extra = f" $({_DATASETS})" if c.datasets else ""
        lines.append(f'            COMPREPLY=($(compgen -W "{words}{extra}" -- "$cur")); return;;')
        cases.append("\n".join(lines))
    body = "\n".join(cases)
    names = " ".join(shlex.quote(c.path) for c in commands if c.path)
    return f"""# odfd completion for bash: eval "$(odfd completions bash)"
_odfd() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    local path="" word candidate i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        candidate="${{path:+$path }}$word"
        for known in {names}; do
            if [ "$known" = "$candidate" ]; then path="$candidate"; fi
        done
    done
    case "$path" in
{body}
    esac
}}
complete -F _odfd odfd
"""


def _zsh(commands: list[_Command]) -> str:
    return (
        "#compdef odfd\n# odfd completion for zsh: odfd completions zsh > ${fpath[1]}/_odfd\n"
        "autoload -U bashcompinit && bashcompinit\n" + _bash(commands)
    )


def _fish(commands: list[_Command]) -> str:
    lines = ["# odfd completion for fish: odfd completions fish | source"]
    for c in commands:
        words = c.path.split()
        if words:
            parent = " ".join(words[:-1])
            condition = (
                "__fish_use_subcommand"
                if not parent
                else f"__fish_seen_subcommand_from {shlex.quote(words[-2])}"
            )
            lines.append(
                f"complete -c odfd -f -n {shlex.quote(condition)} -a {shlex.quote(words[-1])}"
            )
        seen = f"__fish_seen_subcommand_from {shlex.quote(words[-1])}" if words else "true"
        for option in (w for w in c.words if w.startswith("--")):
            values = c.choices.get(option)
            args = f" -xa {shlex.quote(' '.join(values))}" if values else ""
            lines.append(
                f"complete -c odfd -n {shlex.quote(seen)} -l {shlex.quote(option[2:])}{args}"
            )
        if c.datasets:
            lines.append(f"complete -c odfd -n {shlex.quote(seen)} -a '({_DATASETS})'")
    return "\n".join(lines) + "\n"
