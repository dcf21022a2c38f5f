"""The decorator of the generated model classes: frozen, slotted, keyword-only dataclasses whose
methods scripts/gen_model.py writes out.

``@dataclass(frozen=True)`` compiles ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` with ``exec`` for every class it decorates (Python 3.11): about
1 ms a class, ~0.15 s for the model, paid by every odfd process at start-up. The generator writes
the first four into the class bodies (compiled once, with the module's byte code);
:func:`frozen_model` adds the other four shared by every class (``protocol.frozen``) and makes
the class a dataclass (``dataclasses.fields``/``replace``, slots) without generating any method. Instances behave as
those of ``@dataclass(frozen=True, slots=True, kw_only=True)``; type checkers see exactly that
(PEP 681). One difference: ``__dataclass_params__.frozen`` is false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

from protocol.frozen import FROZEN_METHODS

_T = TypeVar("_T")


@dataclass_transform(kw_only_default=True, frozen_default=True)
def frozen_model(cls: type[_T]) -> type[_T]:
    """``cls`` (which defines ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__``) as a frozen,
    slotted, keyword-only dataclass."""
    for name, method in FROZEN_METHODS.items():
        setattr(cls, name, method)
    return dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False)(cls)
