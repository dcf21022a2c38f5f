"""Decoding the Smart Transfer Protocol's metadata answer: a gzipped tarball of every new block,
sent inline as a JSON array of byte values (over a million of them for 10,000 blocks).

``json.loads`` builds a Python int per byte (~70 ms for 10,000 blocks, on the pull's critical
path before any download starts); here the array's text is checked and read by numpy (~20 ms)
and the rest of the message by ``json.loads``. Only text that is exactly such an array
(comma-separated decimal integers 0-255, no leading zeros, no spaces) as the last field of
``blocks`` takes this path; anything else is read by ``json.loads`` alone, so what is accepted
and every error are the same. Every block in the tarball is hash-checked afterwards either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from protocol.transfer.smart import messages as m

_KEY = '"payload":['
_END = "]}}"
_SENTINEL = "-1"
"""Stands in for the array in the text ``json.loads`` reads (no byte array holds it)."""
_NOT_DIGITS = b"0123456789,"


def read_metadata_text(text: str, what: str) -> tuple[Any, bytes | None]:
    """The JSON value of a ``DatasetMetadataPullResponse``'s text and, when the fast path read
    the payload, its bytes (the value's payload is then empty); ``MessageError`` if the text is
    not JSON. ``metadata_response`` makes the message of it."""
    start = text.rfind(_KEY)
    if start >= 0 and text.endswith(_END):
        begin = start + len(_KEY)
        payload = _byte_values(text[begin : -len(_END)])
        if payload is not None:
            value = m.decode_json(text[:begin] + _SENTINEL + _END, what)
            blocks = value.get("blocks") if isinstance(value, dict) else None
            if isinstance(blocks, dict) and blocks.get("payload") == [-1]:
                blocks["payload"] = []
                return value, payload
    return m.decode_json(text, what), None


def metadata_response(read: tuple[Any, bytes | None]) -> m.DatasetMetadataPullResponse:
    """The message ``read_metadata_text`` read (``MessageError`` if it is not of its shape)."""
    value, payload = read
    response = m.DatasetMetadataPullResponse.from_json(value)
    if payload is None:
        return response
    return m.DatasetMetadataPullResponse(dataclasses.replace(response.blocks, payload=payload))


def _byte_values(digits: str) -> bytes | None:
    """The bytes a JSON array's inner text lists, or ``None`` unless it is exactly
    comma-separated decimal integers 0-255 without leading zeros (memory: a few bytes per
    character, vectorised: each value is read from the up to three digits before its comma, at
    0.7 of the CPU of ``np.fromstring`` beside separate checks of the text; a regular expression
    took four times as long as ``json.loads``)."""
    if not digits:
        return b""
    try:
        raw = digits.encode("ascii")
    except UnicodeEncodeError:
        return None
    if raw.translate(None, _NOT_DIGITS):
        return None
    # Two commas before the text: each value's three characters before its comma are in range.
    codes = np.frombuffer(b",," + raw + b",", dtype=np.uint8)
    commas = np.flatnonzero(codes == ord(","))[1:]
    lengths = np.diff(commas) - 1
    ends = commas[1:]
    if lengths.min() < 1 or lengths.max() > 3:
        return None  # an empty value (",,", a comma first or last) or four digits
    digit = codes - np.uint8(ord("0"))
    long = lengths > 1
    if (long & (digit[ends - lengths] == 0)).any():
        return None  # a leading zero
    values = digit[ends - 1] + np.where(long, digit[ends - 2], 0).astype(np.uint16) * 10
    values += np.where(lengths > 2, digit[ends - 3], 0).astype(np.uint16) * 100
    if values.max() > 255:
        return None
    return values.astype(np.uint8).tobytes()
