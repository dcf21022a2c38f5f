"""``FetchStep::EthereumLogs.filter``: an SQL ``WHERE`` clause turned into an ``eth_getLogs`` filter.

The reference plans ``SELECT * FROM logs WHERE <filter>`` and keeps the conditions its table
provider can send to the node; any other condition fails the fetch. odfd accepts the same ones,
joined by ``AND`` (parentheses allowed, literals on either side):

- ``address = X'<20 bytes>'`` and ``topic0`` .. ``topic3 = X'<32 bytes>'``; several values of one
  column with ``OR`` (``address = X'..' OR address = X'..'``) or ``IN (X'..', ...)``;
- ``block_number`` with ``=``, ``<``, ``<=``, ``>``, ``>=`` and an integer, or ``BETWEEN a AND b``;
- ``eth_event_selector('Name(type name, ...)')`` stands for the ``topic0`` of that event.

Conditions on other columns (or of other forms) are refused with the condition named: filter
such rows in the source's ``preprocess`` query instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from odfd.ingest.errors import UnsupportedError
from odfd.ingest.ethereum.logs import parse_signature

WHERE = "fetch.filter"
_TOPICS = ("topic0", "topic1", "topic2", "topic3")
_SIZES = {"address": 20, **dict.fromkeys(_TOPICS, 32)}
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<hex>[xX]'[^']*')
    | (?P<string>'(?:[^']|'')*')
    | (?P<number>\d+)
    | (?P<word>[A-Za-z_]\w*|"[^"]+")
    | (?P<op><=|>=|<>|!=|=|<|>|\(|\)|,)
    )""",
    re.X,
)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


@dataclass(frozen=True)
class LogFilter:
    """Which logs to ask the node for: ``None`` means any value."""

    addresses: frozenset[bytes] | None = None
    topics: tuple[frozenset[bytes] | None, ...] = (None, None, None, None)
    from_block: int = 0
    to_block: int | None = None
    """Last block to scan; ``None``: the chain's latest block."""

    def restricted(self, column: str, values: frozenset[bytes], text: str) -> LogFilter:
        """This filter with ``column`` also restricted to ``values`` (the sets intersect)."""
        if column == "address":
            merged = values if self.addresses is None else self.addresses & values
            found = replace(self, addresses=merged)
        else:
            n = _TOPICS.index(column)
            old = self.topics[n]
            merged = values if old is None else old & values
            found = replace(self, topics=(*self.topics[:n], merged, *self.topics[n + 1 :]))
        if not merged:
            raise UnsupportedError(f"{WHERE}: `{text}` leaves no value of {column} to ask for")
        return found

    def blocks(self, low: int, high: int | None) -> LogFilter:
        """This filter with the block range narrowed to ``[low, high]``."""
        top = (
            high
            if self.to_block is None
            else (self.to_block if high is None else min(high, self.to_block))
        )
        return replace(self, from_block=max(low, self.from_block), to_block=top)

    def rpc_params(self, first: int, last: int) -> dict[str, Any]:
        """The ``eth_getLogs`` filter object for blocks ``first`` .. ``last``."""
        params: dict[str, Any] = {"fromBlock": hex(first), "toBlock": hex(last)}
        if self.addresses is not None:
            params["address"] = sorted("0x" + a.hex() for a in self.addresses)
        topics = [None if t is None else sorted("0x" + v.hex() for v in t) for t in self.topics]
        while topics and topics[-1] is None:
            topics.pop()
        if topics:
            params["topics"] = topics
        return params


def parse_filter(text: str | None) -> LogFilter:
    """The ``eth_getLogs`` filter of a ``WHERE`` clause (no clause: every log of every block)."""
    found = LogFilter()
    if text is None or not text.strip():
        return found
    tree = _Parser(text).parse()
    for condition in _conjuncts(tree):
        found = _apply(found, condition)
    return found


