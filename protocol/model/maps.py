"""Immutable string-keyed maps (``ExtraAttributes`` and friends) and their JSON text form.

The reference keeps these maps in a ``BTreeMap``, so entries are ordered by key, and FlatBuffers
stores ``ExtraAttributes`` as the ``serde_json`` text of that map; ``to_json`` reproduces that text
byte for byte because it feeds the block hash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeAlias, TypeVar

from protocol.errors import DecodeError

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
"""Any JSON value, as ``json.loads`` returns it."""

V = TypeVar("V")


class FrozenMap(Mapping[str, V], Generic[V]):
    """A read-only mapping whose entries are kept sorted by key, hashable like the model's dataclasses."""

    __slots__ = ("_entries", "_hash")

    def __init__(self, entries: Mapping[str, V] | None = None, /, **kwargs: V) -> None:
        merged = dict(entries or {}, **kwargs)
        self._entries: dict[str, V] = {k: merged[k] for k in sorted(merged)}
        self._hash: int | None = None

    def __getitem__(self, key: str) -> V:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._entries == other._entries

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(
                (type(self).__name__, json.dumps(self._entries, sort_keys=True, default=repr))
            )
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._entries!r})"

    def with_entries(self, **entries: V) -> FrozenMap[V]:
        """A copy with ``entries`` added or replaced."""
        return type(self)({**self._entries, **entries})

    def to_json(self) -> str:
        """The compact JSON text ``serde_json::to_string`` writes for this map."""
        return json_text(self._entries)

    @classmethod
    def from_json(cls, text: str) -> FrozenMap[V]:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise DecodeError(f"{cls.__name__} is not valid JSON: {error}") from None
        if not isinstance(value, dict):
            raise DecodeError(f"{cls.__name__} must be a JSON object, got {type(value).__name__}")
        return cls(value)


def json_text(value: Any) -> str:
    """Compact JSON as ``serde_json`` writes it: keys sorted, no spaces, raw UTF-8, shortest floats."""
    if not _has_float(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _write(value)


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def _write(value: Any) -> str:
    if isinstance(value, float):
        return format_float(value) if math.isfinite(value) else "null"
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{_write(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def format_float(value: float) -> str:
    """The shortest round-trip text of a finite float in the layout of Rust's ``ryu`` crate
    (``1.0``, ``0.00001``, ``1e-7``, ``1e16``), which serde_json and serde_yaml use."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + int(exp_text or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    length = len(digits)
    if 0 <= point <= 16 and length <= point:
        return f"{sign}{digits}{'0' * (point - length)}.0"
    if 0 < point <= 16:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -5 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    exp = point - 1
    body = digits[0] + ("." + digits[1:] if length > 1 else "")
    return f"{sign}{body}e{exp}"
