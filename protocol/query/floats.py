"""Floating-point numbers exactly as the reference writes them, reads them back and canonicalizes
them; the scalar rules that the vectorized renderer (``protocol.query.render.floats``) follows.

A float in a reference answer takes three steps, and each one shows in the bytes:

1. Its data writer prints the value with serde_json's float writer (the ``zmij`` algorithm):
   the shortest digits that read back to the same value, in fixed notation when the decimal
   exponent ``E`` of the first digit is in ``-5..=15`` (``"123.0"``, ``"0.00001"``), otherwise
   ``d.ddde+N`` / ``d.ddde-N``. Float32 values are printed with float32's shortest digits (fixed
   notation for ``E`` in ``-6..=12``). NaN and infinities become ``null``.
2. The text is read back into a JSON value by serde_json's *default* reader (the reference does
   not enable ``float_roundtrip``): the digits go into a 64-bit integer, which is converted to a
   double and multiplied or divided once by a power of ten. That is not always correctly
   rounded, so the value in the answer can differ from the column's value in the last bit; it is
   that value which the answer shows (written again as in step 1) and which is hashed.
3. ``canonical_json`` writes floats as Rust's ``{:e}`` does (shortest digits, ``d.dddeN``) with
   the ``e`` made upper case: ``2.31E1``, ``1E0``, ``-0E0``, ``9.9E-4``.

Python's ``repr`` gives the same shortest digits as zmij, Rust's formatter and Arrow's (all pick
the closest of the shortest decimal strings that read back to the value).
"""

from __future__ import annotations

import math

_U64_MAX = (1 << 64) - 1
_I32_MAX = (1 << 31) - 1
_I32_MIN = -(1 << 31)

POW10: tuple[float, ...] = tuple(float(f"1e{i}") for i in range(309))
"""The reader's table of powers of ten (each the double nearest to ``10**i``)."""

F64_FIXED_EXPONENTS = range(-5, 16)
"""Decimal exponents the float writer prints in fixed notation (float64)."""
F32_FIXED_EXPONENTS = range(-6, 13)
"""The same for float32 values."""


class NumberOutOfRange(ValueError):
    """A JSON number the reference's reader refuses (its value overflows a double)."""


def digits_of(text: str) -> tuple[str, int]:
    """The significant digits of an unsigned decimal text (``"0.00123"``, ``"1.5e+300"``) and
    the decimal exponent of the first one: ``("123", -3)``. Zero gives ``("0", 0)``."""
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    stripped = digits.lstrip("0")
    if not stripped:
        return "0", 0
    leading = len(digits) - len(stripped)
    return stripped.rstrip("0"), int(exponent or 0) + len(whole) - 1 - leading


def shortest_digits(value: float) -> tuple[str, int]:
    """The shortest digits that read back to ``abs(value)`` and the exponent of the first one."""
    return digits_of(repr(abs(value)))


def shortest_digits_f32(value: float) -> tuple[str, int]:
    """The same for a float32 value (its own shortest digits, not the double's)."""
    import numpy as np

    return digits_of(str(abs(np.float32(value))))


def layout(negative: bool, digits: str, exponent: int, fixed: range) -> str:
    """The float writer's text for ``0.d1d2d3... x 10**(exponent+1)``."""
    sign = "-" if negative else ""
    length = len(digits)
    if exponent in fixed:
        if exponent >= length - 1:
            return f"{sign}{digits}{'0' * (exponent - length + 1)}.0"
        if exponent >= 0:
            return f"{sign}{digits[: exponent + 1]}.{digits[exponent + 1 :]}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    head = digits[0] + (f".{digits[1:]}" if length > 1 else "")
    return f"{sign}{head}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"


