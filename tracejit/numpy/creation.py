"""Arrays made inside a kernel (tj.zeros, np.arange, np.tri, np.zeros_like(t), np.tril(t), ...): NumPy
builds them from static arguments and captured.array_node turns the result into a constant or an index
expression fused into its consumers; the `_like` forms and tril/triu of traced values build graph IR."""

from __future__ import annotations

import inspect
import operator

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import check
from tracejit.ir.graph import Node
from tracejit.numpy.captured import array_node
from tracejit.numpy.joining import join
from tracejit.numpy.tensor import ArrayLike, Scalar, Tensor, as_node

__all__ = [
    "arange",
    "empty",
    "empty_like",
    "eye",
    "full",
    "full_like",
    "identity",
    "linspace",
    "ones",
    "ones_like",
    "tri",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]


def _static(name: str, make: Callable[..., np.ndarray]) -> Callable[..., Tensor]:
    """tj.<name>: NumPy's own function on static arguments, its result embedded in the kernel."""

    def f(*args: object, **kwargs: object) -> Tensor:
        return Tensor(array_node(_made(name, make, args, kwargs)))

    f.__name__ = name
    f.__doc__ = f"numpy.{name}, made inside the kernel: a constant or index expression fused into its consumers."
    return f


def _made(name: str, make: Callable, args: tuple, kwargs: dict):
    """np.<name>(*args, **kwargs) (make) of the arguments as Python values."""
    kwargs.pop("like", None)
    args = tuple(_python(v, name) for v in args)
    kwargs = {k: _python(v, name) for k, v in kwargs.items()}
    return make(*args, **kwargs)


def linspace(*args: object, **kwargs: object) -> Tensor | tuple[Tensor, float]:
    """numpy.linspace, made inside the kernel: a constant or index expression fused into its consumers; with
    bounds read from arrays (np.linspace(x.min(), x.max(), 11)), NumPy's arithmetic on them."""
    bound = inspect.signature(np.linspace).bind(*args, **kwargs)
    start, stop = bound.arguments.get("start"), bound.arguments.get("stop")
    if any(isinstance(v, Tensor) and v._known("np.linspace's bounds") is None for v in (start, stop)):
        return _traced_linspace(**bound.arguments)
    out = _made("linspace", np.linspace, args, kwargs)
    if isinstance(out, tuple):  # linspace(..., retstep=True): (samples, step)
        return Tensor(array_node(out[0])), out[1]
    return Tensor(array_node(out))


def _traced_linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """np.linspace(start, stop, num) with 0-d bounds read from arrays, as NumPy computes it: i * step + start (or i
    / div * delta where the step is zero), the last sample exactly stop."""
    from tracejit.numpy import functions as F

    num = _python(num, "linspace")
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    if any(as_node(v).shape != () for v in (start, stop)) or _python(axis, "linspace") != 0:
        raise UnsupportedError("np.linspace with array bounds read from arrays: only 0-d bounds are supported")
    div = (num - 1) if endpoint else num
    dt = np.result_type(*(np.empty(0, as_node(v).dtype) if isinstance(v, Tensor) else v for v in (start, stop)), 1.0)
    first, last = (Tensor(build.cast(as_node(v), dt)) for v in (start, stop))
    delta = last - first
    y = Tensor(build.iota((num,), 0, dt))
    if div > 0:
        step = delta / div
        y = F.where(step == 0, y / div * delta, y * step)
    else:
        step = Tensor(build.const(np.nan, dt, ()))
        y = y * delta
    y = y + first
    if endpoint and num > 1:
        y = F.where(Tensor(build.iota((num,), 0, np.int32)) == num - 1, last, y)
    if dtype is not None:
        dtype = np.dtype(dtype)
        y = F.astype(F.floor(y) if dtype.kind in "iu" else y, dtype)
    return (y, step) if retstep else y


def _python(v, name: str):
    """An argument of np.<name> as a Python value: a traced one computed from the kernel's Python-number
    arguments alone becomes their value (the plan specialised on it); one read from an array is refused."""
    if isinstance(v, (tuple, list)):
        return type(v)(_python(x, name) for x in v)
    if not isinstance(v, Tensor):
        return v
    value = v._known(f"np.{name}'s shape, count or bound")
    if value is None or v.shape:
        raise UnsupportedError(
            f"np.{name} got a traced value; shapes, counts, bounds and fill values of "
            "arrays made inside a kernel must be Python values, known while tracing (the "
            "kernel's int and float arguments and NumPy integer scalars are; values read from arrays are not, "
            "nor is a 0-d array argument: pass int(n) for one)"
        )
    return value.reshape(()).item()


zeros = _static("zeros", np.zeros)
ones = _static("ones", np.ones)
_full = _static("full", np.full)


def full(
    shape: int | Sequence[int],
    fill_value: ArrayLike,
    dtype: DTypeLike | None = None,
    order: str = "C",
    **kwargs: object,
) -> Tensor:
    """numpy.full; a traced fill value is broadcast (cast to dtype, else its own dtype, as NumPy)."""
    if not isinstance(fill_value, Tensor):
        return _full(shape, fill_value, dtype, order, **kwargs)
    node = as_node(fill_value)
    dt = check(node.dtype if dtype is None else dtype, "full dtype", internal=False)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Tensor(build.broadcast_to(build.cast(node, dt), shape))


