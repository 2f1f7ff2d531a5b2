"""tj.Array's operators, methods, indexing and the NumPy functions called on it, each a small kernel on the array's
device, traced once per operation and kept (CuPy's eager model, with tracejit's fusion inside each call).

An operation is a NumPy callable applied to arguments: the arrays among them (tj.Arrays, NumPy arrays, NumPy
scalars, and the operands of a ufunc, Python numbers included) are the kernel's arguments; everything else
(axis=, dtype=, shapes, index slices) is part of what the kernel is, keyed by value. The kernels are those
of @tj.kernel, so what tracejit cannot compile runs with NumPy on the host as in any kernel (tj.FallbackWarning,
or an error with TRACEJIT_FALLBACK=0), and a result stays on the device.

runtime/array.py calls in here through `array.EAGER` (the runtime layer cannot import the frontend).
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import ArgumentError, TracejitError
from tracejit.runtime import array as array_module
from tracejit.runtime import registry
from tracejit.runtime.array import Array
from tracejit.frontend.signature import value_key

KEPT = 1024  # operations whose kernels are kept (least recently used out)


class _Slot:
    """Where the i-th of the kernel's arguments goes back into the call."""

    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i

    def __eq__(self, other) -> bool:
        return type(other) is _Slot and other.i == self.i

    def __hash__(self) -> int:
        return hash((_Slot, self.i))


def _is_array(a) -> bool:
    return type(a) is Array or isinstance(a, (np.ndarray, np.generic))


def _split(obj, values: list, numbers: bool):
    """obj with its arrays (and, where `numbers`, its Python numbers) replaced by slots, as a hashable structure;
    what was replaced is appended to `values`."""
    if _is_array(obj) or (numbers and type(obj) in (int, float, bool, complex)):
        values.append(obj)
        return _Slot(len(values) - 1)
    t = type(obj)
    if t is tuple or t is list:
        return (t, tuple(_split(x, values, False) for x in obj))
    if t is dict:
        return (dict, tuple((k, _split(v, values, False)) for k, v in obj.items()))
    if t is slice:
        return (
            slice,
            _split(obj.start, values, False),
            _split(obj.stop, values, False),
            _split(obj.step, values, False),
        )
    if obj is None or obj is Ellipsis:
        return obj
    if t in (int, float, bool, complex, str):
        return (t, value_key(obj))
    try:
        hash(obj)
    except TypeError:
        raise ArgumentError(
            f"a {t.__name__} argument of an operation on a tj.Array: tracejit keys its kernels on the arguments "
            "that are not arrays, and this one is not hashable; pass a tuple or an array"
        ) from None
    return (object, obj)


def _build(structure, values):
    if type(structure) is _Slot:
        return values[structure.i]
    if structure is None or structure is Ellipsis:
        return structure
    kind = structure[0]
    if kind is tuple or kind is list:
        return kind(_build(x, values) for x in structure[1])
    if kind is dict:
        return {k: _build(v, values) for k, v in structure[1]}
    if kind is slice:
        return slice(*(_build(x, values) for x in structure[1:]))
    if kind is object:
        return structure[1]
    key = structure[1]  # signature.value_key's: a float as its hex digits (-0.0 and 0.0 apart), a complex as two
    if kind is float:
        return float.fromhex(key[1])
    if kind is complex:
        return complex(float.fromhex(key[1]), float.fromhex(key[2]))
    return key[1]