def wire_text(value: float) -> str:
    """serde_json's text of a finite double (``null`` is the caller's, for NaN and infinities)."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exponent = shortest_digits(value)
    return layout(value < 0, digits, exponent, F64_FIXED_EXPONENTS)


def canonical_text(value: float) -> str:
    """canonical_json's text of a double: Rust ``{:e}`` with an upper-case ``E``; ``null`` for
    NaN and infinities (a JSON value cannot hold them)."""
    if not math.isfinite(value):
        return "null"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0E0"
    digits, exponent = shortest_digits(value)
    head = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{sign}{head}E{exponent}"


def from_parts(significand: int, exponent: int) -> float:
    """serde_json's default conversion of ``significand x 10**exponent`` (a u64 and an i32)."""
    result = float(significand)
    while True:
        if -308 <= exponent <= 308:
            if exponent >= 0:
                result *= POW10[exponent]
                if math.isinf(result):
                    raise NumberOutOfRange("number out of range")
            else:
                result /= POW10[-exponent]
            return result
        if result == 0.0:
            return result
        if exponent >= 0:
            raise NumberOutOfRange("number out of range")
        result /= 1e308
        exponent += 308


def reread_parts(digits: str, exponent: int, fixed: range) -> tuple[int, int]:
    """The integer and power of ten the reader takes from the writer's text of ``digits`` with
    first-digit exponent ``exponent``: fixed-notation integers carry their ``.0``."""
    length = len(digits)
    if exponent in fixed and exponent >= length - 1:
        return int(digits) * 10 ** (exponent - length + 2), -1
    return int(digits), exponent - length + 1


def reread(value: float, *, single: bool = False) -> float:
    """The value a finite float has in the reference's answer (steps 1 and 2 above); ``single``
    for a float32 (or float16) column."""
    if value == 0:
        return value
    if single:
        digits, exponent = shortest_digits_f32(value)
        fixed = F32_FIXED_EXPONENTS
    else:
        digits, exponent = shortest_digits(value)
        fixed = F64_FIXED_EXPONENTS
    significand, power = reread_parts(digits, exponent, fixed)
    result = from_parts(significand, power)
    return -result if value < 0 else result


def read_number(text: str) -> int | float:
    """A JSON number literal as serde_json's default reader makes it: an integer when it has no
    fraction or exponent and fits a u64 (or an i64 when negative), else a double (``-0`` is the
    double ``-0.0``). Raises ``NumberOutOfRange`` where the reader does."""
    negative = text.startswith("-")
    body = text[1:] if negative else text
    significand = 0
    position = 0
    exponent = 0
    overflowed = False
    while position < len(body) and body[position].isdigit():
        if not overflowed:
            digit = ord(body[position]) - 48
            if _overflows(significand, digit):
                overflowed = True
            else:
                significand = significand * 10 + digit
                position += 1
                continue
        exponent += 1  # digits past the u64's capacity only scale it
        position += 1
    is_integer = position == len(body)
    if is_integer and not overflowed:
        if not negative:
            return significand
        if significand == 0 or significand > 1 << 63:
            return -float(significand)
        return -significand
    if position < len(body) and body[position] == ".":
        position += 1
        full = False  # the first fraction digit that does not fit ends the significand
        while position < len(body) and body[position].isdigit():
            digit = ord(body[position]) - 48
            full = full or _overflows(significand, digit)
            if not full:
                significand = significand * 10 + digit
                exponent -= 1
            position += 1
    if position < len(body) and body[position] in "eE":
        final = _exponent_part(body[position + 1 :], exponent, significand)
        if final is None:
            return -0.0 if negative else 0.0
        exponent = final
    result = from_parts(significand, exponent)
    return -result if negative else result


def _exponent_part(text: str, starting: int, significand: int) -> int | None:
    """The final power of ten, ``None`` for an exponent so negative the value is zero."""
    positive = not text.startswith("-")
    digits = text.lstrip("+-")
    value = 0
    for char in digits:
        value = value * 10 + (ord(char) - 48)
        if value > _I32_MAX:
            if significand != 0 and positive:
                raise NumberOutOfRange("number out of range")
            return None
    final = starting + value if positive else starting - value
    return max(_I32_MIN, min(_I32_MAX, final))


def _overflows(significand: int, digit: int) -> bool:
    return significand * 10 + digit > _U64_MAX
