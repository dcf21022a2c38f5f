"""Canonical JSON exactly as the reference writes it for hashing and signing.

The reference uses the Rust ``canonical_json`` crate (0.7), which is *not* RFC 8785 whatever its
documentation says: object keys sorted by their UTF-8 bytes (which is code point order), no
whitespace, every character outside printable ASCII written as a lower-case ``\\uXXXX`` escape
(characters beyond the BMP as a surrogate pair; ``\\b \\t \\n \\f \\r \\" \\\\`` keep their short
forms; ``/`` and ``'`` are not escaped), integers in decimal and floats as Rust's ``{:e}`` with
an upper-case ``E`` (``protocol.query.floats.canonical_text``).
"""

from __future__ import annotations

from typing import Any

from protocol.query.floats import canonical_text
from protocol.query.json_text import encode


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value (``dict``, ``list``, ``str``, ``int``, ``float``,
    ``bool``, ``None``)."""
    return encode(value, float_text=canonical_text, sort_keys=True, ascii_only=True).encode("ascii")
