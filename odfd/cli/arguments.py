"""Argument types shared by commands, so that a bad value is an argument error (exit code 2,
before any workspace is opened or engine started) worded the same way everywhere."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``-n``, ``--limit``, ``--jobs``)."""
    return _int_at_least(text, 1, "must be at least 1")


def non_negative_int(text: str) -> int:
    """A whole number of 0 or more (``--skip``)."""
    return _int_at_least(text, 0, "must be 0 or more")


def _int_at_least(text: str, least: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{rule}, got {value}")
    return value


def parse_rfc3339(text: str) -> str:
    """An RFC 3339 time, checked and kept as text (a request carries it so); named as
    ``Timestamp.parse_rfc3339`` is, since argparse's message names the function. The time model
    is imported only when such an option is given."""
    from protocol.model import Timestamp

    Timestamp.parse_rfc3339(text)
    return text


def duration(text: str) -> float:
    """Seconds from ``30s``, ``5m``, ``1h30m``, ``2d`` or a number (``--older-than``); the
    configuration's parser is imported only when such an option is given."""
    from odfd.config import parse_duration

    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_duration(text: str) -> float:
    """A :func:`duration` longer than zero (``--every``, time-outs)."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds
