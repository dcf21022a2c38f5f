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
    character, vectorised; a regular expression took four times as long as ``json.loads``)."""
    if not digits:
        return b""
    try:
        raw = digits.encode("ascii")
    except UnicodeEncodeError:
        return None
    if raw.translate(None, _NOT_DIGITS) or raw[:1] == b"," or raw[-1:] == b"," or b",," in raw:
        return None
    codes = np.frombuffer(raw, dtype=np.uint8)
    digit = codes != ord(",")
    first = np.concatenate(([True], ~digit[:-1]))  # where each value's text begins
    zero = codes == ord("0")
    if np.any(first[:-1] & zero[:-1] & digit[1:]):  # a leading zero
        return None
    if len(raw) > 3 and np.any(digit[:-3] & digit[1:-2] & digit[2:-1] & digit[3:]):
        return None  # four digits or more
    values = np.fromstring(raw, dtype=np.int32, sep=",")
    if len(values) != raw.count(b",") + 1 or values.max() > 255:
        return None
    return values.astype(np.uint8).tobytes()
