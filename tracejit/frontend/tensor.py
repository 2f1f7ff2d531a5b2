"""The traced Tensor: a symbolic array that records NumPy-style operations as graph IR nodes."""
from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfBoundsError, ShapeError, TraceError, UnsupportedError
from ..ir import build
from ..ir.dtypes import check, weak_dtype
from ..ir.graph import Node


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
    if isinstance(x, np.ndarray):
        raise UnsupportedError(f"a NumPy array of shape {x.shape} was captured as a constant; pass it to the "
                               "kernel as an argument instead")
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
    def T(self) -> "Tensor":
        return F.transpose(self)

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype})"

    # -- what tracing cannot do --
    def __bool__(self):
        raise TraceError("a traced value was used as a Python bool (in `if`, `while`, `and`/`or`, or bool()); "
                         "its value is not known while tracing. Use tj.where(cond, a, b) (or np.where) to "
                         "select values instead")

    def __len__(self):
        raise TraceError("len() of a traced value; use .shape[0], which is a plain Python int while tracing")

    def __iter__(self):
        raise TraceError("iterating over a traced value; index it with a slice or use a reduction instead")

    def __index__(self):
        raise TraceError("a traced value was used as a Python integer (e.g. as an index or a range bound); "
                         "its value is not known while tracing")

    def __float__(self):
        raise TraceError("float() of a traced value; its value is not known while tracing")

    __int__ = __index__

    def __hash__(self):
        return id(self)

    # -- methods --
    def astype(self, dtype, copy=True) -> "Tensor":
        return F.astype(self, dtype)

    def reshape(self, *shape, order="C") -> "Tensor":
        return F.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, order)

    def transpose(self, *axes) -> "Tensor":
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return F.transpose(self, axes or None)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return F.sum(self, axis, dtype, keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return F.prod(self, axis, dtype, keepdims)

    def max(self, axis=None, keepdims=False):
        return F.max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return F.min(self, axis, keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return F.mean(self, axis, dtype, keepdims)

    def clip(self, a_min=None, a_max=None):
        return F.clip(self, a_min, a_max)

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
    def __matmul__(self, o): return F.matmul(self, o)  # noqa: E704
    def __rmatmul__(self, o): return F.matmul(o, self)  # noqa: E704
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
    def __neg__(self): return F.negative(self)  # noqa: E704
    def __pos__(self): return F.positive(self)  # noqa: E704
    def __abs__(self): return F.abs(self)  # noqa: E704
    def __invert__(self): return F.invert(self)  # noqa: E704

    # -- indexing --
    def __getitem__(self, key) -> "Tensor":
        return Tensor(_index(self._node, key))

    def __setitem__(self, key, value):
        raise UnsupportedError("item assignment on a traced value; build the result with tj.where instead")

    # -- NumPy protocols: existing NumPy code traces unchanged --
    def __array__(self, dtype=None, copy=None):
        raise TraceError("a traced value was converted to a NumPy array (np.asarray / np.array or a NumPy "
                         "function tracejit does not implement); keep it symbolic inside the kernel")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .numpy_protocol import array_ufunc
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from .numpy_protocol import array_function
        return array_function(func, args, kwargs)


def _index(node: Node, key) -> Node:
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tensor, np.ndarray, list)) for k in key):
        raise UnsupportedError("advanced (array or boolean) indexing is not supported; use basic indexing "
                               "(ints, slices, None, ...) or tj.where")
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


from . import functions as F  # noqa: E402  (functions needs Tensor defined)
