"""Float columns as the reference answers them, vectorized (the rules are in
``protocol.query.floats``).

Arrow's float-to-text cast gives the shortest digits fast, and its layout differs from
serde_json's only in a few places (``123`` for ``123.0``; fixed or scientific notation for first-
digit exponents -6 and 10..15). So the texts are Arrow's, read back into digits and exponents with
Arrow string kernels, put through the reference's re-read on whole numpy arrays (the values it
changes get new texts), and patched where the layouts differ. Canonical texts (Rust ``{:e}``) are
assembled from the digits with the same kernels. Columns whose values all have a few decimals
(the common case) skip all that: their wire texts are two integer casts (``_fixed_places``), and
their canonical digits and exponents come from the same integers (``_fixed_parts``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from protocol.query.floats import F32_FIXED_EXPONENTS, F64_FIXED_EXPONENTS, POW10, wire_text
from protocol.query.render.text import (
    NULL,
    TEXT,
    Indexed,
    Piece,
    constant,
    digit_count,
    integer_texts,
    join,
    with_nulls,
)

_POW10 = np.array(POW10, dtype=np.float64)
_POW10_INT = np.array([10**i for i in range(20)], dtype=np.uint64)


class Decomposed:
    """Magnitudes as ``0.d1..dL x 10**(E+1)``: the digits as an integer ``digits`` (no trailing
    zeros), their count ``length`` and the first digit's exponent ``exponent``."""

    __slots__ = ("digits", "exponent", "length")

    def __init__(self, digits: np.ndarray, length: np.ndarray, exponent: np.ndarray) -> None:
        self.digits = digits
        self.length = length
        self.exponent = exponent

    def update(self, rows: np.ndarray, other: Decomposed) -> None:
        self.digits[rows] = other.digits
        self.length[rows] = other.length
        self.exponent[rows] = other.exponent


def float_pieces(array: pa.Array, *, canonical: bool) -> list[Piece]:
    """``render_floats``'s texts as pieces of a row join: a column without nulls whose values
    all have a few decimals (``_fixed_places``) in parts the row join copies once."""
    if not canonical and pa.types.is_float64(array.type) and array.null_count == 0:
        numbers = np.asarray(array.to_numpy(zero_copy_only=False), np.float64)
        places = _fixed_places(numbers)
        if places is not None:
            return _fixed_pieces(numbers, places)
    return [render_floats(array, canonical=canonical)]


def render_floats(array: pa.Array, *, canonical: bool) -> pa.LargeStringArray:
    """JSON texts of a float16/32/64 column as the reference's answer holds them: ``null`` for
    nulls, NaN and infinities."""
    rows = len(array)
    single = not pa.types.is_float64(array.type)
    numbers = np.asarray(array.cast(pa.float64()).to_numpy(zero_copy_only=False), np.float64)
    live = np.isfinite(numbers)
    if array.null_count:
        live &= np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    if not live.any():
        return constant(NULL, rows)
    everything = bool(live.all())
    rendered = _render(numbers if everything else numbers[live], single, canonical)
    if everything:
        return rendered
    return with_nulls(pc.replace_with_mask(constant(NULL, rows), pa.array(live), rendered), None)


def _render(numbers: np.ndarray, single: bool, canonical: bool) -> pa.LargeStringArray:
    """Texts of finite values after the reference's write and re-read."""
    if not single:
        places = _fixed_places(numbers)
        if places is not None and canonical:
            return _canonical(np.signbit(numbers), _fixed_parts(numbers, places))
        if places is not None:
            return join(_fixed_pieces(numbers, places))
    texts = _texts(numbers, single)
    parts = decompose(pc.utf8_ltrim(texts, characters="-"))
    fixed = F32_FIXED_EXPONENTS if single else F64_FIXED_EXPONENTS
    magnitudes = np.abs(numbers)
    reread = np.where(magnitudes == 0, 0.0, _from_parts(parts, fixed))
    # a value the reader cannot hold makes the reference fail; keep it as it is
    reread = np.copysign(np.where(np.isinf(reread), magnitudes, reread), numbers)
    changed = np.flatnonzero(reread != numbers) if not single else np.arange(len(numbers))
    if changed.size:
        again = _texts(reread[changed], False)
        texts = pc.replace_with_mask(texts, _mask(len(numbers), changed), again)
        parts.update(changed, decompose(pc.utf8_ltrim(again, characters="-")))
    if canonical:
        return _canonical(np.signbit(reread), parts)
    return _wire(texts, reread, parts.exponent)


