"""``protocol.frozen.frozen_dataclass`` behaves as ``@dataclass(frozen=True, slots=True)``: each
case is run on a class made both ways from the same body and must come out the same."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from protocol.frozen import frozen_dataclass


def _body(name: str) -> type:
    class Settings:
        """Fields of every kind a frozen dataclass may have."""

        host: str
        port: int = 80
        tags: list[str] = dataclasses.field(default_factory=list)
        secret: str = dataclasses.field(default="", repr=False)
        note: str = dataclasses.field(default="", compare=False)

        def url(self) -> str:
            return f"{self.host}:{self.port}"

    Settings.__name__ = Settings.__qualname__ = name
    return Settings


# Module level (both under one name in turn) so that pickle finds them.
Standard: Any = dataclasses.dataclass(frozen=True, slots=True)(_body("Standard"))
Shared: Any = frozen_dataclass(_body("Shared"))
KINDS = [Standard, Shared]


def _same(make: Callable[[type], Any]) -> None:
    """``make`` gives the same result (or raises the same error) for both kinds of class."""
    outcomes = []
    for kind in KINDS:
        try:
            outcomes.append(("ok", _plain(make(kind))))
        except Exception as err:  # noqa: BLE001 (the error itself is compared)
            outcomes.append((type(err).__name__, None))
    assert outcomes[0] == outcomes[1]


def _plain(value: Any) -> Any:
    """A result with the class names made alike, so the two kinds compare."""
    if isinstance(value, str):
        return value.replace("Standard", "Shared")
    if isinstance(value, tuple | list):
        return type(value)(_plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ("instance", repr(value).replace("Standard", "Shared"))
    return value


@pytest.mark.parametrize(
    "make",
    [
        lambda k: k("h"),
        lambda k: k("h", 81, ["a"], "s", "n"),
        lambda k: k(host="h", port=82, secret="hidden"),
        lambda k: k("h", port=83, note="x").url(),
        lambda k: k(),
        lambda k: k("h", host="again"),
        lambda k: k("h", 1, [], "", "", "one too many"),
        lambda k: k("h", colour="red"),
    ],
)
def test_construction_repr_and_errors(make: Callable[[type], Any]) -> None:
    _same(make)


def test_defaults_factories_are_called_per_instance() -> None:
    a, b = Shared("h"), Shared("h")
    assert a.tags == [] and a.tags is not b.tags


def test_repr_hides_repr_false_fields() -> None:
    assert repr(Shared("h", secret="hidden")) == "Shared(host='h', port=80, tags=[], note='')"


def test_equality_and_hash_follow_compare_fields() -> None:
    for kind in KINDS:
        assert kind("h", note="a") == kind("h", note="b")
        assert kind("h") != kind("h", port=1)
        assert kind("h").__eq__(object()) is NotImplemented
    assert Shared("h") != Standard("h")
    hashable: Any = frozen_dataclass(
        type("Point", (), {"__annotations__": {"x": "int", "y": "int"}})
    )
    assert hash(hashable(1, 2)) == hash(hashable(1, 2)) == hash((1, 2))
    with pytest.raises(TypeError):
        hash(Shared("h"))  # a list field, as the standard class refuses it


def test_frozen_and_slotted() -> None:
    value = Shared("h")
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.port = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.port
    assert not hasattr(value, "__dict__")
    assert Shared.__slots__ == Standard.__slots__


def test_dataclass_functions_pickle_and_copy() -> None:
    value = Shared("h", 81, ["a"], "s", "n")
    assert [f.name for f in dataclasses.fields(Shared)] == [
        f.name for f in dataclasses.fields(Standard)
    ]
    assert Shared.__match_args__ == Standard.__match_args__
    assert dataclasses.replace(value, port=9) == Shared("h", 9, ["a"], "s", "n")
    assert dataclasses.asdict(value)["secret"] == "s"
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value and copy.copy(value) == value


def test_inherits_fields_and_keeps_written_methods() -> None:
    @frozen_dataclass
    class Base:
        """A base."""

        a: int

        def __repr__(self) -> str:
            return "written"

    @frozen_dataclass
    class Child(Base):
        """A child."""

        b: int = 2

    assert Child(1) == Child(1, 2) and Child(1).b == 2
    assert repr(Base(1)) == "written"
    assert repr(Child(1)).endswith(".Child(a=1, b=2)")


def test_refuses_what_it_does_not_run() -> None:
    with pytest.raises(TypeError, match="__post_init__"):
        frozen_dataclass(type("P", (), {"__post_init__": lambda self: None}))
    with pytest.raises(TypeError, match="kw_only"):
        frozen_dataclass(
            type("K", (), {"__annotations__": {"a": "int"}, "a": dataclasses.field(kw_only=True)})
        )
