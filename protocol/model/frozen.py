"""The decorator of the generated model classes: frozen, slotted, keyword-only dataclasses whose
methods scripts/gen_model.py writes out.

``@dataclass(frozen=True)`` compiles ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` with ``exec`` for every class it decorates (Python 3.11): about
1 ms a class, ~0.15 s for the model, paid by every odfd process at start-up. The generator writes
the first four into the class bodies (compiled once, with the module's byte code);
:func:`frozen_model` adds the other four shared by every class and makes the class a dataclass
(``dataclasses.fields``/``replace``, slots) without generating any method. Instances behave as
those of ``@dataclass(frozen=True, slots=True, kw_only=True)``; type checkers see exactly that
(PEP 681). One difference: ``__dataclass_params__.frozen`` is false.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, fields
from typing import Any, NoReturn, TypeVar, dataclass_transform

_T = TypeVar("_T")


def _setattr(self: object, name: str, value: object) -> NoReturn:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> NoReturn:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self: Any) -> list[object]:
    """Pickle and copy state: the field values in order (as dataclasses keeps it)."""
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[object]) -> None:
    for f, value in zip(fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


_SHARED = {
    "__setattr__": _setattr,
    "__delattr__": _delattr,
    "__getstate__": _getstate,
    "__setstate__": _setstate,
}


@dataclass_transform(kw_only_default=True, frozen_default=True)
def frozen_model(cls: type[_T]) -> type[_T]:
    """``cls`` (which defines ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__``) as a frozen,
    slotted, keyword-only dataclass."""
    for name, method in _SHARED.items():
        setattr(cls, name, method)
    return dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False)(cls)
