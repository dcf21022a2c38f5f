"""Rejects queries whose result could differ between two runs over the same inputs.

Spark marks random and id-generating expressions (``rand()``, ``uuid()``, ``shuffle()``,
``monotonically_increasing_id()``...) as non-deterministic; functions that read the clock or the
environment (``current_timestamp()``, ``now()``, ``current_user()``...) are "deterministic" to
Spark within one query but differ between runs, so they are looked for by name in the analyzed
plan as well.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from verifier.errors import VerifierError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_TIME_OR_ENV = re.compile(
    r"\b(current_timestamp|current_date|current_time|localtimestamp|now|current_user|user|"
    r"session_user|input_file_name|input_file_block_start|input_file_block_length)\("
)


class NonDeterministicQueryError(VerifierError):
    """A transform query uses a function whose result is not reproducible."""


def check_deterministic(df: DataFrame, what: str) -> None:
    """Raises :class:`NonDeterministicQueryError` naming ``what`` (e.g. the query step)."""
    plan = df._jdf.queryExecution().analyzed()
    if not plan.deterministic():
        raise NonDeterministicQueryError(
            f"{what} is not deterministic (it uses a random or generated value such as rand(), "
            "uuid() or monotonically_increasing_id()); a derivative dataset must be reproducible"
        )
    match = _TIME_OR_ENV.search(plan.treeString())
    if match:
        raise NonDeterministicQueryError(
            f"{what} uses {match.group(1)}(), whose value depends on when or where it runs; "
            "a derivative dataset must be reproducible (use the input's event time instead)"
        )
