"""Which blocks ``--from`` / ``--to`` select, and resolving them while walking a chain.

A selector is a block's sequence number (decimal digits) or its hash (any multibase). Both ends
are inclusive. They limit the data and reproducibility layers to the blocks in between; the
metadata layer always checks the whole chain from the head back to the ``Seed``, because every
block's validity depends on all blocks before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ParseError
from protocol.identity import Multihash
from verifier.errors import VerifyUsageError
from verifier.report import BlockLocation, BlockRange

BlockSelector = int | Multihash


def parse_block_selector(text: str) -> BlockSelector:
    """A sequence number (``12``) or a block hash (``f1620…``, any multibase)."""
    text = text.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return Multihash.from_multibase(text)
    except ParseError:
        raise ParseError(f"block {text!r} is neither a sequence number nor a block hash") from None


def selector_text(selector: BlockSelector | None) -> str | int | None:
    """The selector as the report's ``options`` records it."""
    if selector is None or isinstance(selector, int):
        return selector
    return str(selector)


@dataclass(frozen=True, slots=True)
class RangeRequest:
    first: BlockSelector | None = None
    last: BlockSelector | None = None

    @property
    def is_whole_chain(self) -> bool:
        return self.first is None and self.last is None

    def check(self) -> None:
        if isinstance(self.first, int) and isinstance(self.last, int) and self.first > self.last:
            raise VerifyUsageError(f"--from {self.first} is after --to {self.last}")


class RangeResolver:
    """Fed the blocks of a chain newest first; says which are in the requested range."""

    def __init__(self, request: RangeRequest, dataset: str) -> None:
        self._request = request
        self._dataset = dataset
        self._first: BlockLocation | None = None
        self._last: BlockLocation | None = None
        self._first_is_after_last = False

    def observe(self, sequence_number: int, hash: Multihash) -> bool:
        """Whether the block (the one before the previous call's) is in the range."""
        here = BlockLocation(sequence_number, hash)
        is_first = _matches(
            self._request.first, sequence_number, hash, default=sequence_number == 0
        )
        if self._last is None:
            if not _matches(self._request.last, sequence_number, hash, default=True):
                self._first_is_after_last |= is_first and self._request.first is not None
                return False
            self._last = here
        if self._first is not None:
            return False
        if is_first:
            self._first = here
        return True

    def resolve(self) -> BlockRange:
        """The range found; ``VerifyUsageError`` if an end is not a block of the chain."""
        if self._last is None:
            raise VerifyUsageError(
                f"--to {selector_text(self._request.last)} is not a block of {self._dataset}"
            )
        if self._first is None:
            if self._first_is_after_last:
                raise VerifyUsageError(
                    f"--from {selector_text(self._request.first)} is after --to "
                    f"{selector_text(self._request.last)} in {self._dataset}"
                )
            raise VerifyUsageError(
                f"--from {selector_text(self._request.first)} is not a block of {self._dataset}"
            )
        return BlockRange(self._first, self._last)


def _matches(
    selector: BlockSelector | None, sequence_number: int, hash: Multihash, *, default: bool
) -> bool:
    if selector is None:
        return default
    if isinstance(selector, int):
        return selector == sequence_number
    return selector == hash
