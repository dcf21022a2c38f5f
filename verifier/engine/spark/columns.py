"""Referring to columns and tables safely in Spark: names are taken literally, never parsed."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def quote(name: str) -> str:
    """A column or table name as a Spark SQL identifier (dots and spaces kept literal)."""
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    """A top-level column by its exact name; ``F.col("a.b")`` would mean a struct field."""
    from pyspark.sql import functions as F

    return F.col(quote(name))
