"""The names Spark Connect's determinism check looks for are every non-deterministic built-in.

Through Spark Connect, ``check_deterministic`` only sees the analyzed plan as text, so it relies on
``NONDETERMINISTIC_FUNCTIONS`` (and the clock/environment names it checks in both modes). Here the
local JVM lists the built-in functions whose expression classes Spark marks non-deterministic: a
Spark upgrade adding one fails this test instead of letting a random function into a transform.
"""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from verifier.engine.spark.determinism import _TIME_OR_ENV, NONDETERMINISTIC_FUNCTIONS

pytestmark = pytest.mark.spark


def _scala_list(seq: Any) -> list[Any]:
    """The items of a Scala ``Seq`` (a py4j proxy, untyped)."""
    iterator = seq.iterator()
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def test_every_nondeterministic_builtin_is_looked_for(spark: object) -> None:
    jvm = spark._jvm  # type: ignore[attr-defined]  # the fixture's SparkSession, typed object
    registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    marker = loader.loadClass("org.apache.spark.sql.catalyst.expressions.Nondeterministic")
    nondeterministic = set()
    for function in _scala_list(registry.listFunction()):
        info = registry.lookupFunction(function)
        if info.isEmpty() or not info.get().getClassName():
            continue
        try:
            expression = loader.loadClass(info.get().getClassName())
        except Py4JJavaError:  # ClassNotFoundException: an alias of a removed class
            continue
        if marker.isAssignableFrom(expression):
            nondeterministic.add(function.funcName().lower())
    assert {"rand", "uuid", "monotonically_increasing_id"} <= nondeterministic
    covered = set(NONDETERMINISTIC_FUNCTIONS) | {
        name for name in nondeterministic if _TIME_OR_ENV.search(f"{name}(")
    }
    missing = sorted(nondeterministic - covered)
    assert missing == [], f"non-deterministic built-ins the Connect check would miss: {missing}"
