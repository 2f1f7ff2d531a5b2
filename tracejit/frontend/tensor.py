"""The traced Tensor: a symbolic array that records NumPy-style operations as graph IR nodes."""
from __future__ import annotations

import importlib

import numpy as np

from ..errors import IndexOutOfBoundsError, ShapeError, TraceError, UnsupportedError
from ..ir import build
from ..ir.dtypes import check, weak_dtype
from ..ir.graph import Node

MAX_UNROLL = 64   # `for row in t`, `a, b = t`, zip(*t): at most this many rows, each traced separately


def as_node(x) -> Node:
    """A graph node for a Tensor, Python scalar or NumPy scalar / 0-d array."""
    if isinstance(x, Tensor):
        return x._node
    if isinstance(x, Node):
        return x
    if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):  # strong, NEP 50
        return build.const(x.item(), check(x.dtype, "constant"), ())
    if isinstance(x, (bool, int, float)):   # after np.generic: np.float64 is a float, yet strong
        return build.const(x, weak_dtype(x), (), weak=True)
    if isinstance(x, np.ndarray):   # np.arange(n), np.tri(n), a captured table: see captured.py
        from .captured import array_node
        return array_node(x)
    if isinstance(x, (list, tuple)):
        return as_node(np.asarray(x))
    raise UnsupportedError(f"cannot use a value of type {type(x).__name__} in a traced computation")


