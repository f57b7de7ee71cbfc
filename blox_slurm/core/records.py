"""A cheaper constructor for frozen, slotted dataclasses built by the ten thousand.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (looked up
on every call, as frozen classes refuse plain assignment): 3.9 us for the 33 fields of a
:class:`~blox_slurm.slurm.parse.ParsedJob` called by keyword. A controller's first round at
20,000 queued jobs builds that many parsed records, store observations, extras and core
jobs; a simulated Gavel run, 700,000 starts, stops and moves. :func:`maker` builds the
object as an :func:`unfrozen` twin of its class, fields set by plain stores, and then makes
it of the class by assigning ``__class__`` (allowed between classes of one slot layout): the
object is of the same class, with the same fields, equal to the one ``__init__`` builds, and
as frozen afterwards (a 2-field ``Start``: 0.18 us against 0.32).

A class derived from another dataclass is built through each slot's own descriptor
instead (bound once; 2.4 us for the ``ParsedJob`` call above, before the twin). Only for
dataclasses that are frozen, slotted and have no ``__post_init__`` (a maker would skip its
checks): anything else is refused when the maker is made, not when it is called.
"""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

_T = TypeVar("_T")


def maker(cls: type[_T]) -> Callable[..., _T]:
    """A function that builds ``cls`` from keyword arguments, as ``cls(**kwargs)`` does:
    every field by name, defaults (and default factories) for those left out, and a
    ``TypeError`` for a field missing without a default or a name that is not a field."""
    fields = _fields(cls)
    twin = unfrozen(cls)
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_twin": twin or cls,
                           "_MISSING": dataclasses.MISSING}
    params, body, sets = [], [], []
    for f in fields:
        if twin is None:  # through each slot's own descriptor, bound once
            env[f"_set_{f.name}"] = getattr(cls, f.name).__set__
            sets.append(f"    _set_{f.name}(self, {f.name})\n")
        else:
            sets.append(f"    self.{f.name} = {f.name}\n")
        if f.default is not dataclasses.MISSING:
            env[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING:\n"
                        f"        {f.name} = _factory_{f.name}()\n")
        else:
            params.append(f.name)
    if twin is not None:  # a twin's last store makes it of the class
        sets.append("    self.__class__ = _cls\n")
    source = (f"def make(*, {', '.join(params)}):\n{''.join(body)}"
              f"    self = _new(_twin)\n{''.join(sets)}    return self\n")
    exec(source, env)  # noqa: S102 - the source is built from field names checked above
    make: Callable[..., _T] = env["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = f"A {cls.__name__} from keyword arguments (see blox_slurm.core.records)."
    return make


_TWINS: dict[type, type | None] = {}  # see unfrozen()


def unfrozen(cls: type) -> type | None:
    """A class with the slots of ``cls`` (a frozen, slotted dataclass) that takes plain
    stores: an object built as one becomes a ``cls`` when ``cls`` is assigned to its
    ``__class__``, which Python allows between classes of one slot layout. ``None`` for a
    class derived from another than ``object`` (its slots are laid out over its base's: no
    twin shares them). Made, and the assignment tried, once per class."""
    if cls not in _TWINS:
        _fields(cls)
        twin = None
        if cls.__bases__ == (object,):
            twin = type(f"_Unfrozen{cls.__name__}", (), {"__slots__": cls.__dict__["__slots__"]})
            probe: Any = object.__new__(twin)
            probe.__class__ = cls
        _TWINS[cls] = twin
    return _TWINS[cls]


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """``cls``'s init fields, once it is known to be a class :func:`maker` can build."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__ a maker would skip")
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__} has fields outside __init__")
    for f in fields:
        if not f.name.isidentifier() or keyword.iskeyword(f.name) or f.name.startswith("_"):
            raise TypeError(f"{cls.__name__}.{f.name}: not a field name a maker takes")
        if not isinstance(getattr(cls, f.name, None), MemberDescriptorType):
            raise TypeError(f"{cls.__name__} is not slotted ({f.name} has no slot)")
    return fields
