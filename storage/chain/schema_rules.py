"""Schema evolution (spec "Schema Evolution"): a new ``SetDataSchema`` may only add columns.

Removing or renaming a column, changing its type (including becoming optional or required) would
break downstream consumers; fields may be reordered and their extra attributes changed. The same
holds recursively inside structs, lists and maps.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.model import (
    DataField,
    DataSchema,
    DataTypeList,
    DataTypeMap,
    DataTypeOption,
    DataTypeStruct,
)


def incompatible_changes(old: DataSchema, new: DataSchema) -> list[str]:
    """Human-readable reasons why ``new`` cannot follow ``old``; empty if it can."""
    return _fields(old.fields, new.fields, "")


def _fields(old: Sequence[DataField], new: Sequence[DataField], prefix: str) -> list[str]:
    problems: list[str] = []
    new_by_name = {f.name: f for f in new}
    for field in old:
        path = f"{prefix}{field.name}"
        replacement = new_by_name.get(field.name)
        if replacement is None:
            problems.append(f"column '{path}' was removed")
        else:
            problems.extend(_types(field.type, replacement.type, path))
    return problems


def _types(old: object, new: object, path: str) -> list[str]:
    if type(old) is not type(new):
        return [f"column '{path}' changed type from {_name(old)} to {_name(new)}"]
    if isinstance(old, DataTypeOption):
        return _types(old.inner, new.inner, path)  # type: ignore[attr-defined]  # `type(old) is type(new)` narrows new as well, which mypy does not follow
    if isinstance(old, DataTypeStruct):
        return _fields(old.fields, new.fields, f"{path}.")  # type: ignore[attr-defined]  # `type(old) is type(new)` narrows new as well, which mypy does not follow
    if isinstance(old, DataTypeList):
        assert isinstance(new, DataTypeList)
        if old.fixed_length != new.fixed_length:
            return [
                f"column '{path}' changed list length from {old.fixed_length} to {new.fixed_length}"
            ]
        return _types(old.item_type, new.item_type, f"{path}[]")
    if isinstance(old, DataTypeMap):
        assert isinstance(new, DataTypeMap)
        return _types(old.key_type, new.key_type, f"{path}{{key}}") + _types(
            old.value_type, new.value_type, f"{path}{{value}}"
        )
    if old != new:
        return [f"column '{path}' changed type from {old} to {new}"]
    return []


def _name(data_type: object) -> str:
    return type(data_type).__name__.removeprefix("DataType").lower()
