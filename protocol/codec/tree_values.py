"""Scalar rules of the plain tree shared by the YAML and JSON codecs.

The tree is what ``json.loads`` returns, except that YAML plain (unquoted) scalars arrive as
``Plain`` strings: whether ``10`` is a number or text depends on the field it is read into, exactly
as with serde_yaml in the reference (a quoted ``'10'`` stays text and is rejected for an integer).
Untyped values (``ExtraAttributes`` entries) resolve plain scalars with serde_yaml's YAML 1.2 rules.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.codec.invalid import Invalid
from protocol.errors import OdfError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef, Multihash
from protocol.model.timestamp import Timestamp

T = TypeVar("T")

__all__ = ["Invalid", "Plain"]


class Plain(str):
    """A YAML scalar written without quotes, whose type depends on where it is read."""

    __slots__ = ()


_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))
_INT_RANGES = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_RADIX = (
    ("0x", 16, re.compile(r"[0-9a-fA-F]+")),
    ("0o", 8, re.compile(r"[0-7]+")),
    ("0b", 2, re.compile(r"[01]+")),
)
_DECIMAL = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL_FLOATS = {
    ".inf": float("inf"),
    ".Inf": float("inf"),
    ".INF": float("inf"),
    "-.inf": float("-inf"),
    "-.Inf": float("-inf"),
    "-.INF": float("-inf"),
    ".nan": float("nan"),
    ".NaN": float("nan"),
    ".NAN": float("nan"),
}


def describe(value: Any) -> str:
    if value is None or (type(value) is Plain and value in _NULLS):
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, (int, float)):
        return f"number `{value}`"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "a sequence"
    return "a map"


def digits_but_not_number(text: str) -> bool:
    """Leading zeros followed by digits make a string in YAML 1.2 (``0123``)."""
    body = text[1:] if text[:1] in ("-", "+") else text
    return len(body) > 1 and body[0] == "0" and body[1:].isascii() and body[1:].isdigit()


def parse_plain_int(text: str) -> int | None:
    """An integer as serde_yaml reads a plain scalar (decimal, ``0x``, ``0o``, ``0b``, one sign), else None."""
    negative = text.startswith("-")
    body = text[1:] if text[:1] in ("-", "+") else text
    if body[:1] in ("-", "+"):
        return None
    for prefix, base, pattern in _RADIX:
        if body.startswith(prefix):
            digits = body[2:]
            if not pattern.fullmatch(digits):
                return None
            value = int(digits, base)
            return -value if negative else value
    if digits_but_not_number(text) or not _DECIMAL.fullmatch(body):
        return None
    return -int(body) if negative else int(body)


def resolve_plain(text: str) -> Any:
    """The JSON value serde_yaml makes of an untyped plain scalar: null, bool, int, float or string."""
    if text in _NULLS:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    number = parse_plain_int(text)
    if number is not None:
        return number
    if not digits_but_not_number(text):
        if text in _SPECIAL_FLOATS or (text.startswith("+") and text[1:] in _SPECIAL_FLOATS):
            return _SPECIAL_FLOATS[text.lstrip("+")]
        if _FLOAT.fullmatch(text):
            value = float(text)
            if value not in (float("inf"), float("-inf")):
                return value
    return str(text)


def _check_keys(value: Any, keys: frozenset[str], tagged: bool) -> None:
    if not isinstance(value, dict):
        raise Invalid("", f"expected a map, got {describe(value)}")
    for key in value:
        if key not in keys and not (tagged and key == "kind"):
            expected = ", ".join(f"`{k}`" for k in sorted(keys)) or "none"
            raise Invalid(str(key), f"unknown field `{key}`, expected one of {expected}")


def _is_null(value: Any) -> bool:
    return value is None or (type(value) is Plain and value in _NULLS)


def _r_str(value: Any) -> str:
    if isinstance(value, str):
        return str(value)
    raise Invalid("", f"expected a string, got {describe(value)}")


def _r_int(value: Any, fmt: str) -> int:
    if type(value) is int:
        number = value
    elif type(value) is Plain and (parsed := parse_plain_int(value)) is not None:
        number = parsed
    else:
        raise Invalid("", f"expected an integer, got {describe(value)}")
    low, high = _INT_RANGES[fmt]
    if not low <= number <= high:
        raise Invalid("", f"integer {number} is out of range for {fmt}")
    return number


def _r_bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    if type(value) is Plain:
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    raise Invalid("", f"expected a boolean, got {describe(value)}")


def _parsed(parse: Callable[[str], T], value: Any) -> T:
    text = _r_str(value)
    try:
        return parse(text)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _r_multihash(value: Any) -> Multihash:
    return _parsed(Multihash.from_multibase, value)


def _r_dataset_id(value: Any) -> DatasetId:
    return _parsed(DatasetId.parse, value)


def _r_dataset_ref(value: Any) -> DatasetRef:
    return _parsed(DatasetRef.parse, value)


def _r_dataset_alias(value: Any) -> DatasetAlias:
    return _parsed(DatasetAlias.parse, value)


def _r_timestamp(value: Any) -> Timestamp:
    return _parsed(Timestamp.parse_rfc3339, value)


def _r_bytes(value: Any) -> bytes:
    text = _r_str(value)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise Invalid("", f"invalid base64: {error}") from None


def _r_json(value: Any) -> Any:
    if type(value) is Plain:
        return resolve_plain(value)
    if isinstance(value, dict):
        return {str(k): _r_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_r_json(v) for v in value]
    return value


def _r_list(value: Any, read: Callable[[Any], T]) -> tuple[T, ...]:
    if not isinstance(value, list):
        raise Invalid("", f"expected a sequence, got {describe(value)}")
    out = []
    for index, item in enumerate(value):
        try:
            out.append(read(item))
        except Invalid as error:
            error.path.append(f"[{index}]")
            raise
    return tuple(out)


def _r_map(value: Any, read: Callable[[Any], T], name: str) -> dict[str, T]:
    if not isinstance(value, dict):
        raise Invalid("", f"expected a map for {name}, got {describe(value)}")
    out = {}
    for key, item in value.items():
        try:
            out[str(key)] = read(item)
        except Invalid as error:
            error.path.append(str(key))
            raise
    return out


def _r_enum(value: Any, members: dict[str, T], name: str) -> T:
    if isinstance(value, str):
        member = members.get(value)
        if member is not None:
            return member
    expected = ", ".join(f"`{k}`" for k in dict.fromkeys(m.value for m in members.values()))  # type: ignore[attr-defined]  # T is always an enum here; the signature keeps the caller's enum type
    raise Invalid("", f"unknown {name} variant {describe(value)}, expected one of {expected}")


def _r_tag(value: Any, readers: dict[str, Callable[..., T]], name: str, short_form: bool) -> T:
    if short_form and isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict):
        raise Invalid("", f"expected a {name} map with a `kind`, got {describe(value)}")
    kind = value.get("kind")
    if kind is None:
        raise Invalid("kind", f"missing field `kind` of {name}")
    reader = readers.get(kind) if isinstance(kind, str) else None
    if reader is None:
        expected = ", ".join(f"`{k}`" for k in readers if k[0].isupper())
        raise Invalid("kind", f"unknown variant `{kind}` of {name}, expected one of {expected}")
    return reader(value, True)


_SHORT_FORMS: dict[str, Callable[[type, str], Any]] = {
    "Secret": lambda cls, text: cls(value=text),
    "Variable": lambda cls, text: cls(value=text),
}


def _r_short_form(cls: type[T], text: str) -> T:
    make = _SHORT_FORMS.get(cls.__name__)
    if make is None:
        raise Invalid("", f"{cls.__name__} has no short string form; write it as a map")
    made: T = make(cls, str(text))
    return made


def _w_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _w_json(value: Any) -> Any:
    """JSON values are written with object keys sorted, as the reference's ``BTreeMap`` does."""
    if isinstance(value, dict):
        return {k: _w_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_w_json(v) for v in value]
    return value
