"""record: a dataclass whose methods are shared functions instead of code compiled per class.

dataclasses.dataclass compiles each class's __init__, __repr__ and __eq__ (a frozen one's
__setattr__, __delattr__ and __hash__ too) from generated source when the class is defined:
some 4 M instructions a class, and a cached run of a small network defines some thirty, a
fifth of its whole process. A record is the same dataclass (fields(), replace() and asdict()
see the same fields) with the same methods' behaviour, read from its fields at call time:
slower per call, so records are for classes made a few times a run (configs, tables, results),
not for the ones made per command or per tiling candidate.
"""
from __future__ import annotations

from dataclasses import MISSING, FrozenInstanceError, dataclass, fields


def record(cls=None, /, *, frozen: bool = False):
    """@record or @record(frozen=True): dataclass(cls, frozen=frozen)'s behaviour (positional
    or keyword construction, defaults and default factories, repr, equality by the compared
    fields, a frozen class's immutability and hash; a non-frozen one is unhashable, as
    dataclass makes it, unless the class defines __hash__)."""
    def wrap(cls):
        if hasattr(cls, "__post_init__"):     # _init does not call it
            raise TypeError(f"{cls.__qualname__}: a record runs no __post_init__; use dataclass")
        own_hash = "__hash__" in cls.__dict__
        cls = dataclass(cls, init=False, repr=False, eq=False)
        fs = fields(cls)
        cls._record_init = tuple((f.name, f.default, f.default_factory) for f in fs if f.init)
        cls._record_repr = tuple(f.name for f in fs if f.repr)
        cls._record_compare = tuple(f.name for f in fs if f.compare)
        cls._record_hash = tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash))
        cls.__init__ = _init
        cls.__repr__ = _repr
        cls.__eq__ = _eq
        if frozen:
            cls.__setattr__ = _frozen_set
            cls.__delattr__ = _frozen_del
        if not own_hash:
            cls.__hash__ = _hash if frozen else None
        return cls

    return wrap if cls is None else wrap(cls)


def _init(self, *args, **kwargs):
    spec = type(self)._record_init
    name = type(self).__qualname__
    if len(args) > len(spec):
        raise TypeError(f"{name}.__init__() takes {len(spec) + 1} positional arguments but "
                        f"{len(args) + 1} were given")
    values = {}
    for i, (field, default, factory) in enumerate(spec):
        if i < len(args):
            if field in kwargs:
                raise TypeError(f"{name}.__init__() got multiple values for argument '{field}'")
            values[field] = args[i]
        elif field in kwargs:
            values[field] = kwargs.pop(field)
        elif default is not MISSING:
            values[field] = default
        elif factory is not MISSING:
            values[field] = factory()
        else:
            raise TypeError(f"{name}.__init__() missing required argument: '{field}'")
    if kwargs:
        raise TypeError(f"{name}.__init__() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")
    self.__dict__.update(values)       # past a frozen class's __setattr__, as dataclass's does


def _repr(self) -> str:
    return f"{type(self).__qualname__}(" + ", ".join(
        f"{f}={getattr(self, f)!r}" for f in type(self)._record_repr) + ")"


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = type(self)._record_compare
    return tuple(getattr(self, f) for f in names) == tuple(getattr(other, f) for f in names)


def _hash(self) -> int:
    return hash(tuple(getattr(self, f) for f in type(self)._record_hash))


def _frozen_set(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_del(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")