# A parsed clause: ("and" | "or", [trees]), ("cmp", column, op, value, text),
# ("in", column, [values], text) or ("other", text) for a comparison of no column with a value;
# a value is bytes (a hex literal or an event selector) or an int.
Tree = tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        position, end = 0, len(text.rstrip())
        while position < end:
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise UnsupportedError(
                    f"{WHERE}: cannot read {text[position:].strip()[:40]!r} "
                    f"(at character {position + 1})"
                )
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match[kind], match.start(kind)))
            position = match.end()
        self.at = 0

    def parse(self) -> Tree:
        tree = self._or()
        if self.at < len(self.tokens):
            raise self._error("an unexpected", self.tokens[self.at])
        return tree

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _at_op(self, value: str) -> bool:
        token = self._peek()
        return token is not None and token[0] == "op" and token[1] == value

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token is not None and token[0] == "word" and token[1].lower() == word:
            self.at += 1
            return True
        return False

    def _take(self, kind: str, value: str | None = None) -> tuple[str, str, int]:
        token = self._peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            raise self._error(f"expected {value or kind}, found", token)
        self.at += 1
        return token

    def _error(self, what: str, token: tuple[str, str, int] | None) -> UnsupportedError:
        found = "the end" if token is None else repr(token[1])
        return UnsupportedError(f"{WHERE}: {what} {found} in `{' '.join(self.text.split())}`")

    def _or(self) -> Tree:
        parts = [self._and()]
        while self._keyword("or"):
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else ("or", parts)

    def _and(self) -> Tree:
        parts = [self._primary()]
        while self._keyword("and"):
            parts.append(self._primary())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def _primary(self) -> Tree:
        token = self._peek()
        if self._at_op("("):
            self.at += 1
            tree = self._or()
            self._take("op", ")")
            return tree
        start = token[2] if token else len(self.text)
        left = self._operand()
        if isinstance(left, str) and self._keyword("between"):
            low = self._operand()
            if not self._keyword("and"):
                raise self._error("expected AND, found", self._peek())
            high = self._operand()
            text = self._since(start)
            return ("and", [("cmp", left, ">=", low, text), ("cmp", left, "<=", high, text)])
        if isinstance(left, str) and self._keyword("in"):
            self._take("op", "(")
            values = [self._operand()]
            while self._at_op(","):
                self.at += 1
                values.append(self._operand())
            self._take("op", ")")
            return ("in", left, values, self._since(start))
        op = self._take("op")[1]
        if op in ("(", ")", ","):
            raise self._error("expected a comparison, found", self.tokens[self.at - 1])
        right = self._operand()
        text = self._since(start)
        if isinstance(left, str) and not isinstance(right, str):
            return ("cmp", left, op, right, text)
        if isinstance(right, str) and not isinstance(left, str) and op in _FLIP:
            return ("cmp", right, _FLIP[op], left, text)
        return ("other", text)

    def _since(self, start: int) -> str:
        end = self.tokens[self.at - 1]
        return " ".join(self.text[start : end[2] + len(end[1])].split())

    def _operand(self) -> str | bytes | int:
        """A column name (str), a hex literal (bytes) or an integer."""
        kind, value, _ = token = self._take_any()
        if kind == "hex":
            try:
                return bytes.fromhex(value[2:-1])
            except ValueError:
                raise self._error("a malformed hex literal", token) from None
        if kind == "number":
            return int(value)
        if kind == "word" and self._at_op("("):
            if value.lower() != "eth_event_selector":
                raise self._error("an unsupported function", token)
            self.at += 1
            argument = self._take("string")[1][1:-1].replace("''", "'")
            self._take("op", ")")
            return parse_signature(argument, "fetch.filter: eth_event_selector").selector
        if kind == "word":
            return value.strip('"')
        raise self._error("expected a column or a value, found", token)

    def _take_any(self) -> tuple[str, str, int]:
        token = self._peek()
        if token is None:
            raise self._error("expected a column or a value, found", None)
        self.at += 1
        return token


def _conjuncts(tree: Tree) -> list[Tree]:
    if tree[0] == "and":
        return [c for part in tree[1] for c in _conjuncts(part)]
    return [tree]


def _apply(found: LogFilter, condition: Tree) -> LogFilter:
    kind = condition[0]
    if kind == "cmp":
        _, column, op, value, text = condition
        if column in _SIZES and op == "=":
            return found.restricted(column, frozenset([_sized(column, value, text)]), text)
        if column == "block_number" and isinstance(value, int):
            return _block_range(found, op, value, text)
        raise _not_pushable(text)
    if kind == "in":
        _, column, values, text = condition
        if column not in _SIZES:
            raise _not_pushable(text)
        return found.restricted(column, frozenset(_sized(column, v, text) for v in values), text)
    if kind == "or":
        parts = _disjuncts(condition)
        text = " OR ".join(part[-1] if isinstance(part[-1], str) else "(...)" for part in parts)
        columns = {part[1] for part in parts if part[0] == "cmp" and part[2] == "="}
        if any(part[0] != "cmp" or part[2] != "=" for part in parts) or len(columns) != 1:
            raise _not_pushable(text)
        [column] = columns
        if column not in _SIZES:
            raise _not_pushable(text)
        values = frozenset(_sized(column, part[3], part[4]) for part in parts)
        return found.restricted(column, values, text)
    raise _not_pushable(condition[-1])


def _disjuncts(tree: Tree) -> list[Tree]:
    if tree[0] == "or":
        return [d for part in tree[1] for d in _disjuncts(part)]
    return [tree]


def _sized(column: str, value: Any, text: str) -> bytes:
    size = _SIZES[column]
    if not isinstance(value, bytes) or len(value) != size:
        raise UnsupportedError(
            f"{WHERE}: in `{text}`, {column} must be compared with a hex literal X'…' of "
            f"{size} bytes"
        )
    return value


def _block_range(found: LogFilter, op: str, value: int, text: str) -> LogFilter:
    if op == "=":
        return found.blocks(value, value)
    if op == ">":
        return found.blocks(value + 1, None)
    if op == ">=":
        return found.blocks(value, None)
    if op == "<=":
        return found.blocks(0, value)
    if op == "<" and value > 0:
        return found.blocks(0, value - 1)
    raise _not_pushable(text)


def _not_pushable(text: str) -> UnsupportedError:
    return UnsupportedError(
        f"{WHERE}: `{text}` cannot be sent to the node as an eth_getLogs filter (only address, "
        "topic0..topic3 equalities and block_number comparisons joined by AND); filter it in "
        "the source's preprocess query instead"
    )