class Tensor:
    """A traced array. Shape, ndim and dtype are ordinary Python values; the data is symbolic."""

    __slots__ = ("_node",)
    __array_priority__ = 1000

    def __init__(self, node: Node):
        self._node = node

    # -- static facts --
    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def size(self) -> int:
        return self._node.size

    @property
    def itemsize(self) -> int:
        return self._node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._node.size * self._node.dtype.itemsize

    @property
    def T(self) -> "Tensor":
        return F.transpose(self)

    @property
    def mT(self) -> "Tensor":
        if self.ndim < 2:
            raise ShapeError(f"matrix transpose with ndim < 2 is undefined (shape {self.shape})")
        return _frontend("methods").swapaxes(self, -1, -2)

    @property
    def real(self) -> "Tensor":
        return self  # tracejit's dtypes are all real

    @property
    def imag(self) -> "Tensor":
        return Tensor(build.const(0, self.dtype, self.shape))

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype})"

    # -- what tracing cannot do --
    def __bool__(self):
        raise TraceError("a traced value was used as a Python bool (in `if`, `while`, `and`/`or`, or bool()); "
                         "its value is not known while tracing. Use tj.where(cond, a, b) (or np.where) to "
                         "select values instead")

    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedError("len() of unsized object (a 0-d traced value), as in NumPy")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise UnsupportedError("iteration over a 0-d array (a traced value), as in NumPy")
        if self.shape[0] > MAX_UNROLL:
            raise TraceError(f"iterating over a traced value unrolls one step per row; its first axis has "
                             f"length {self.shape[0]}, over the limit of {MAX_UNROLL}. Use whole-array "
                             "operations (broadcasting, reductions with axis=0) instead of a Python loop")
        return (self[i] for i in range(self.shape[0]))

    def __index__(self):
        raise TraceError("a traced value was used as a Python integer (e.g. as an index or a range bound); "
                         "its value is not known while tracing")

    def __float__(self):
        raise TraceError("float() of a traced value; its value is not known while tracing. Keep it an array "
                         "(x.astype(np.float64)) or pass the number as a static argument")

    __int__ = __index__

    def __hash__(self):
        return id(self)

    # -- methods (ndarray's; each calls the NumPy function of the same name, see _METHODS) --
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True) -> "Tensor":
        return F.astype(self, dtype)

    def reshape(self, *shape, order="C") -> "Tensor":
        return F.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, order)

    def transpose(self, *axes) -> "Tensor":
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return F.transpose(self, axes or None)

    def clip(self, min=None, max=None, out=None, **kwargs):  # noqa: A002
        if out is not None:
            raise UnsupportedError("ndarray.clip(..., out=...) is not supported while tracing")
        return F.clip(self, kwargs.pop("a_min", min), kwargs.pop("a_max", max), **kwargs)

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        raise UnsupportedError("ndarray.sort sorts the array in place, and a traced value cannot be changed in "
                               "place; write x = np.sort(x, axis) (a sorted copy) instead")

    def flatten(self, order="C") -> "Tensor":
        return _frontend("methods").ravel(self, order)

    def conj(self) -> "Tensor":
        return self  # tracejit's dtypes are all real

    conjugate = conj

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: say whether NumPy has it, so the user knows why
        if not name.startswith("_") and name in _NDARRAY_NAMES:
            raise UnsupportedError(f"ndarray.{name} is not supported by tracejit on traced values; supported "
                                   f"methods and attributes: {', '.join(sorted(_SUPPORTED_NAMES))}")
        raise AttributeError(f"'Tensor' object (a traced ndarray) has no attribute {name!r}")

    # -- operators --
    def __add__(self, o): return F.add(self, o)  # noqa: E704
    def __radd__(self, o): return F.add(o, self)  # noqa: E704
    def __sub__(self, o): return F.subtract(self, o)  # noqa: E704
    def __rsub__(self, o): return F.subtract(o, self)  # noqa: E704
    def __mul__(self, o): return F.multiply(self, o)  # noqa: E704
    def __rmul__(self, o): return F.multiply(o, self)  # noqa: E704
    def __truediv__(self, o): return F.true_divide(self, o)  # noqa: E704
    def __rtruediv__(self, o): return F.true_divide(o, self)  # noqa: E704
    def __floordiv__(self, o): return F.floor_divide(self, o)  # noqa: E704
    def __rfloordiv__(self, o): return F.floor_divide(o, self)  # noqa: E704
    def __mod__(self, o): return F.remainder(self, o)  # noqa: E704
    def __rmod__(self, o): return F.remainder(o, self)  # noqa: E704
    def __pow__(self, o): return F.power(self, o)  # noqa: E704
    def __rpow__(self, o): return F.power(o, self)  # noqa: E704
    def __matmul__(self, o): return _frontend("linalg").matmul(self, o)  # noqa: E704
    def __rmatmul__(self, o): return _frontend("linalg").matmul(o, self)  # noqa: E704
    def __and__(self, o): return F.bitwise_and(self, o)  # noqa: E704
    def __rand__(self, o): return F.bitwise_and(o, self)  # noqa: E704
    def __or__(self, o): return F.bitwise_or(self, o)  # noqa: E704
    def __ror__(self, o): return F.bitwise_or(o, self)  # noqa: E704
    def __xor__(self, o): return F.bitwise_xor(self, o)  # noqa: E704
    def __rxor__(self, o): return F.bitwise_xor(o, self)  # noqa: E704
    def __lt__(self, o): return F.less(self, o)  # noqa: E704
    def __le__(self, o): return F.less_equal(self, o)  # noqa: E704
    def __gt__(self, o): return F.less(o, self)  # noqa: E704
    def __ge__(self, o): return F.less_equal(o, self)  # noqa: E704
    def __eq__(self, o): return F.equal(self, o)  # noqa: E704
    def __ne__(self, o): return F.not_equal(self, o)  # noqa: E704
    def __lshift__(self, o): return _U().left_shift(self, o)  # noqa: E704
    def __rlshift__(self, o): return _U().left_shift(o, self)  # noqa: E704
    def __rshift__(self, o): return _U().right_shift(self, o)  # noqa: E704
    def __rrshift__(self, o): return _U().right_shift(o, self)  # noqa: E704
    def __divmod__(self, o): return F.floor_divide(self, o), F.remainder(self, o)  # noqa: E704
    def __rdivmod__(self, o): return F.floor_divide(o, self), F.remainder(o, self)  # noqa: E704
    def __neg__(self): return F.negative(self)  # noqa: E704

    # -- augmented assignment: NumPy computes in place, so the result keeps x's dtype and shape --
    def __iadd__(self, o): return self._inplace(F.add(self, o), "+=")  # noqa: E704
    def __isub__(self, o): return self._inplace(F.subtract(self, o), "-=")  # noqa: E704
    def __imul__(self, o): return self._inplace(F.multiply(self, o), "*=")  # noqa: E704
    def __itruediv__(self, o): return self._inplace(F.true_divide(self, o), "/=")  # noqa: E704
    def __ifloordiv__(self, o): return self._inplace(F.floor_divide(self, o), "//=")  # noqa: E704
    def __imod__(self, o): return self._inplace(F.remainder(self, o), "%=")  # noqa: E704
    def __ipow__(self, o): return self._inplace(F.power(self, o), "**=")  # noqa: E704
    def __iand__(self, o): return self._inplace(F.bitwise_and(self, o), "&=")  # noqa: E704
    def __ior__(self, o): return self._inplace(F.bitwise_or(self, o), "|=")  # noqa: E704
    def __ixor__(self, o): return self._inplace(F.bitwise_xor(self, o), "^=")  # noqa: E704
    def __ilshift__(self, o): return self._inplace(_U().left_shift(self, o), "<<=")  # noqa: E704
    def __irshift__(self, o): return self._inplace(_U().right_shift(self, o), ">>=")  # noqa: E704
    def __imatmul__(self, o): return self._inplace(_frontend("linalg").matmul(self, o), "@=")  # noqa: E704

    def _inplace(self, result: "Tensor", symbol: str) -> "Tensor":
        """`x op= y` as NumPy does it: the result is cast back to x's dtype (refused where the cast is not
        'same_kind', as NumPy refuses float into int) and must keep x's shape. The name x is rebound; the
        caller's array is not written (assignment into arrays is not supported yet)."""
        if result.shape != self.shape:
            raise ShapeError(f"non-broadcastable output operand with shape {self.shape} doesn't match the "
                             f"broadcast shape {result.shape} (x {symbol} y keeps x's shape)")
        if result.dtype != self.dtype and not np.can_cast(result.dtype, self.dtype, "same_kind"):
            raise UnsupportedError(f"x {symbol} y: cannot cast the result from {result.dtype} to x's dtype "
                                   f"{self.dtype} with casting rule 'same_kind' (NumPy refuses this too); "
                                   f"write x = x {symbol[:-1]} y for a new array")
        return result if result.dtype == self.dtype else F.astype(result, self.dtype)
    def __pos__(self): return _U().positive(self)  # noqa: E704
    def __abs__(self): return F.abs(self)  # noqa: E704
    def __invert__(self): return F.invert(self)  # noqa: E704

    # -- indexing --
    def __getitem__(self, key) -> "Tensor":
        return Tensor(_index(self._node, key))

    def __setitem__(self, key, value):
        raise UnsupportedError("item assignment on a traced value; build the result with tj.where instead")

    # -- NumPy protocols: existing NumPy code traces unchanged --
    def __array__(self, dtype=None, copy=None):
        raise TraceError("a traced value was converted to a NumPy array (np.asarray / np.array, a NumPy "
                         "function tracejit does not implement, or an index into a NumPy array: table[i]); keep "
                         "it symbolic inside the kernel. To index a NumPy array, pass it to the kernel as an "
                         "argument or write tj.take(table, i)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .numpy_protocol import array_ufunc
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from .numpy_protocol import array_function
        return array_function(func, args, kwargs)


def _index(node: Node, key) -> Node:
    key = key if isinstance(key, tuple) else (key,)
    indexing = _frontend("indexing")
    if any(indexing.is_array_index(k) for k in key):
        return indexing.advanced_index(node, key)
    if sum(k is Ellipsis for k in key) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(node.shape):
        raise ShapeError(f"too many indices: array of shape {node.shape} is {len(node.shape)}-dimensional, "
                         f"but {used} were indexed")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(node.shape) - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(node.shape) - used)
    spec, out_shape, dim = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = node.shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            n = len(range(start, stop, step))
            spec.append((start if n else 0, step, n))
            out_shape.append(n)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k)
            if not -size <= i < size:
                raise IndexOutOfBoundsError(f"index {i} is out of bounds for axis {dim} with size {size}")
            spec.append((i % size, 1, 1))
        else:
            raise UnsupportedError(f"index of type {type(k).__name__} is not supported")
        dim += 1
    return build.reshape(build.slice_(node, tuple(spec)), tuple(out_shape))


