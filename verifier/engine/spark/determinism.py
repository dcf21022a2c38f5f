"""Rejects queries whose result could differ between two runs over the same inputs.

Spark marks random and id-generating expressions (``rand()``, ``uuid()``, ``shuffle()``,
``monotonically_increasing_id()``...) as non-deterministic; functions that read the clock or the
environment (``current_timestamp()``, ``now()``, ``current_user()``...) are "deterministic" to
Spark within one query but differ between runs, so they are looked for by name in the analyzed
plan as well.

Through Spark Connect the analyzed plan is only available as text (``explain``), so there the
non-deterministic expressions are also found by name: :data:`NONDETERMINISTIC_FUNCTIONS` lists
every built-in Spark marks non-deterministic (a test keeps it equal to the JVM's own list).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from verifier.engine.errors import NonDeterministicQueryError
from verifier.engine.spark import internals

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_TIME_OR_ENV = re.compile(
    r"\b(current_timestamp|current_date|current_time|localtimestamp|now|current_user|user|"
    r"session_user|input_file_name|input_file_block_start|input_file_block_length)\("
)


#: Built-in functions whose expressions Spark marks non-deterministic, as the plan prints them.
NONDETERMINISTIC_FUNCTIONS = (
    "java_method",
    "monotonically_increasing_id",
    "rand",
    "randn",
    "random",
    "randstr",
    "reflect",
    "shuffle",
    "spark_partition_id",
    "try_reflect",
    "uniform",
    "uuid",
)
_RANDOM = re.compile(r"\b(" + "|".join(NONDETERMINISTIC_FUNCTIONS) + r")\(", re.IGNORECASE)


def check_deterministic(df: DataFrame, what: str) -> None:
    """Raises :class:`NonDeterministicQueryError` naming ``what`` (e.g. the query step)."""
    if internals.is_connect(df):
        tree = internals.connect_analyzed_plan_text(df)
        deterministic = _RANDOM.search(tree) is None
    else:
        tree, deterministic = internals.analyzed_plan(df)
    if not deterministic:
        raise NonDeterministicQueryError(
            f"{what} is not deterministic (it uses a random or generated value such as rand(), "
            "uuid() or monotonically_increasing_id()); a derivative dataset must be reproducible"
        )
    match = _TIME_OR_ENV.search(tree)
    if match:
        raise NonDeterministicQueryError(
            f"{what} uses {match.group(1)}(), whose value depends on when or where it runs; "
            "a derivative dataset must be reproducible (use the input's event time instead)"
        )
