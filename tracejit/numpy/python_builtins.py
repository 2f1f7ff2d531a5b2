"""Python's min() and max() of traced values, as the kernel function's code sees them: `min(a, b, c)` compares
pairwise in Python (`b < a` takes b), which needs each comparison's value while tracing; here the same
comparisons select, element by element, when the kernel runs (NaN included: Python keeps the earlier value
where a comparison with NaN is false, and so does this)."""

from __future__ import annotations

import builtins
import types

import numpy as np

from tracejit.numpy.tensor import Tensor

_NAMES = ("min", "max")


class _Missing:
    pass


_MISSING = _Missing()


def _select(name: str, args: tuple, key, default):
    """builtins.<name>(*args, key=key, default=default), or where a traced value is among several arguments
    (or in one list or tuple), the same comparisons as selections."""
    if len(args) == 1 and isinstance(args[0], Tensor) and args[0].ndim == 1 and key is None:
        return _of_elements(name, args[0], default)
    items = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args if len(args) > 1 else ()
    if key is not None or not any(isinstance(v, Tensor) for v in items):
        options = {"key": key} if default is _MISSING else {"key": key, "default": default}
        return getattr(builtins, name)(*args, **options)
    if any(np.ndim(v) for v in items):  # Python compares them: NumPy refuses an array's truth value
        raise ValueError(
            f"The truth value of an array with more than one element is ambiguous ({name}() of arrays compares "
            f"them as Python does; np.{'minimum' if name == 'min' else 'maximum'} works element by element)"
        )
    result = items[0]
    for v in items[1:]:
        better = v < result if name == "min" else v > result  # Python's order of comparison
        result = np.where(better, v, result)
    return result


def _of_elements(name: str, x: Tensor, default):
    """max(x) (min(x)) of a traced 1-d array: Python iterates its elements, each one `>` (`<`) the one kept
    replacing it, so the answer is the first element equal to the greatest (least) value that is not NaN, or x[0]
    where x[0] is NaN (no comparison with it holds), the element itself (its bits: the first zero of either
    sign). Without elements, Python's ValueError, or `default`."""
    if x.shape[0] == 0:
        if default is not _MISSING:
            return default
        raise ValueError(f"{name}() iterable argument is empty")
    if x.dtype.kind != "f":
        return x[np.argmax(x) if name == "max" else np.argmin(x)]
    found = x[np.nanargmax(x) if name == "max" else np.nanargmin(x)]  # (every element NaN: x[-1], a NaN)
    return np.where(np.isnan(x[0]), x[0], found)


def _min(*args, key=None, default=_MISSING):
    return _select("min", args, key, default)


def _max(*args, key=None, default=_MISSING):
    return _select("max", args, key, default)


def visible(fn):
    """fn, or a copy of it whose code sees min and max that select traced values (where it uses them and its
    module does not define its own)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    g = fn.__globals__
    used = [n for n in _NAMES if n in names and n not in g]
    if not used:
        return fn
    new_globals = dict(g)
    new_globals.update({n: {"min": _min, "max": _max}[n] for n in used})
    copy = types.FunctionType(code, new_globals, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