def _U():
    """The ufunc module, which needs functions (and so this module) loaded first."""
    from . import ufuncs
    return ufuncs


from . import functions as F  # noqa: E402  (functions needs Tensor defined)

# ndarray methods that are the NumPy function of the same name with the array as first argument, by module.
# Resolved on call: those modules import this one, so they cannot be imported while it loads.
_METHODS = {
    "reductions": ("sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax", "argmin", "ptp"),
    "methods": ("ravel", "squeeze", "swapaxes", "round", "copy"),
    "linalg": ("dot",),
    "indexing": ("take", "searchsorted"),
    "movement": ("repeat",),
    "scans": ("cumsum", "cumprod"),
    "sorting": ("argsort",),
}


def _frontend(module: str):
    return importlib.import_module(f"{__package__}.{module}")


def _method(module: str, name: str):
    def method(self, *args, **kwargs):
        return getattr(_frontend(module), name)(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"As ndarray.{name}: calls np.{name} on the traced value."
    return method


for _module, _names in _METHODS.items():
    for _name in _names:
        setattr(Tensor, _name, _method(_module, _name))

_NDARRAY_NAMES = frozenset(dir(np.ndarray))
_SUPPORTED_NAMES = frozenset(n for n in dir(Tensor) if not n.startswith("_")) & _NDARRAY_NAMES
