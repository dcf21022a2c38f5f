"""The generated model classes (methods written out by scripts/gen_model.py, see
protocol/model/frozen.py) behave as ``@dataclass(frozen=True, slots=True, kw_only=True)`` would make
them: each is compared with such a dataclass built from its own fields, on drawn values."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.model import _generated as generated
from tests.protocol.codec.odf_strategies import of_type

CLASSES = sorted(
    (
        value
        for value in vars(generated).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == generated.__name__
    ),
    key=lambda cls: cls.__name__,
)


def _reference(cls: type) -> type[Any]:
    """``cls`` as the standard library's frozen dataclass: same name, fields, types and defaults."""
    spec = [
        (f.name, f.type)
        if f.default is dataclasses.MISSING
        else (f.name, f.type, dataclasses.field(default=f.default))
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(
        cls.__name__, spec, frozen=True, slots=True, kw_only=True, namespace={"__doc__": "ref"}
    )


REFERENCES = {cls: _reference(cls) for cls in CLASSES}


def _in_blocks() -> list[type]:
    """The classes a metadata block can hold (those the block strategies can draw)."""
    seen: dict[str, type] = {}
    todo = ["MetadataBlock"]
    while todo:
        name = todo.pop()
        if name in generated.UNION_VARIANTS:
            todo += [v.__name__ for v in generated.UNION_VARIANTS[name]]
            continue
        cls = getattr(generated, name, None)
        if name in seen or cls not in REFERENCES:
            continue
        seen[name] = cls
        for f in dataclasses.fields(cls):
            todo.append(
                f.type.removesuffix(" | None").removeprefix("tuple[").removesuffix(", ...]")
            )
    return sorted(seen.values(), key=lambda cls: cls.__name__)


def _as_reference(value: object) -> object:
    cls = type(value)
    assert dataclasses.is_dataclass(cls)
    return REFERENCES[cls](**{f.name: getattr(value, f.name) for f in dataclasses.fields(cls)})


def test_every_class_of_the_model_is_compared() -> None:
    assert len(CLASSES) > 100
    assert generated.MetadataBlock in CLASSES and generated.DisablePollingSource in CLASSES
    in_blocks = _in_blocks()
    assert len(in_blocks) > 40
    assert generated.DataSlice in in_blocks and generated.FetchStepUrl in in_blocks


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_the_constructor_takes_the_dataclass_arguments(cls: type[Any]) -> None:
    mine = inspect.signature(cls).parameters
    theirs = inspect.signature(REFERENCES[cls]).parameters
    assert [(p.name, p.kind, p.default, p.annotation) for p in mine.values()] == [
        (p.name, p.kind, p.default, p.annotation) for p in theirs.values()
    ]
    assert cls.__match_args__ == REFERENCES[cls].__match_args__ == ()
    assert cls.__slots__ == REFERENCES[cls].__slots__
    assert not hasattr(cls, "__dict__") or "__dict__" not in cls.__dict__


@pytest.mark.parametrize("cls", _in_blocks(), ids=lambda cls: cls.__name__)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_instances_behave_as_frozen_dataclasses(cls: type, data: st.DataObject) -> None:
    values = of_type(cls.__name__, depth=2)  # shallow: the fields' own classes are tested too
    value, other = data.draw(values), data.draw(values)
    ref, other_ref = _as_reference(value), _as_reference(other)
    clone = cls(**{f.name: getattr(value, f.name) for f in dataclasses.fields(cls)})

    assert repr(value) == repr(ref)
    assert hash(value) == hash(ref) == hash(clone)
    assert value == clone and not (value != clone)
    assert (value == other) == (ref == other_ref)
    assert (value != other) == (ref != other_ref)
    assert value.__eq__(ref) is NotImplemented and value != ref  # another class is never equal
    assert value.__eq__(None) is NotImplemented
    for copied in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert type(copied) is cls and copied == value
    assert dataclasses.replace(value) == value
    for f in dataclasses.fields(cls):
        assert _refusals(value, f.name) == _refusals(ref, f.name)


def _refusals(value: object, name: str) -> list[str]:
    """What assigning and deleting attribute ``name`` of ``value`` raise."""
    messages = []
    for change in (lambda: setattr(value, name, None), lambda: delattr(value, name)):
        with pytest.raises(dataclasses.FrozenInstanceError) as refused:
            change()
        messages.append(str(refused.value))
    return messages
