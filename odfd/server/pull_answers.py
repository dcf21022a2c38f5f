"""The Smart Transfer Protocol's answers to a pull of one interval of a chain, kept for the next
peer that asks for the same interval.

Before a client can start its downloads, the server reads and checks every block file of the
interval (~0.11 s for 10,000 blocks), packs them as a tarball (~0.05 s) and writes that as the
metadata answer's JSON text (~0.045 s). Blocks are named by their hash, so the blocks after
``begin_after`` up to ``head`` are the same bytes whenever they are asked for: the transfer plan
and the answer's text are kept per interval (a few, each bounded in size), and a peer pulling a
head another peer pulled gets them at once. The client checks every block either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.identity import Multihash
from protocol.transfer.smart import messages as m
from storage.lru import Lru

KEPT_ANSWERS = 4
MAX_ANSWER_CHARS = 16 << 20
"""The longest answer kept (~35,000 blocks): at most ``KEPT_ANSWERS`` times this in memory."""

IntervalKey = tuple[str, Multihash, Multihash | None, bool]
"""``(dataset id, head, begin_after, force)``: what a pull request asks of a dataset. The
dataset is part of it: a client may name any head (``stop_at``), and an answer read from one
dataset's chain must not be given to a client of another."""


@dataclass(frozen=True, slots=True)
class PullAnswer:
    plan: m.TransferPlan
    metadata: str
    """The ``DatasetMetadataPullResponse`` as the text of one frame."""


class PullAnswers:
    """The answers of the intervals pulled last, by ``IntervalKey`` (least recently used
    forgotten first; an answer over ``MAX_ANSWER_CHARS`` is not kept)."""

    def __init__(self, entries: int = KEPT_ANSWERS, max_chars: int = MAX_ANSWER_CHARS) -> None:
        self._kept: Lru[IntervalKey, PullAnswer] = Lru(entries)
        self._max_chars = max_chars

    def get(self, key: IntervalKey) -> PullAnswer | None:
        return self._kept.get(key)

    def put(self, key: IntervalKey, answer: PullAnswer) -> None:
        if len(answer.metadata) <= self._max_chars:
            self._kept.put(key, answer)
