"""The JSON functions the reference's DataFusion engine registers (the ``datafusion-functions-json``
crate), as Arrow UDFs: published pipelines call them, so odfd runs and verifies them.

``json_get_str``, ``json_get_int``, ``json_get_float``, ``json_get_bool``, ``json_get_json``,
``json_as_text``, ``json_length``, ``json_contains`` and ``json_get`` take a JSON text and a
path of keys (a string selects an object member, an integer an array item) and return null
where the path leads nowhere, to a value of another type, or the text is not JSON. ``->`` and
``->>`` are ``json_get`` and ``json_as_text``, and ``json_get(...)::TYPE`` is the typed getter,
as in the crate.

DataFusion's Python bindings register a UDF with one exact signature and cannot add operators,
so each query step is rewritten first (:func:`rewrite`): operators become calls, and each call
is bound to a UDF for its exact key types. Where the crate's ``json_get`` returns a union of
JSON types, odfd's returns the value's JSON text (the crate's union cannot be written to a
slice either; casts and the typed getters answer the same).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from datafusion import SessionContext

_DECODER = json.JSONDecoder()
_MEMBERS = json.JSONDecoder(object_pairs_hook=list)
_WHITESPACE = re.compile(r"[ \t\n\r]*")


class _NotFound(Exception):
    """The path leads nowhere in this document (or the text is not JSON)."""


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    assert match is not None
    return match.end()


def _value_end(text: str, at: int) -> int:
    try:
        return _DECODER.raw_decode(text, at)[1]
    except ValueError:
        raise _NotFound from None


def find(text: str, path: tuple[str | int, ...]) -> tuple[int, int]:
    """The span of the value ``path`` leads to in the JSON ``text``; the first member wins when
    a key repeats. Only the values walked past are parsed."""
    start = _skip(text, 0)
    for key in path:
        if isinstance(key, str) and text.startswith("{", start):
            start = _member(text, start, key)
        elif isinstance(key, int) and text.startswith("[", start):
            start = _item(text, start, key)
        else:
            raise _NotFound
    return start, _value_end(text, start)


def _member(text: str, at: int, key: str) -> int:
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        raise _NotFound
    while True:
        if not text.startswith('"', at):
            raise _NotFound
        name, at = _decode(text, at)
        at = _skip(text, at)
        if not text.startswith(":", at):
            raise _NotFound
        at = _skip(text, at + 1)
        if name == key:
            return at
        at = _skip(text, _value_end(text, at))
        if not text.startswith(",", at):
            raise _NotFound
        at = _skip(text, at + 1)


def _item(text: str, at: int, index: int) -> int:
    if index < 0:
        raise _NotFound
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        raise _NotFound
    for _ in range(index):
        at = _skip(text, _value_end(text, at))
        if not text.startswith(",", at):
            raise _NotFound
        at = _skip(text, at + 1)
    return at


def _decode(text: str, at: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, at)
    except ValueError:
        raise _NotFound from None


def _value(text: str, path: tuple[str | int, ...]) -> tuple[Any, str]:
    """The decoded value at ``path`` and its JSON text as written."""
    start, end = find(text, path)
    return _decode(text, start)[0], text[start:end]


def _get_str(text: str, path: tuple[str | int, ...]) -> str | None:
    value, _ = _value(text, path)
    return value if isinstance(value, str) else None


def _get_int(text: str, path: tuple[str | int, ...]) -> int | None:
    value, _ = _value(text, path)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


def _get_float(text: str, path: tuple[str | int, ...]) -> float | None:
    value, _ = _value(text, path)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _get_bool(text: str, path: tuple[str | int, ...]) -> bool | None:
    value, _ = _value(text, path)
    return value if isinstance(value, bool) else None


def _get_json(text: str, path: tuple[str | int, ...]) -> str | None:
    return _value(text, path)[1]


def _as_text(text: str, path: tuple[str | int, ...]) -> str | None:
    value, raw = _value(text, path)
    if value is None:
        return None
    return value if isinstance(value, str) else raw


def _length(text: str, path: tuple[str | int, ...]) -> int | None:
    start, end = find(text, path)
    if text[start] not in "[{":
        return None
    return len(_MEMBERS.decode(text[start:end]))  # repeated keys count, as in the crate


def _contains(text: str, path: tuple[str | int, ...]) -> bool | None:
    try:
        find(text, path)
    except _NotFound:
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Function:
    compute: Callable[[str, tuple[str | int, ...]], Any]
    returns: pa.DataType


FUNCTIONS: dict[str, _Function] = {
    "json_get": _Function(_get_json, pa.string()),
    "json_get_str": _Function(_get_str, pa.string()),
    "json_get_int": _Function(_get_int, pa.int64()),
    "json_get_float": _Function(_get_float, pa.float64()),
    "json_get_bool": _Function(_get_bool, pa.bool_()),
    "json_get_json": _Function(_get_json, pa.string()),
    "json_as_text": _Function(_as_text, pa.string()),
    "json_length": _Function(_length, pa.uint64()),
    "json_contains": _Function(_contains, pa.bool_()),
}

#: ``json_get(...)::TYPE`` as the crate rewrites it: the typed getter.
_CASTS = {
    "string": "json_get_str",
    "text": "json_get_str",
    "varchar": "json_get_str",
    "int": "json_get_int",
    "integer": "json_get_int",
    "bigint": "json_get_int",
    "float": "json_get_float",
    "double": "json_get_float",
    "real": "json_get_float",
    "bool": "json_get_bool",
    "boolean": "json_get_bool",
}


def evaluate(name: str, documents: pa.Array, *keys: pa.Array) -> pa.Array:
    """``name`` over a column of JSON texts, each row's path taken from the key columns."""
    function = FUNCTIONS[name]
    texts = documents.to_pylist()
    paths = list(zip(*(k.to_pylist() for k in keys), strict=True)) if keys else [()] * len(texts)
    out: list[Any] = []
    for text, path in zip(texts, paths, strict=True):
        if text is None or any(k is None for k in path):
            out.append(None)
            continue
        try:
            out.append(function.compute(text, path))
        except _NotFound:
            out.append(False if name == "json_contains" else None)
    return pa.array(out, function.returns)


