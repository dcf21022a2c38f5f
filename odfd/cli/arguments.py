"""Argument types shared by commands, so that a bad value is an argument error (exit code 2,
before any workspace is opened or engine started) worded the same way everywhere."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1 (``-n``, ``--limit``, ``--jobs``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
