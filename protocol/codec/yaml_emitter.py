"""Writes a plain tree as YAML text byte-identical to what serde_yaml (libyaml's emitter) writes.

Block style throughout, two-space indents, sequences not indented under their mapping key, empty
collections as ``[]`` / ``{}``, no line folding (the reference disables the width limit), and each
string in the first style libyaml allows: plain, then single-quoted, then double-quoted; strings
with a newline become literal blocks (``|``) when libyaml permits. Strings that would read back as
something else (``'true'``, ``'10'``, ``'0123'``, ``''``) are single-quoted, as serde_yaml does.
"""

from __future__ import annotations

from typing import Any

from protocol.codec.tree_values import digits_but_not_number, resolve_plain
from protocol.model.maps import format_float

_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_BREAKS = frozenset("\r\n\x85\u2028\u2029")
_LOSSY_BREAKS = frozenset("\r\x85\u2028\u2029")
"""Breaks that single-quoted and literal styles fold or normalise away on reading; libyaml (and so
the reference) writes them that way regardless, we double-quote them so the value survives."""
_ESCAPES = {
    "\0": "0",
    "\x07": "a",
    "\b": "b",
    "\t": "t",
    "\n": "n",
    "\x0b": "v",
    "\x0c": "f",
    "\r": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\xa0": "_",
    "\u2028": "L",
    "\u2029": "P",
}
_MAX_SIMPLE_KEY = 128


def dump(tree: Any) -> str:
    """One YAML document (no ``---``), ending with a newline."""
    lines: list[str] = []
    if isinstance(tree, dict) and tree:
        _mapping(tree, 0, lines, None)
    elif isinstance(tree, list) and tree:
        _sequence(tree, 0, lines, None)
    else:
        lines.extend(_leaf(tree, 2))
    return "\n".join(lines) + "\n"


def _printable(ch: str) -> bool:
    code = ord(ch)
    if code < 0x80:
        return code == 0x0A or 0x20 <= code <= 0x7E
    if code < 0xA0:
        return False
    if 0xD800 <= code <= 0xDFFF or code in (0xFEFF, 0xFFFE, 0xFFFF):
        return False
    return True


class _Analysis:
    __slots__ = ("multiline", "plain", "single", "block")

    def __init__(self, text: str) -> None:
        if not text:
            self.multiline, self.plain, self.single, self.block = False, True, True, False
            return
        # Only block context is written, so flow indicators (``,[]{}``) need no quoting here.
        block_ind = line_breaks = special = False
        leading_space = leading_break = trailing_space = trailing_break = False
        break_space = space_break = previous_space = previous_break = False
        if text.startswith("---") or text.startswith("..."):
            block_ind = True
        preceded_by_ws = True
        n = len(text)
        for i, ch in enumerate(text):
            followed_by_ws = i + 1 >= n or text[i + 1] in " \t\r\n\x85\u2028\u2029"
            if i == 0:
                if ch in _FIRST_INDICATORS:
                    block_ind = True
                if ch in "?:" and followed_by_ws:
                    block_ind = True
                if ch == "-" and followed_by_ws:
                    block_ind = True
            else:
                if ch == ":" and followed_by_ws:
                    block_ind = True
                if ch == "#" and preceded_by_ws:
                    block_ind = True
            if not _printable(ch):
                special = True
            if ch in _BREAKS:
                line_breaks = True
            if ch == " ":
                if i == 0:
                    leading_space = True
                if i == n - 1:
                    trailing_space = True
                if previous_break:
                    break_space = True
                previous_space, previous_break = True, False
            elif ch in _BREAKS:
                if i == 0:
                    leading_break = True
                if i == n - 1:
                    trailing_break = True
                if previous_space:
                    space_break = True
                previous_space, previous_break = False, True
            else:
                previous_space = previous_break = False
            preceded_by_ws = ch in " \t\r\n\x85\u2028\u2029"
        plain = single = block = True
        if leading_space or leading_break or trailing_space or trailing_break:
            plain = False
        if trailing_space:
            block = False
        if break_space:
            plain = single = False
        if space_break or special:
            plain = single = block = False
        if line_breaks or block_ind:
            plain = False
        self.multiline, self.plain, self.single, self.block = line_breaks, plain, single, block