_EXACT_BELOW = 9e14
"""Magnitudes below which a value's digits (times ten, for a whole number) fit in 15 digits."""
_EXACT_FROM = 1e-5


def _fixed_places(numbers: np.ndarray) -> np.ndarray | None:
    """The decimal places ``k`` of each value when every value is in ``[1e-5, 9e14)`` and equal
    to ``m / 10**k`` for an integer ``m < 10**15`` and ``k <= 15`` (the least such ``k``);
    ``None`` otherwise. (Prices, measurements, anything with a few decimals.)

    Such a value's shortest digits are ``m``'s (two decimals of at most 15 digits that read as
    the same double are equal), it is written in fixed notation (its first digit's exponent is
    in ``-5..=14``), and the reference's re-read gives it back unchanged: the reader's integer
    and power of ten are exact doubles and its one division rounds correctly, to the value
    itself. So its text can be built from the integers, without the float writer or the
    re-read."""
    magnitudes = np.abs(numbers)
    if not ((magnitudes >= _EXACT_FROM) & (magnitudes < _EXACT_BELOW)).all():
        return None
    places = np.zeros(len(numbers), dtype=np.int64)
    pending = np.arange(len(numbers))
    for count in range(16):
        scale = _POW10[count]
        values = magnitudes[pending]
        whole = np.rint(values * scale)
        found = (whole < 1e15) & (whole / scale == values)
        places[pending[found]] = count
        pending = pending[~found]
        if pending.size == 0:
            return places
    return None


