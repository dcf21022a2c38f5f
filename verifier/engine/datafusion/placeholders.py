"""The types DataFusion inferred for a query's placeholders (``$1``...), read from its logical
plan: ``seq = $1`` gives ``$1`` the type of ``seq``; one the plan does not type is left out.

DataFusion's Python binding offers no list of a plan's parameters, so the plan's nodes and
their expressions are walked through the binding's variants.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from datafusion.common import RexType

_NODE_EXPRESSIONS = (
    "projections",
    "predicate",
    "group_by_exprs",
    "aggregate_exprs",
    "sort_exprs",
    "on",
    "filter",
    "window_exprs",
    "skip",
    "fetch",
)
"""The accessors of DataFusion's plan nodes that hold expressions (a node lacks most)."""


_BRANCHES = (RexType.Call, RexType.Alias)


def placeholder_types(plan: Any) -> dict[str, pa.DataType]:
    """Placeholder (``$1``) -> the type the engine gave it, for those of ``plan`` it typed."""
    types: dict[str, pa.DataType] = {}
    for expression in _plan_expressions(plan):
        _collect(expression, types)
    return types


def _plan_expressions(plan: Any) -> Iterator[Any]:
    pending = [plan]
    while pending:
        node = pending.pop()
        pending.extend(node.inputs())
        variant = node.to_variant()
        for accessor in _NODE_EXPRESSIONS:
            method = getattr(variant, accessor, None)
            if method is None:
                continue
            try:
                held = method()
            except Exception:  # noqa: BLE001  # an accessor this node does not answer
                continue
            yield from _flatten(held)


def _flatten(held: Any) -> Iterator[Any]:
    if held is None:
        return
    if isinstance(held, list | tuple):
        for item in held:
            yield from _flatten(item)
    elif hasattr(held, "variant_name"):
        yield held
    elif hasattr(held, "expr"):  # a sort expression
        yield from _flatten(held.expr())


def _collect(expression: Any, types: dict[str, pa.DataType]) -> None:
    """Placeholders under ``expression`` and the types the engine gave them."""
    pending = [expression]
    while pending:
        current = pending.pop()
        if current.variant_name() == "Placeholder":
            placeholder = current.to_variant()
            field = placeholder.field()
            if field is not None and field.type != pa.null():
                types.setdefault(placeholder.id(), field.type)
            continue
        if current.rex_type() not in _BRANCHES:  # a column or a literal: a leaf
            continue
        try:
            pending.extend(current.rex_call_operands())
        except Exception:  # noqa: BLE001  # a kind of call whose operands are not offered
            continue