class Operations:
    """The kernels of the operations met so far, per operation and arguments' structure."""

    def __init__(self) -> None:
        self._kernels: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def kernel(self, key: tuple, make: Callable[[], Callable]):
        with self._lock:
            k = self._kernels.get(key)
            if k is not None:
                self._kernels.move_to_end(key)
                return k
        from tracejit.frontend.kernel import kernel

        k = kernel(make())
        with self._lock:
            self._kernels[key] = k
            while len(self._kernels) > KEPT:
                self._kernels.popitem(last=False)
        return k

    def apply(self, func: Callable, args: tuple, kwargs: dict, numbers: bool = False, name: str | None = None):
        """func(*args, **kwargs) as a kernel on the device of the first tj.Array among the arguments."""
        values: list = []
        positional = tuple(_split(a, values, numbers) for a in args)
        structure = (positional, _split(kwargs, values, False))
        label = str(name or getattr(func, "__name__", "operation"))

        def run(arrays):
            a = [_build(x, arrays) for x in positional]
            return func(*a, **_build(structure[1], arrays))

        k = self.kernel((func, label, structure), lambda: _fixed(len(values), run, label))
        device = _device_of(values)
        try:
            return _on_device(k(*values, device=device.name), device)
        except TracejitError as e:
            raise _at_callers_line(e, label) from None

    def assign(self, target: Array, key, value) -> None:
        """target[key] = value, in place on target's device."""
        values: list = [target]
        structure = (_split(key, values, False), _split(value, values, True))

        def setitem(every):
            every[0][_build(structure[0], every)] = _build(structure[1], every)

        k = self.kernel(("setitem", structure), lambda: _fixed(len(values), setitem, "setitem"))
        try:
            k(*values, device=target.device.name)
        except TracejitError as e:
            raise _at_callers_line(e, "assignment") from None

    # -- the NumPy protocols --
    def ufunc(self, ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict):
        out = kwargs.pop("out", None)
        if out is not None:
            return self._into(out, lambda *a, **k: getattr(ufunc, method)(*a, **k), inputs, kwargs, ufunc.__name__)
        if method == "__call__":
            return self.apply(ufunc, inputs, kwargs, numbers=True)
        if method == "at":  # in place, on the first operand
            target = inputs[0]
            if type(target) is not Array:
                return NotImplemented
            values: list = []
            structure = (tuple(_split(x, values, True) for x in inputs[1:]), _split(kwargs, values, False))

            def at(every):
                rest = every[1:]
                ufunc.at(every[0], *[_build(x, rest) for x in structure[0]], **_build(structure[1], rest))

            k = self.kernel(("at", ufunc, structure), lambda: _fixed(len(values) + 1, at, f"{ufunc.__name__}_at"))
            try:
                k(target, *values, device=target.device.name)
            except TracejitError as e:
                raise _at_callers_line(e, f"{ufunc.__name__}.at") from None
            return None
        return self.apply(getattr(ufunc, method), inputs, kwargs, numbers=True, name=f"{ufunc.__name__}_{method}")

    def _into(self, out, compute, inputs, kwargs, name):
        """A ufunc with out=: computed, then assigned into the out array(s)."""
        outs = out if isinstance(out, tuple) else (out,)
        if not all(type(o) is Array for o in outs):
            return NotImplemented  # NumPy's own arrays as out=: NumPy says it cannot (TypeError)
        result = self.apply(compute, inputs, kwargs, numbers=True, name=name)
        results = result if isinstance(result, tuple) else (result,)
        for o, r in zip(outs, results):
            self.assign(o, Ellipsis, r)
        return outs[0] if len(outs) == 1 else outs

    def function(self, func: Callable, args: tuple, kwargs: dict):
        metadata = _METADATA.get(func)
        if metadata is not None:
            return metadata(*args, **kwargs)
        return self.apply(func, args, kwargs)

    def method(self, a: Array, name: str, args: tuple, kwargs: dict):
        return self.apply(_method(name), (a, *args), kwargs, name=name)

    def getitem(self, a: Array, key):
        if a.device.returns_numpy:  # host memory (the numba device): NumPy's own indexing, views included
            return Array(np.asarray(a._data[_host_key(key)]), a.device)
        return self.apply(_getitem, (a, key), {}, name="getitem")


def _fixed(n: int, body: Callable, name: str) -> Callable:
    """A function of n positional parameters that calls body with them as a tuple: what the kernel traces (a fixed
    count of parameters is the kernels' fast path; *args would be bound at each call)."""
    names = ", ".join(f"a{i}" for i in range(n))
    name = name if name.isidentifier() else "operation"
    namespace: dict = {"body": body, "__name__": __name__}  # (its frames are tracejit's, not the user's line)
    exec(f"def {name}({names}):\n    return body(({names}{',' if n == 1 else ''}))", namespace)
    return namespace[name]


def _at_callers_line(e: TracejitError, what: str) -> TracejitError:
    """A tracejit error of an operation, said at the line of the user's code that asked for it (the kernel's own
    trace has only tracejit's frames)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and (frame.f_globals.get("__name__") or "").partition(".")[0] in ("tracejit", "numpy"):
        frame = frame.f_back
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}: " if frame is not None else ""
    return type(e)(f"{where}{what} of a tj.Array: {e}").with_traceback(None)


def _getitem(a, key):
    return a[key]


def _host_key(key):
    if type(key) is Array:
        return key.numpy()
    if type(key) is tuple:
        return tuple(k.numpy() if type(k) is Array else k for k in key)
    return key


def _device_of(values):
    for v in values:
        if type(v) is Array:
            return v.device
    return registry.device(registry.default_device_name())


def _on_device(result, device):
    """A kernel's results as tj.Arrays on `device` (the numba device's kernels return NumPy arrays)."""
    if isinstance(result, (np.ndarray, np.generic)):
        return Array(np.asarray(result), device)
    if isinstance(result, tuple):
        items = [_on_device(r, device) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    return result


@functools.cache
def _method(name: str) -> Callable:
    """a.name(...) as a function of the array (one per method name: the kernels' cache keys on it)."""

    def call(a, *args, **kwargs):
        return getattr(a, name)(*args, **kwargs)

    call.__name__ = name
    return call


def _stand_in(a):
    """An array of a's shape and dtype with no memory of its own (strides 0), for what NumPy asks only of those."""
    if type(a) is not Array:
        return a
    return np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape, (0,) * len(a.shape))


def _on_metadata(func):
    return lambda *args, **kwargs: func(*[_stand_in(a) for a in args], **{k: _stand_in(v) for k, v in kwargs.items()})


# NumPy functions that read only shapes and dtypes: answered on the host, with no kernel and no copy
_METADATA = {
    f: _on_metadata(f)
    for f in (
        np.shape,
        np.ndim,
        np.size,
        np.result_type,
        np.iscomplexobj,
        np.isrealobj,
        np.can_cast,
        np.min_scalar_type,
        np.broadcast_shapes,
    )
    if callable(f)
}

OPERATIONS = Operations()
array_module.EAGER = OPERATIONS
