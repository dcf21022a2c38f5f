"""A collection request's URL read into ``odfd.app.odata_query``'s model: the address
(``name`` or ``name(key)``) and the system query options ``$select``, ``$filter``, ``$orderby``,
``$skip``, ``$top`` and ``$inlinecount`` (``$format`` is ``formats``' to read). Any other ``$``
option is refused naming it; options without ``$`` are the client's own and ignored, as OData says.

``$filter`` takes what the reference's takes: ``eq ne lt gt le ge``, ``and``, ``or``, ``not``,
``in (...)``, parentheses, and literals (strings in single quotes, numbers, ``true``, ``false``,
``null``, dates and times, bare or as OData 3 typed literals such as
``datetime'2020-01-01T00:00'``); functions and arithmetic are refused as unsupported."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass

from odfd.app.odata_query import (
    BadODataRequestError,
    Column,
    Compare,
    Expr,
    In,
    Logical,
    Not,
    ODataNotFoundError,
    QueryOptions,
    Scalar,
    UnsupportedODataError,
    Value,
)

SUPPORTED = ("$select", "$filter", "$orderby", "$skip", "$top", "$inlinecount", "$format")
_ADDRESS = re.compile(r"(?P<name>[A-Za-z0-9._-]+)(\((?P<key>[^)]+)\))?")
_KEY = re.compile(r"(?:(?P<property>[A-Za-z_][A-Za-z0-9_]*)=)?(?P<offset>\d+)L?")
_COMPARISONS = ("eq", "ne", "lt", "gt", "le", "ge")
_ARITHMETIC = ("add", "sub", "mul", "div", "mod")
_DATETIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?"
_TOKEN = re.compile(
    rf"""\s*(?:
    (?P<typed>(?:datetimeoffset|datetime|guid|time|binary|X)'(?:[^']|'')*')
    |(?P<string>'(?:[^']|'')*')
    |(?P<datetime>{_DATETIME})
    |(?P<date>\d{{4}}-\d{{2}}-\d{{2}})
    |(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[LlMmDdFf]?)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>[(),])
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Address:
    name: str
    key: int | None


def parse_address(segment: str) -> Address:
    """``foo.bar`` or ``foo.bar(2)`` (also ``(2L)`` and ``(offset=2)``, as OData 3 clients
    write an Int64 key)."""
    found = _ADDRESS.fullmatch(segment)
    if found is None:
        raise ODataNotFoundError(f"no collection {segment} on this node")
    name, key = found["name"], found["key"]
    if key is None:
        return Address(name, None)
    keyed = _KEY.fullmatch(key.strip())
    if keyed is None:
        raise BadODataRequestError(
            f"key {key!r} of {name} is not an offset: entries are keyed by their offset, "
            f"e.g. {name}(0)"
        )
    return Address(name, int(keyed["offset"]))


def parse_options(query: Mapping[str, str]) -> QueryOptions:
    """The system query options of a collection request's query string."""
    for option in query:
        if option.startswith("$") and option not in SUPPORTED:
            raise UnsupportedODataError(
                f"query option {option} is not supported (this node takes {', '.join(SUPPORTED)})"
            )
    inline_count = query.get("$inlinecount", "none").strip()
    if inline_count not in ("none", "allpages"):
        raise BadODataRequestError(f"$inlinecount={inline_count} is neither allpages nor none")
    select = tuple(name.strip() for name in query.get("$select", "").split(",") if name.strip())
    filter_text = query.get("$filter")
    return QueryOptions(
        select=() if select == ("*",) else select,
        filter=None if filter_text is None else parse_filter(filter_text),
        order_by=_order_by(query.get("$orderby", "")),
        skip=_count(query, "$skip") or 0,
        top=_count(query, "$top"),
        inline_count=inline_count == "allpages",
    )


def _count(query: Mapping[str, str], option: str) -> int | None:
    text = query.get(option)
    if text is None:
        return None
    if not text.strip().isdigit():
        raise BadODataRequestError(f"{option}={text} is not a non-negative integer")
    return int(text)


