"""Objects passed to a kernel (the `self` of a method kernel, a parameter object): their array attributes,
also inside lists, tuples and dicts, are arguments of the kernel; every other attribute is a constant of the
code, keyed by value. The function sees a copy of the object with traced arrays in those places."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracejit.errors import ArgumentError, UnsupportedError
from tracejit.runtime.array import Array
from tracejit.frontend.signature import value_key

_PLAIN = (int, float, bool, complex, str, bytes, type(None), np.generic, np.ndarray, Array, tuple, list, dict)


def is_instance(a) -> bool:
    """Whether a call's argument is an object of a user's class to take apart (not an array, a number, a
    setting, an array-like another library defines, nor a traced value)."""
    if isinstance(a, _PLAIN) or isinstance(a, type) or callable(a) and not hasattr(a, "__dict__"):
        return False
    if any(
        hasattr(a, p)
        for p in (
            "__array__",
            "__array_interface__",
            "__cuda_array_interface__",
            "__dlpack__",
            "__dask_graph__",
            "_node",
        )
    ):
        return False
    module = type(a).__module__
    return hasattr(a, "__dict__") and module != "builtins" and module.partition(".")[0] not in ("tracejit", "numpy")


@dataclass(frozen=True)
class Instance:
    """An object's shape: its class, its attributes as a tree whose array leaves are arguments (`tree`,
    hashable: it keys the plan), and the attributes' values themselves for the copy the function sees."""

    cls: type[object]
    tree: tuple
    values: dict = field(compare=False, hash=False, repr=False)

    @property
    def count(self) -> int:
        return _count(self.tree)

    def rebuild(self, leaves: list):
        """The object the function sees: a copy of the original's attributes, arrays replaced by `leaves`."""
        copy = self.cls.__new__(self.cls)
        copy.__dict__.update(self.values)
        copy.__dict__.update(_rebuild(self.tree, iter(leaves)))
        return copy


def describe(obj, where: str) -> tuple[Instance, list]:
    """The Instance of an object and its array leaves in order."""
    leaves: list = []
    tree = _tree(dict(vars(obj)), f"{where}.", leaves, top=True)
    return Instance(type(obj), tree, dict(vars(obj))), leaves


def _tree(v, path: str, leaves: list, top: bool = False):
    if top or isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: str(kv[0]))
        return ("dict", tuple((k, _tree(x, f"{path}{k}" if top else f"{path}[{k!r}]", leaves)) for k, x in items))
    if isinstance(v, (np.ndarray, Array)):
        leaves.append(v)
        return ("array",)
    if isinstance(v, (list, tuple)) and any(_holds_arrays(x) for x in v):
        return (type(v).__name__, tuple(_tree(x, f"{path}[{i}]", leaves) for i, x in enumerate(v)))
    if isinstance(v, (np.random.Generator, np.random.RandomState)):
        # a constant it would be NumPy's own: its draws while tracing baked into the code, the same every call
        raise ArgumentError(
            f"{path.rstrip('.')} is a NumPy random generator; pass it to the kernel as an argument "
            "(a Generator argument draws a fresh stream on every call, docs/guide/random.md)"
        )
    if is_instance(v):
        inner: list = []
        sub = _tree(dict(vars(v)), f"{path}.", inner, top=True)
        if inner:
            leaves += inner
            return ("object", type(v), sub, _Values(dict(vars(v))))
    # a constant keys the plan by value_key (1 and 1.0, 0.0 and -0.0 are other code); the value itself rides
    # along, out of the key, for the copy the function sees
    try:
        hash(v)
        return ("constant", value_key(v), _Values(v))
    except TypeError:
        pass
    frozen = _frozen(v)
    if frozen is None:
        raise ArgumentError(
            f"{path.rstrip('.')} is a {type(v).__name__} that is neither an array nor hashable: a "
            "kernel keys its code on such values; make it a tuple or an array, or pass it as "
            "an argument"
        )
    return ("constant", frozen, _Values(v))


class _Values:
    """A nested object's attribute values (or a constant's value): carried in its tree, left out of
    comparison and hashing."""

    __slots__ = ("values",)

    def __init__(self, values: dict):
        self.values = values

    def __eq__(self, other) -> bool:
        return isinstance(other, _Values)

    def __hash__(self) -> int:
        return 0


def _frozen(v):
    """A hashable stand-in of a list, set or dict of hashable values (its key), or None."""
    try:
        if isinstance(v, dict):
            return ("dict", tuple(sorted((k, value_key(x) if _hashable(x) else _frozen(x)) for k, x in v.items())))
        if isinstance(v, (list, set)):
            items = tuple(
                value_key(x) if _hashable(x) else _frozen(x) for x in (sorted(v) if isinstance(v, set) else v)
            )
            return None if any(x is None and y is not None for x, y in zip(items, v)) else (type(v).__name__, items)
    except TypeError:
        return None
    return None


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def _holds_arrays(v) -> bool:
    if isinstance(v, (np.ndarray, Array)):
        return True
    if isinstance(v, (list, tuple)):
        return any(_holds_arrays(x) for x in v)
    if isinstance(v, dict):
        return any(_holds_arrays(x) for x in v.values())
    return False


def _count(tree) -> int:
    kind = tree[0]
    if kind == "array":
        return 1
    if kind == "dict":
        return sum(_count(t) for _, t in tree[1])
    if kind in ("list", "tuple"):
        return sum(_count(t) for t in tree[1])
    if kind == "object":
        return _count(tree[2])
    return 0


def _rebuild(tree, leaves):
    kind = tree[0]
    if kind == "array":
        return next(leaves)
    if kind == "constant":
        return tree[2].values
    if kind == "dict":
        return {k: _rebuild(t, leaves) for k, t in tree[1]}
    if kind in ("list", "tuple"):
        items = [_rebuild(t, leaves) for t in tree[1]]
        return items if kind == "list" else tuple(items)
    cls, sub, values = tree[1], tree[2], tree[3].values  # "object"
    copy = cls.__new__(cls)
    copy.__dict__.update(values)
    copy.__dict__.update(_rebuild(sub, leaves))
    return copy


def check_unchanged(seen, before: dict, fn_name: str, where: str) -> None:
    """A kernel cannot rebind an attribute of an object it was given (`before`: the copy's attributes as
    the function got them): the caller's object would keep the old value where Python's has the new one."""
    now = seen.__dict__
    changed = [k for k in now if k not in before or now[k] is not before[k]] + [k for k in before if k not in now]
    if changed:
        raise UnsupportedError(
            f"{fn_name} sets {where}.{changed[0]}, which the caller's object would not see after "
            f"a compiled call; assign into the array in place ({where}.{changed[0]}[...] = ...) "
            "or return the new value"
        )
