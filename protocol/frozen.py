"""Frozen, slotted dataclasses whose methods are shared functions instead of code compiled per class.

``@dataclass(frozen=True, slots=True)`` compiles ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` with ``exec`` for every class it decorates
(Python 3.11): some 4 million instructions (~1 ms) a class, paid at import by every process that
loads the class. The settings and records that every ``odfd`` command imports (the configuration's
sections, the workspace layout, the chain reader's faults) would cost a short command such as
``odfd status`` a tenth of its start-up. :func:`frozen_dataclass` gives a class the same behaviour
through methods written once here, which read the class's fields at run time;
``protocol.model.frozen`` shares the frozen-instance half with the generated model.

Instances behave as those of ``@dataclass(frozen=True, slots=True)`` (positional or keyword
arguments, defaults and default factories, ``repr=False``/``compare=False`` fields, ``replace``,
``fields``, pickling); type checkers see exactly that (PEP 681). Methods the class writes itself are
kept, as ``dataclass`` keeps them. Not supported (refused): ``__post_init__``, ``kw_only`` and
``init=False`` fields. One difference: ``__dataclass_params__.frozen`` is false.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, fields
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


FROZEN_METHODS = {
    "__setattr__": _setattr,
    "__delattr__": _delattr,
    "__getstate__": _getstate,
    "__setstate__": _setstate,
}
"""What makes the instances of a slotted dataclass frozen and picklable, for every such class."""


def _init(self: Any, *args: object, **kwargs: object) -> None:
    cls = type(self)
    layout: tuple[tuple[str, object, Any], ...] = cls._frozen_layout
    if len(args) > len(layout):
        raise TypeError(
            f"{cls.__qualname__}() takes {len(layout)} positional arguments "
            f"but {len(args)} were given"
        )
    for index, (name, default, factory) in enumerate(layout):
        if index < len(args):
            if name in kwargs:
                raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
            value = args[index]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif default is not MISSING:
            value = default
        elif factory is not MISSING:
            value = factory()
        else:
            raise TypeError(f"{cls.__qualname__}() missing required argument: {name!r}")
        object.__setattr__(self, name, value)
    if kwargs:
        raise TypeError(
            f"{cls.__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}"
        )


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self)._frozen_shown)
    return f"{self.__class__.__qualname__}({shown})"


def _compared(self: Any) -> tuple[object, ...]:
    return tuple(getattr(self, name) for name in type(self)._frozen_compared)


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is self.__class__:
        return _compared(self) == _compared(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, name) for name in type(self)._frozen_hashed))


_METHODS = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}


@dataclass_transform(frozen_default=True)
def frozen_dataclass(cls: type[_T]) -> type[_T]:
    """``cls`` as ``@dataclass(frozen=True, slots=True)`` makes it, without compiling a method."""
    if "__post_init__" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: frozen_dataclass runs no __post_init__")
    own = set(cls.__dict__)
    explicit_hash = "__hash__" in own and not (cls.__dict__["__hash__"] is None and "__eq__" in own)
    for name, method in {**FROZEN_METHODS, **_METHODS}.items():
        if name not in own or name in FROZEN_METHODS:
            setattr(cls, name, method)
    if not explicit_hash:
        cls.__hash__ = _hash  # type: ignore[method-assign]
    made: Any = dataclass(slots=True, init=False, repr=False, eq=False)(cls)
    found: tuple[Field[Any], ...] = fields(made)
    if any(f.kw_only is True or not f.init for f in found):
        raise TypeError(
            f"{cls.__qualname__}: frozen_dataclass takes no kw_only or init=False field"
        )
    made._frozen_layout = tuple((f.name, f.default, f.default_factory) for f in found)
    made._frozen_shown = tuple(f.name for f in found if f.repr)
    made._frozen_compared = tuple(f.name for f in found if f.compare)
    made._frozen_hashed = tuple(f.name for f in found if (f.compare if f.hash is None else f.hash))
    result: type[_T] = made
    return result