arange = _static("arange", np.arange)
eye = _static("eye", np.eye)
identity = _static("identity", np.identity)
tri = _static("tri", np.tri)
# np.empty's contents are arbitrary; zeros are a valid choice and make results reproducible
empty = _static("empty", np.zeros)


def full_like(
    a: ArrayLike,
    fill_value: Scalar | Tensor,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: int | Sequence[int] | None = None,
    *,
    device: str | None = None,
) -> Tensor:
    """numpy.full_like: fill_value cast to the dtype as NumPy casts it (unsafe: full_like(ints, 2.7) is 2)."""
    node = as_node(a)
    dt = check(node.dtype if dtype is None else dtype, "full_like dtype", internal=False)
    shape = node.shape if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    if isinstance(fill_value, Tensor):
        return Tensor(build.broadcast_to(build.cast(fill_value._node, dt), shape))
    value = np.empty((), dt)
    with np.errstate(all="ignore"):
        np.copyto(value, fill_value, casting="unsafe")
    return Tensor(array_node(np.broadcast_to(value, shape)))


def zeros_like(
    a: ArrayLike,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: int | Sequence[int] | None = None,
    *,
    device: str | None = None,
) -> Tensor:
    return full_like(a, 0, dtype, shape=shape)


def ones_like(
    a: ArrayLike,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: int | Sequence[int] | None = None,
    *,
    device: str | None = None,
) -> Tensor:
    return full_like(a, 1, dtype, shape=shape)


def empty_like(
    a: ArrayLike,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: int | Sequence[int] | None = None,
    *,
    device: str | None = None,
) -> Tensor:
    return full_like(a, 0, dtype, shape=shape)  # arbitrary in NumPy; zeros here


def tril(m: ArrayLike, k: int = 0) -> Tensor:
    """numpy.tril: elements above the k-th diagonal of the last two axes zeroed (a 1-D m is broadcast)."""
    from tracejit.numpy.functions import where

    node = as_node(m)
    # (ignore: the checker cannot know that shape[-2:] holds at most two sizes, np.tri's N and M)
    mask = np.tri(*node.shape[-2:], k=k, dtype=bool)  # type: ignore[call-overload]
    return where(mask, Tensor(node), np.zeros(1, node.dtype))


def triu(m: ArrayLike, k: int = 0) -> Tensor:
    """numpy.triu: elements below the k-th diagonal of the last two axes zeroed."""
    from tracejit.numpy.functions import where

    node = as_node(m)
    mask = np.tri(*node.shape[-2:], k=k - 1, dtype=bool)  # type: ignore[call-overload]  # as in tril
    return where(mask, np.zeros(1, node.dtype), Tensor(node))


NUMPY_FUNCTIONS: dict[Callable[..., object], Callable[..., object]] = {
    np.zeros_like: zeros_like,
    np.ones_like: ones_like,
    np.empty_like: empty_like,
    np.full_like: full_like,
    np.tril: tril,
    np.triu: triu,
    np.zeros: zeros,
    np.ones: ones,
    np.full: full,
    np.empty: empty,
    np.arange: arange,
    np.linspace: linspace,
    np.eye: eye,
    np.identity: identity,
    np.tri: tri,
}


_KNOWN_VALUES = frozenset({"arange", "linspace", "eye", "identity", "tri"})


def while_tracing(name: str, original, args: tuple, kwargs: dict):
    """np.<name> called by the kernel function while it is traced (see allocation.py for why)."""
    if _complex_request(name, args, kwargs):
        return _complex(name, original, args, kwargs)
    if name in ("array", "asarray"):
        return _array(name, original, args, kwargs)
    make = globals()[name]
    if name in _KNOWN_VALUES:
        try:
            return make(*args, **kwargs)
        except UnsupportedError:
            if holds_traced((args, kwargs)):
                raise
            return original(*args, **kwargs)  # too large to embed in a kernel: NumPy's array, as it was
    return make(*args, **kwargs)


def _array(name: str, original, args: tuple, kwargs: dict):
    """np.array / np.asarray of traced values: a traced array (copied for np.array, as NumPy copies), or a
    nested sequence of them stacked, the dtype NumPy gives the mix (Python numbers count as float64/int64)."""
    obj = args[0] if args else kwargs.get("object", kwargs.get("a"))
    if not holds_traced(obj):
        made = original(*args, **kwargs)
        if name == "asarray" and made is obj or type(made) is not np.ndarray or made.dtype.kind not in "biuf":
            return made  # (np.asarray of a NumPy array is that array: writes through it reach it)
        try:  # a new array of numbers (np.array(range(n)), a table): traced, its values known, to assign into
            return Tensor(array_node(made))
        except UnsupportedError:
            return made  # too large to embed in a kernel: NumPy's array, as it was
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    ndmin = kwargs.get("ndmin", 0)
    if isinstance(obj, Tensor) and name == "asarray" and dtype is None:
        return obj  # the same array: writes through it reach the caller's, as in NumPy
    node = _stacked(obj)
    if dtype is not None:
        node = build.cast(node, check(dtype, f"np.{name} dtype", internal=False))
    if len(node.shape) < ndmin:
        node = build.reshape(node, (1,) * (ndmin - len(node.shape)) + node.shape)
    return Tensor(node)


