"""Asking before a destructive command acts: on a terminal a y/N question, elsewhere ``-y``
(the global ``--yes`` of ``odfd.cli.global_options``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from odfd.errors import OdfdError


class NotConfirmedError(OdfdError):
    """A destructive command was not confirmed."""


def confirm(args: argparse.Namespace, question: str) -> None:
    """Returns when the user agreed (or gave ``-y``); raises ``NotConfirmedError`` otherwise."""
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise NotConfirmedError(
            f"{question} — not confirmed: pass -y to confirm without a terminal"
        )
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise NotConfirmedError("cancelled; nothing was changed")


def confirmer(args: argparse.Namespace) -> Callable[[str], None]:
    """``confirm`` for ``args``, as the application layer asks it (``odfd.app.events.Confirm``)."""
    return lambda question: confirm(args, question)
