"""How the CLI talks to the user on stderr: status lines (hidden by ``--quiet``), details (shown
by ``--verbose``), warnings and errors (always), colour only on a terminal.

Results go to stdout (tables, JSON, YAML); everything else goes through this module so that the
three global options mean the same thing in every command.
"""

from __future__ import annotations

import os
import sys

QUIET, NORMAL, VERBOSE = 0, 1, 2

_RED, _YELLOW, _RESET = "\033[31m", "\033[33m", "\033[0m"


class _Settings:
    """The three global options (a plain class: ``odfd --help`` imports no ``dataclasses``)."""

    __slots__ = ("level", "color")

    def __init__(self, level: int = NORMAL, color: bool | None = None) -> None:
        self.level = level
        self.color = color
        """``None``: colour when stderr is a terminal and ``$NO_COLOR`` is unset."""


_settings = _Settings()
"""The process's settings, set by the command it runs."""


def configure(*, quiet: bool = False, verbose: bool = False, no_color: bool = False) -> None:
    _settings.level = QUIET if quiet else VERBOSE if verbose else NORMAL
    _settings.color = False if no_color else None


def _current() -> _Settings:
    return _settings


def is_quiet() -> bool:
    return _current().level == QUIET


def is_verbose() -> bool:
    return _current().level == VERBOSE


def use_color() -> bool:
    settings = _current()
    if settings.color is not None:
        return settings.color
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def info(message: str) -> None:
    """A status line (``Added: …``, ``Skipped: …``); ``--quiet`` hides it."""
    if _current().level >= NORMAL:
        print(message, file=sys.stderr)


def detail(message: str) -> None:
    """Extra detail only ``--verbose`` shows."""
    if _current().level >= VERBOSE:
        print(message, file=sys.stderr)


def warn(message: str) -> None:
    print(_paint("warning:", _YELLOW) + " " + message, file=sys.stderr)


def error(message: str) -> None:
    print(_paint("error:", _RED) + " " + message, file=sys.stderr)


def _paint(text: str, color: str) -> str:
    return f"{color}{text}{_RESET}" if use_color() else text