def _complex_request(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether np.<name>(...) makes a complex array the kernel computes with: np.zeros(n, complex), np.full(n, 1j),
    np.array([z, w]) of complex traced values."""
    from tracejit.numpy.complex_values import ComplexTensor, is_complex

    dtype = kwargs.get("dtype")
    if name in ("zeros", "ones", "empty"):
        dtype = args[1] if len(args) > 1 else dtype
    elif name == "full":
        dtype = args[2] if len(args) > 2 else dtype
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
        if dtype is None and (is_complex(fill) or isinstance(fill, ComplexTensor)):
            return True
    elif name in ("array", "asarray"):
        dtype = args[1] if len(args) > 1 else dtype
        obj = args[0] if args else kwargs.get("object", kwargs.get("a"))
        return _holds_complex_traced(obj) or (dtype is not None and np.dtype(dtype).kind == "c" and holds_traced(obj))
    else:
        return False
    return dtype is not None and np.dtype(dtype).kind == "c"


def _holds_complex_traced(obj) -> bool:
    from tracejit.numpy.complex_values import ComplexTensor

    if isinstance(obj, ComplexTensor):
        return True
    return isinstance(obj, (list, tuple)) and any(_holds_complex_traced(v) for v in obj)


def _complex(name: str, original, args: tuple, kwargs: dict):
    """np.zeros & co. of a complex dtype, np.array of complex traced values: a ComplexTensor, made part by part."""
    from tracejit.numpy import complex_values as C

    if name in ("array", "asarray"):
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        obj = args[0] if args else kwargs.get("object", kwargs.get("a"))
        target = C.result_dtype(*_leaves_of(obj)) if dtype is None else np.dtype(dtype)
        if isinstance(obj, C.ComplexTensor) and name == "asarray" and (dtype is None or target == obj.dtype):
            return obj
        halves = [_array("array", original, (_part_of(obj, k),), {"dtype": C.PART[target]}) for k in (0, 1)]
        return C.ComplexTensor(*halves)
    shape = args[0] if args else kwargs["shape"]
    if name == "full":
        fill = args[1] if len(args) > 1 else kwargs["fill_value"]
        dtype = args[2] if len(args) > 2 else kwargs.get("dtype")
    else:
        fill = 1.0 if name == "ones" else 0.0
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    target = C.result_dtype(fill) if dtype is None else np.dtype(dtype)
    re, im = C.parts(fill, C.PART[target])
    shape = _python(shape, name)  # (np.zeros(n, complex), n a Python-int argument: its value, as for real arrays)
    shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(map(operator.index, shape))
    return C.ComplexTensor(*(Tensor(build.broadcast_to(as_node(p), shape)) for p in (re, im)))


def _leaves_of(obj) -> list:
    if isinstance(obj, (list, tuple)):
        return [leaf for v in obj for leaf in _leaves_of(v)]
    return [obj]


def _part_of(obj, k: int):
    """The real (k = 0) or imaginary (1) part of each item of a nested sequence."""
    from tracejit.numpy import complex_values as C

    if isinstance(obj, (list, tuple)):
        return [_part_of(v, k) for v in obj]
    if isinstance(obj, C.ComplexTensor):
        return obj.im if k else obj.re
    if isinstance(obj, Tensor):
        return Tensor(build.const(0, obj.dtype, obj.shape)) if k else obj
    value = complex(obj) if not isinstance(obj, np.ndarray) else obj
    return np.imag(value) if k else np.real(value)


def stacked(obj) -> Tensor:
    """A nested list or tuple holding traced values as one traced array, of the dtype NumPy gives the mix
    (np.asarray's): x[[k, p]] with traced k and p indexes by it, as NumPy by np.asarray([k, p])."""
    return Tensor(_stacked(obj))


def holds_traced(obj) -> bool:
    """Whether obj is a traced value or a list, tuple or dict holding one."""
    if isinstance(obj, Tensor):
        return True
    if isinstance(obj, dict):
        return any(holds_traced(v) for v in obj.values())
    return isinstance(obj, (list, tuple)) and any(holds_traced(v) for v in obj)


def _stacked(obj) -> Node:
    if isinstance(obj, Tensor):
        return as_node(obj)
    if not isinstance(obj, (list, tuple)):
        return array_node(np.asarray(obj))
    if not obj:
        return build.const(0, np.dtype("float64"), (0,))
    parts = [_stacked(v) for v in obj]
    if any(p.shape != parts[0].shape for p in parts):
        raise ValueError(
            "setting an array element with a sequence. The requested array has an inhomogeneous "
            f"shape after 1 dimensions: its elements have shapes {[p.shape for p in parts]}"
        )
    dt = np.result_type(*(p.dtype for p in parts))
    rows = [build.reshape(build.cast(p, dt), (1,) + p.shape) for p in parts]
    return join(rows, 0)