# --- rewriting a query ---------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
    |(?P<string>'(?:[^']|'')*')
    |(?P<quoted>"(?:[^"]|"")*")
    |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
    |(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    |(?P<op>->>|->|::|\S)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True, order=True)
class Call:
    """A JSON function call a query makes: the function and its key types (``s`` or ``i``)."""

    function: str
    keys: str


@dataclass(slots=True)
class _Piece:
    text: str
    kind: str
    """The token's kind ("space", "string", "number", "word", "quoted", "op"), or "atom" for a
    rewritten group or call."""
    json_get: list[str] | None = None
    """For a ``json_get`` call: its arguments, so a following ``::TYPE`` picks a typed getter."""


def rewrite(query: str) -> list[tuple[str, dict[Call, str]]]:
    """``query`` with the JSON operators turned into calls and each call bound to the UDF for
    its key types, and those UDFs' names: the candidates to plan, in order. A key that is not a
    literal (a column) has a type only the planner knows, so each such key is tried as an array
    index (integer) first, then as an object key (text): an integer key expression plans only
    as the first, any other only as the second. A function called with one signature keeps its
    name (so are result columns named as in the reference); others get one name per
    signature."""
    if "json_" not in query.lower() and "->" not in query:
        return [(query, {})]
    pieces = [_Piece(m.group(), m.lastgroup or "op") for m in _TOKEN.finditer(query)]
    sites: list[Call] = []
    out, _ = _sequence(pieces, 0, sites, top=True)
    text = _text(out)
    open_keys = sum(c.keys.count("x") for c in sites)
    candidates = []
    for kinds in itertools.product("is", repeat=min(open_keys, _MAX_OPEN_KEYS)):
        choice = iter(kinds)
        bound = [
            Call(c.function, "".join(next(choice, "s") if k == "x" else k for k in c.keys))
            for c in sites
        ]
        candidates.append(_bind(text, bound))
    return candidates


#: Key expressions whose type is tried both ways; any more are taken as text.
_MAX_OPEN_KEYS = 6


def _bind(text: str, sites: list[Call]) -> tuple[str, dict[Call, str]]:
    """``text`` with the placeholder of each call site (numbered in order) replaced by the name
    of the UDF of its bound signature."""
    bound = set(sites)
    names: dict[Call, str] = {}
    for call in sorted(bound):
        alone = sum(1 for c in bound if c.function == call.function) == 1
        names[call] = call.function if alone else f"{call.function}__{call.keys or 'none'}"
    for site, call in enumerate(sites):
        text = text.replace(_placeholder(site), names[call], 1)
    return text, names


def _placeholder(site: int) -> str:
    return f"\x00{site}\x00"