def _order_by(text: str) -> tuple[tuple[str, bool], ...]:
    order = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        words = item.split()
        if len(words) > 2 or (len(words) == 2 and words[1].lower() not in ("asc", "desc")):
            raise BadODataRequestError(f"$orderby: {item!r} is not 'property [asc|desc]'")
        order.append((words[0], len(words) == 1 or words[1].lower() == "asc"))
    return tuple(order)


def parse_filter(text: str) -> Expr:
    """``$filter``'s expression; ``BadODataRequestError`` naming where it stops making sense."""
    parser = _Parser(text)
    expr = parser.or_expr()
    if parser.peek() is not None:
        parser.fail("expected the end of the expression")
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while text[position:].strip():
            found = _TOKEN.match(text, position)
            if found is None or found.lastgroup is None:
                raise BadODataRequestError(
                    f"$filter: cannot read {text[position:].strip()!r} (at character {position})"
                )
            self.tokens.append(
                (found.lastgroup, found[found.lastgroup], found.start(found.lastgroup))
            )
            position = found.end()
        self.at = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def fail(self, why: str) -> None:
        token = self.peek()
        where = "the end" if token is None else f"{token[1]!r} (character {token[2]})"
        raise BadODataRequestError(f"$filter {self.text!r}: {why} at {where}")

    def take_word(self, *words: str) -> str | None:
        token = self.peek()
        if token is not None and token[0] == "word" and token[1].lower() in words:
            self.at += 1
            return token[1].lower()
        return None

    def take_punct(self, punct: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "punct" and token[1] == punct:
            self.at += 1
            return True
        return False

    def or_expr(self) -> Expr:
        expr = self.and_expr()
        while self.take_word("or"):
            expr = Logical("or", expr, self.and_expr())
        return expr

    def and_expr(self) -> Expr:
        expr = self.not_expr()
        while self.take_word("and"):
            expr = Logical("and", expr, self.not_expr())
        return expr

    def not_expr(self) -> Expr:
        if self.take_word("not"):
            return Not(self.not_expr())
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.primary()
        op = self.take_word(*_COMPARISONS)
        if op is not None:
            return Compare(op, left, self.primary())
        if self.take_word("in"):
            if not self.take_punct("("):
                self.fail("expected '(' after in")
            choices = [self.primary()]
            while self.take_punct(","):
                choices.append(self.primary())
            if not self.take_punct(")"):
                self.fail("expected ')' closing the in list")
            return In(left, tuple(choices))
        if self.take_word(*_ARITHMETIC):
            raise UnsupportedODataError("arithmetic in $filter is not supported")
        return left

    def primary(self) -> Expr:
        token = self.peek()
        if token is None:
            self.fail("expected a value or a property")
            raise AssertionError
        kind, text, _ = token
        self.at += 1
        if kind == "punct" and text == "(":
            expr = self.or_expr()
            if not self.take_punct(")"):
                self.fail("expected ')'")
            return expr
        if kind == "word":
            lowered = text.lower()
            if lowered in ("true", "false"):
                return Value(lowered == "true")
            if lowered == "null":
                return Value(None)
            if self.take_punct("("):
                raise UnsupportedODataError(f"function {text}() in $filter is not supported")
            return Column(text)
        if kind in ("string", "typed", "datetime", "date", "number"):
            return Value(self.literal(kind, text))
        self.at -= 1
        self.fail("expected a value or a property")
        raise AssertionError

    def literal(self, kind: str, text: str) -> Scalar:
        try:
            if kind == "string":
                return text[1:-1].replace("''", "'")
            if kind == "datetime":
                return _datetime(text)
            if kind == "date":
                return dt.date.fromisoformat(text)
            if kind == "number":
                digits = text.rstrip("LlMmDdFf")
                return int(digits) if re.fullmatch(r"-?\d+", digits) else float(digits)
            prefix, _, quoted = text.partition("'")
            value = quoted[:-1].replace("''", "'")
            if prefix in ("datetime", "datetimeoffset"):
                return _datetime(value)
            if prefix == "guid":
                return value
        except ValueError as error:
            raise BadODataRequestError(f"$filter: {text} is not a valid literal: {error}") from None
        raise UnsupportedODataError(f"$filter: {prefix} literals are not supported")


def _datetime(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