def _scalar(value: Any, indent: int, simple_key: bool) -> list[str]:
    """The text of a scalar: one line, or several for a literal block (continuation lines indented)."""
    if value is None:
        return ["null"]
    if value is True:
        return ["true"]
    if value is False:
        return ["false"]
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, float):
        if value != value:
            return [".nan"]
        if value in (float("inf"), float("-inf")):
            return [".inf" if value > 0 else "-.inf"]
        return [format_float(value)]
    text = str(value)
    analysis = _Analysis(text)
    if "\n" in text:
        style = "literal"
    elif digits_but_not_number(text) or not isinstance(resolve_plain(text), str):
        style = "single"
    else:
        style = "plain"
    if simple_key and analysis.multiline:
        style = "double"
    if style == "plain" and (not analysis.plain or (not text and simple_key)):
        style = "single"
    if style == "single" and not analysis.single:
        style = "double"
    if style == "literal" and (not analysis.block or simple_key):
        style = "double"
    if style != "plain" and not _LOSSY_BREAKS.isdisjoint(text):
        style = "double"
    if style == "plain":
        return [text]
    if style == "single":
        return _single_quoted(text, indent)
    if style == "double":
        return [_double_quoted(text)]
    return _literal(text, indent)


def _single_quoted(text: str, indent: int) -> list[str]:
    lines = ["'"]
    breaks = False
    for ch in text:
        if ch in _BREAKS:
            if not breaks and ch == "\n":
                lines.append("")
            lines.append("")
            breaks = True
        else:
            if breaks:
                lines[-1] = " " * indent
                breaks = False
            lines[-1] += "''" if ch == "'" else ch
    if breaks:
        lines[-1] = " " * indent
    lines[-1] += "'"
    return lines


def _double_quoted(text: str) -> str:
    out = ['"']
    for ch in text:
        if _printable(ch) and ch not in _BREAKS and ch not in '"\\' and ch != "\ufeff":
            out.append(ch)
            continue
        escape = _ESCAPES.get(ch)
        if escape is not None:
            out.append("\\" + escape)
            continue
        code = ord(ch)
        if code <= 0xFF:
            out.append(f"\\x{code:02X}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def _literal(text: str, indent: int) -> list[str]:
    header = "|"
    if text[0] in " " or text[0] in _BREAKS:
        header += "2"
    if text[-1] not in _BREAKS:
        header += "-"
    elif len(text) == 1 or text[-2] in _BREAKS:
        header += "+"
    lines = [header]
    body = text[:-1] if text[-1] in _BREAKS else text
    pad = " " * indent
    for line in body.split("\n"):
        lines.append(pad + line if line else "")
    if header.endswith("+"):
        lines.pop()
        lines.append("")
    return lines


def _leaf(value: Any, indent: int) -> list[str]:
    """A scalar or an empty collection (written in flow style, as libyaml does)."""
    if isinstance(value, dict):
        return ["{}"]
    if isinstance(value, list):
        return ["[]"]
    return _scalar(value, indent, False)


def _mapping(value: dict[str, Any], indent: int, lines: list[str], first_lead: str | None) -> None:
    """Keys at column ``indent``; the first key continues ``first_lead`` when given (``- key: ...``)."""
    for number, (key, item) in enumerate(value.items()):
        lead = first_lead if number == 0 and first_lead is not None else " " * indent
        key_text = _scalar(str(key), indent, True)
        if len(key_text) > 1 or len(str(key)) > _MAX_SIMPLE_KEY:
            lines.append(lead + "? " + key_text[0])
            lines.extend(key_text[1:])
            _value(item, indent, lines, " " * indent + ":", indent + 2)
        else:
            _value(item, indent, lines, lead + key_text[0] + ":", indent)


def _value(item: Any, indent: int, lines: list[str], head: str, child_indent: int) -> None:
    if isinstance(item, dict) and item:
        if child_indent == indent:
            lines.append(head)
            _mapping(item, indent + 2, lines, None)
        else:
            _mapping(item, child_indent, lines, head + " ")
    elif isinstance(item, list) and item:
        if child_indent == indent:
            lines.append(head)
            _sequence(item, indent, lines, None)
        else:
            _sequence(item, child_indent, lines, head + " ")
    else:
        text = _leaf(item, indent + 2)
        lines.append(head + " " + text[0])
        lines.extend(text[1:])


def _sequence(value: list[Any], indent: int, lines: list[str], first_lead: str | None) -> None:
    """Items as ``- `` at column ``indent``; the first continues ``first_lead`` when given (``- - x``)."""
    for number, item in enumerate(value):
        lead = (first_lead if number == 0 and first_lead is not None else " " * indent) + "- "
        if isinstance(item, dict) and item:
            _mapping(item, indent + 2, lines, lead)
        elif isinstance(item, list) and item:
            _sequence(item, indent + 2, lines, lead)
        else:
            text = _leaf(item, indent + 2)
            lines.append(lead + text[0])
            lines.extend(text[1:])