def _sequence(
    pieces: list[_Piece], at: int, calls: list[Call], *, top: bool
) -> tuple[list[_Piece], int]:
    """Rewrites pieces up to the ``)`` closing this group (or the end); returns them and the
    position of that ``)``."""
    out: list[_Piece] = []
    while at < len(pieces):
        piece = pieces[at]
        if piece.kind == "op" and piece.text == ")" and not top:
            return out, at
        if piece.kind == "op" and piece.text == "(":
            inner, at = _sequence(pieces, at + 1, calls, top=False)
            closing = ")" if at < len(pieces) else ""
            at += 1
            name = _last(out, "word")
            if name is not None:  # drop it and the space before the "("
                del out[_index(out, name) :]
            if name is not None and name.text.lower() in FUNCTIONS:
                out.append(_call(name.text.lower(), _arguments(inner), calls))
            else:
                prefix = "" if name is None else name.text
                out.append(_Piece(f"{prefix}({_text(inner)}{closing}", "atom"))
            continue
        if piece.kind == "op" and piece.text in ("->", "->>"):
            after, right = _next_operand(pieces, at + 1)
            left = _take_operand(out) if right is not None else None
            if left is None or right is None:
                out.append(piece)
                at += 1
                continue
            function = "json_get" if piece.text == "->" else "json_as_text"
            out.append(_call(function, [left, right.text], calls))
            at = after
            continue
        if piece.kind == "op" and piece.text == "::":
            target = _last(out, "atom")
            after, type_name = _next_operand(pieces, at + 1)
            cast = None if type_name is None else _CASTS.get(type_name.text.lower())
            if target is not None and target.json_get is not None and cast is not None:
                del out[_index(out, target) :]
                out.append(_call(cast, target.json_get, calls))
                at = after
                continue
        out.append(piece)
        at += 1
    return out, at


def _call(function: str, arguments: list[str], calls: list[Call]) -> _Piece:
    """A call site of ``function``, bound later to the UDF for its arguments' key types."""
    arguments = [a.strip() for a in arguments]
    keys = "".join(_key_kind(k) for k in arguments[1:])
    calls.append(Call(function, keys))
    text = f"{_placeholder(len(calls) - 1)}({', '.join(arguments)})"
    return _Piece(text, "atom", arguments if function == "json_get" else None)


def _key_kind(argument: str) -> str:
    """``i`` for an integer literal, ``s`` for a string literal, ``x`` for an expression whose
    type the planner decides."""
    if re.fullmatch(r"-?\s*\d+", argument):
        return "i"
    if re.fullmatch(r"'(?:[^']|'')*'", argument):
        return "s"
    return "x"


def _arguments(inner: list[_Piece]) -> list[str]:
    arguments: list[list[_Piece]] = [[]]
    for piece in inner:
        if piece.kind == "op" and piece.text == ",":
            arguments.append([])
        else:
            arguments[-1].append(piece)
    return [_text(a) for a in arguments]


def _take_operand(out: list[_Piece]) -> str | None:
    """Removes and returns the operand before a ``->``: a call, a parenthesised group, a literal
    or an identifier chain (``t.col``)."""
    _trim_space(out)
    if not out:
        return None
    last = out[-1]
    if last.kind in ("atom", "string", "number"):
        out.pop()
        return last.text
    if last.kind not in ("word", "quoted"):
        return None
    parts = [out.pop().text]
    while len(out) >= 2 and out[-1].text == "." and out[-2].kind in ("word", "quoted"):
        parts[:0] = [out[-2].text, "."]
        del out[-2:]
    return "".join(parts)


def _next_operand(pieces: list[_Piece], at: int) -> tuple[int, _Piece | None]:
    """The literal or word after position ``at`` (skipping space), and the position after it."""
    while at < len(pieces) and pieces[at].kind == "space":
        at += 1
    if at < len(pieces) and pieces[at].kind in ("string", "number", "word"):
        return at + 1, pieces[at]
    return at, None


def _last(out: list[_Piece], kind: str) -> _Piece | None:
    """The last piece before any space, if it is of ``kind``."""
    for piece in reversed(out):
        if piece.kind != "space":
            return piece if piece.kind == kind else None
    return None


def _index(out: list[_Piece], piece: _Piece) -> int:
    return next(i for i, p in enumerate(out) if p is piece)


def _trim_space(out: list[_Piece]) -> None:
    while out and out[-1].kind == "space":
        out.pop()


def _text(pieces: Iterable[_Piece]) -> str:
    return "".join(p.text for p in pieces)


def register(ctx: SessionContext, calls: dict[Call, str]) -> None:
    """Registers the UDFs a rewritten query needs (``calls``, from :func:`rewrite`) in ``ctx``."""
    from datafusion import udf

    for call, name in calls.items():
        function = FUNCTIONS[call.function]
        key_types = [pa.int64() if k == "i" else pa.string() for k in call.keys]

        def run(
            documents: pa.Array, *keys: pa.Array, function_name: str = call.function
        ) -> pa.Array:
            return evaluate(function_name, documents, *keys)

        ctx.register_udf(
            udf(run, [pa.string(), *key_types], function.returns, "immutable", name=name)
        )