def _fixed_pieces(numbers: np.ndarray, places: np.ndarray) -> list[Piece]:
    """serde_json's fixed-notation texts of values ``m / 10**k`` (``_fixed_places``) as pieces
    of a row join: ``[-]``, ``m // 10**k``, then ``.`` and ``m % 10**k`` in ``k`` digits (``.0``
    for a whole number). The integers are written by Arrow's integer cast, the fraction's as
    ``10**k + m % 10**k`` with its leading ``1`` made the point."""
    scaled = np.rint(np.abs(numbers) * _POW10[places]).astype(np.int64)
    unit = _POW10_INT[places].astype(np.int64)
    fraction = scaled % unit + unit
    fraction[places == 0] = 10
    pieces: list[Piece] = [integer_texts(scaled // unit), integer_texts(fraction, _first_as_point)]
    negative = np.signbit(numbers)
    if negative.any():
        pieces.insert(0, Indexed(_SIGNS, negative.astype(np.int64)))
    return pieces


_SIGNS = pa.array(["", "-"], TEXT)


def _fixed_parts(numbers: np.ndarray, places: np.ndarray) -> Decomposed:
    """The digits and first-digit exponents of values ``m / 10**k`` (``_fixed_places``),
    straight from the integers: what ``decompose`` reads from their texts (and the re-read
    leaves them unchanged), without writing or parsing any text."""
    scaled = np.rint(np.abs(numbers) * _POW10[places]).astype(np.uint64)
    exponent = digit_count(scaled).astype(np.int64) - 1 - places
    digits = scaled.copy()
    for _ in range(19):
        zeros = (digits % 10 == 0) & (digits != 0)
        if not zeros.any():
            break
        digits[zeros] //= 10
    return Decomposed(digits, digit_count(digits).astype(np.int64), exponent)


def _first_as_point(texts: pa.Array) -> pa.LargeStringArray:
    """Each (non-empty) text with its first character replaced by ``.``."""
    offsets = np.frombuffer(
        texts.buffers()[1], dtype=np.int64, count=len(texts) + 1, offset=texts.offset * 8
    )
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8).copy()
    data[offsets[:-1]] = ord(".")
    array = pa.Array.from_buffers(
        TEXT, len(texts), [None, pa.py_buffer(np.ascontiguousarray(offsets)), pa.py_buffer(data)]
    )
    assert isinstance(array, pa.LargeStringArray)
    return array


def _texts(numbers: np.ndarray, single: bool) -> pa.StringArray:
    """Arrow's shortest texts (float32's own shortest digits for a float32 column)."""
    texts = pa.array(numbers, pa.float32() if single else pa.float64()).cast(pa.string())
    assert isinstance(texts, pa.StringArray)
    return texts


def _mask(rows: int, chosen: np.ndarray) -> pa.BooleanArray:
    mask = np.zeros(rows, dtype=bool)
    mask[chosen] = True
    return pa.array(mask)


def decompose(texts: pa.Array) -> Decomposed:
    """Digits and exponents of unsigned decimal texts (``123``, ``0.00012``, ``1.5e+300``)."""
    pieces = pc.split_pattern(texts, "e", max_splits=1)
    starts = pieces.offsets.to_numpy()[:-1]
    values = pieces.flatten()
    mantissas = values.take(pa.array(starts))
    written = np.zeros(len(texts), dtype=np.int64)
    with_exponent = np.asarray(pc.list_value_length(pieces).to_numpy(), dtype=np.int64) == 2
    if with_exponent.any():
        exponents = values.take(pa.array(starts[with_exponent] + 1))
        unsigned = pc.utf8_ltrim(exponents, characters="+")
        written[with_exponent] = unsigned.cast(pa.int64()).to_numpy()
    dot = np.asarray(pc.find_substring(mantissas, ".").to_numpy(), dtype=np.int64)
    size = np.asarray(pc.binary_length(mantissas).to_numpy(), dtype=np.int64)
    fraction = np.where(dot >= 0, size - dot - 1, 0)
    digits = pc.replace_substring(mantissas, ".", "").cast(pa.uint64()).to_numpy()
    digits = np.array(digits, dtype=np.uint64)
    trailing = np.zeros(len(texts), dtype=np.int64)
    for _ in range(19):
        zeros = (digits % 10 == 0) & (digits != 0)
        if not zeros.any():
            break
        digits[zeros] //= 10
        trailing += zeros
    length = digit_count(digits).astype(np.int64)
    return Decomposed(digits, length, written - fraction + trailing + length - 1)


def _from_parts(parts: Decomposed, fixed: range) -> np.ndarray:
    """serde_json's default reading of the float writer's text of each decomposed value: the
    digits as an integer (with the ``.0`` of fixed-notation integers), then one multiplication
    or division by a power of ten."""
    exponent, length = parts.exponent, parts.length
    integer = (exponent >= fixed.start) & (exponent < fixed.stop) & (exponent >= length - 1)
    scale = np.where(integer, exponent - length + 2, 0)
    significand = parts.digits * _POW10_INT[np.clip(scale, 0, 19)]
    power = np.where(integer, -1, exponent - length + 1)
    result = significand.astype(np.float64)
    with np.errstate(over="ignore"):
        up = power >= 0
        result[up] *= _POW10[np.minimum(power[up], 308)]
        down = (power < 0) & (power >= -308)
        result[down] /= _POW10[-power[down]]
        tiny = power < -308
        result[tiny] = result[tiny] / 1e308 / _POW10[np.minimum(-(power[tiny] + 308), 308)]
    return np.asarray(result, dtype=np.float64)


def _wire(texts: pa.StringArray, numbers: np.ndarray, exponent: np.ndarray) -> pa.LargeStringArray:
    """serde_json's layout from Arrow's: fixed notation for first-digit exponents -5..=15, with
    ``.0`` on integers; ``d.ddde+N`` / ``d.ddde-N`` beyond."""
    plain = pc.invert(pc.or_(pc.match_substring(texts, "."), pc.match_substring(texts, "e")))
    result = pc.if_else(plain, pc.binary_join_element_wise(texts, ".0", ""), texts)
    differ = np.flatnonzero((exponent == -6) | ((exponent >= 10) & (exponent <= 15)))
    if differ.size:
        redone = pa.array([wire_text(float(numbers[row])) for row in differ], pa.string())
        result = pc.replace_with_mask(result, _mask(len(numbers), differ), redone)
    return with_nulls(result.cast(TEXT), None)


def _canonical(negative: np.ndarray, parts: Decomposed) -> pa.LargeStringArray:
    """canonical_json's texts, Rust ``{:e}``: ``d.dddE<exp>`` (``0E0`` for zero)."""
    length = parts.length
    scale = _POW10_INT[length - 1]
    first = pa.array(parts.digits // scale).cast(pa.string())
    rest = pc.utf8_slice_codeunits(pa.array(scale + parts.digits % scale).cast(pa.string()), 1)
    mantissa = pc.if_else(pa.array(length > 1), join([first, ".", rest]), first)
    sign = pc.if_else(pa.array(negative), pa.scalar("-"), pa.scalar(""))
    exponent = pa.array(parts.exponent).cast(pa.string())
    return join([sign, mantissa, "E", exponent])
