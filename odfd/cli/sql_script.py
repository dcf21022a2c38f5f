"""Splitting SQL text into statements, and the interactive ``odfd sql`` shell's input loop.

Statements end at a ``;`` outside quotes (``'…'``, ``"…"``, `` `…` ``) and comments (``-- …``,
``/* … */``); the shell keeps reading lines until one ends a statement, as psql and kamu's shell do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path


def split_statements(text: str) -> list[str]:
    """The statements of ``text``, each without its ``;``; empty ones are dropped."""
    statements, _ = _split(text)
    return statements


def _split(text: str) -> tuple[list[str], str]:
    """Complete statements, and the unfinished rest."""
    statements: list[str] = []
    start = 0
    quote: str | None = None
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if quote is not None:
            if ch == quote:
                if i + 1 < n and text[i + 1] == quote:  # doubled quote inside a literal
                    i += 1
                else:
                    quote = None
        elif ch in "'\"`":
            quote = ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif ch == ";":
            statement = text[start:i].strip()
            if _has_code(statement):
                statements.append(statement)
            start = i + 1
        i += 1
    return statements, text[start:]


def _has_code(statement: str) -> bool:
    return any(
        line.strip() and not line.strip().startswith("--") for line in statement.splitlines()
    )


EXIT_COMMANDS = frozenset({"\\q", "exit", "quit", "exit;", "quit;"})


def shell_statements(read_line: Callable[[str], str]) -> Iterator[str]:
    """Statements typed at the prompt, one at a time, until end of input or ``\\q``/``exit``.

    ``read_line(prompt)`` returns a line (``input`` on a terminal) and raises ``EOFError`` at the
    end; the prompt says whether a statement is being continued.
    """
    pending = ""
    while True:
        try:
            line = read_line("...> " if pending.strip() else "odfd> ")
        except EOFError:
            break
        if not pending.strip() and line.strip().lower() in EXIT_COMMANDS:
            break
        pending += line + "\n"
        statements, pending = _split(pending)
        yield from statements
    if _has_code(pending.strip()):
        yield pending.strip()


def history_file(workspace_root: Path) -> Path:
    return workspace_root / "sql_history"
