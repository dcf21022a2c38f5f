"""JSON text read and written as the reference's serde_json does.

Reading is strict where serde_json is: UTF-8 only, no byte-order mark, no ``NaN``/``Infinity``
literals, no lone UTF-16 surrogates in ``\\u`` escapes, at most 128 levels of nesting, and numbers
become what serde_json makes of them (``floats.read_number``). Duplicate keys are an error, as
they are for every typed document this protocol reads.

Writing (``wire_dumps``) is serde_json's compact form: no spaces, keys in the order given,
non-ASCII characters as they are, ``"``, ``\\`` and control characters escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

from protocol.query.errors import RequestError
from protocol.query.floats import NumberOutOfRange, read_number, wire_text

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]

MAX_DEPTH = 128
"""serde_json's recursion limit."""


def loads(data: bytes | str, *, where: str = "") -> Any:
    """Parse one JSON document, or raise ``RequestError`` naming what is wrong and where."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            raise RequestError(where, f"the body is not UTF-8 ({error.reason})") from None
    else:
        text = data
    try:
        value = json.loads(
            text,
            parse_int=_number,
            parse_float=_number,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object,
        )
    except _Refused as error:
        raise RequestError(where, str(error)) from None
    except json.JSONDecodeError as error:
        raise RequestError(
            where, f"{error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:
        raise RequestError(where, "recursion limit exceeded") from None
    _check(value, 0, where)
    return value


class _Refused(ValueError):
    pass


def _number(text: str) -> int | float:
    try:
        return read_number(text)
    except NumberOutOfRange as error:
        raise _Refused(str(error)) from None


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON value")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"duplicate field `{key}`")
        result[key] = value
    return result


def _check(value: Any, depth: int, where: str) -> None:
    """Refuse what Python's reader accepts and serde_json does not."""
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise RequestError(where, "recursion limit exceeded")
        for item in value:
            _check(item, depth + 1, where)
    elif isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise RequestError(where, "recursion limit exceeded")
        for key, item in value.items():
            _check_text(key, where)
            _check(item, depth + 1, where)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(where, "lone surrogate in a \\u escape") from None


def dumps(value: Any) -> str:
    """serde_json's compact text of a JSON value (dicts keep their order, floats as zmij)."""
    return encode(value, float_text=wire_text, sort_keys=False, ascii_only=False)


def encode(
    value: Any, *, float_text: Callable[[float], str], sort_keys: bool, ascii_only: bool
) -> str:
    """Compact JSON with floats written by ``float_text`` (non-finite ones as ``null``, as a
    JSON value cannot hold them), keys sorted or not, non-ASCII escaped or not."""
    parts: list[str] = []
    # what json.dumps writes for a string, without building an encoder per string
    text = encode_basestring_ascii if ascii_only else encode_basestring
    _encode_into(value, parts, float_text, sort_keys, text)
    return "".join(parts)


def _encode_into(
    value: Any,
    parts: list[str],
    float_text: Callable[[float], str],
    sort_keys: bool,
    text: Callable[[str], str],
) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(text(value))
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(float_text(value) if math.isfinite(value) else "null")
    elif isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        parts.append("{")
        for index, (key, item) in enumerate(items):
            if not isinstance(key, str):
                raise TypeError(f"a JSON object key is a string, got {type(key).__name__}")
            if index:
                parts.append(",")
            parts.append(text(key))
            parts.append(":")
            _encode_into(item, parts, float_text, sort_keys, text)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _encode_into(item, parts, float_text, sort_keys, text)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")
