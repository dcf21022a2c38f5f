"""The parse error every identity type raises, built so callers can add context to it."""

from __future__ import annotations

from protocol.errors import ParseError

_SHOWN_CHARS = 120


def quoted(text: str) -> str:
    """``repr(text)``, cut to a readable length so huge inputs do not flood the message."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}... ({len(text)} characters)"


class InvalidText(ParseError):
    """``text`` is not a valid ``what``; ``reason`` alone says why, for use in a larger message."""

    def __init__(self, text: str, what: str, reason: str) -> None:
        super().__init__(f"{quoted(text)} is not a valid {what}: {reason}")
        self.text = text
        self.what = what
        self.reason = reason
