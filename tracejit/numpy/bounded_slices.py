"""`x[a:b]` where a bound is read when the kernel runs: the index of a loop compiled as a loop (`L[i, :i]`,
`A[k + 1:, k]`), or a value read from arrays. Its length is not known while tracing, so the slice keeps its
elements at their places along the whole axis (`values`, the array with that axis full) with `inside`, a bool
vector saying which places are in the slice. What does not depend on the length works:
- elementwise arithmetic with Python numbers, 0-d values, and slices of the same bounds (the same `inside`);
- sums, and dot products and matrix products that contract the sliced axis of two slices of the same bounds
  (`L[i, :i] @ x[:i]`, `A[i, :j] @ A[:j, j]`): both operands are zero outside the slice, so the product of
  the whole axes is the product of the slices;
- a product of a whole array with a slice along an axis the product keeps (`data[:, i] @ data[:, i:M]`): the
  whole product, a slice of the same bounds;
- np.flip (`np.flip(r[:k])`): along the sliced axis each place inside reads its mirror place inside;
- max, min, argmax and argmin over the sliced axis (`np.argmax(np.abs(A[k:, k])) + k`, partial pivoting's row):
  the places outside hold the dtype's lowest (highest) value, an argmax found among them is the slice's first
  place, and an empty slice raises NumPy's ValueError when the kernel runs;
- indexing an array with a 1-d slice of positions (`x[cols]`, `cols = A_col[A_row[i]:A_row[i + 1]]`);
- storing one back through the same bounds, or storing a number (`x[a:b] = ...`, `x[a:b] -= ...`): a where().
Anything whose shape is the slice's length (its .shape, len(), indexing into it, other NumPy functions)
refuses with an UnsupportedError; inside a loop compiled as a loop that makes the loop run step by step, with
its index a Python number again (numpy/loops.py)."""

from __future__ import annotations

import weakref

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build, faulting
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy import int_comparisons
from tracejit.numpy.tensor import AUGMENTED, AUGMENTED_NAMES, Tensor, as_node, python_value

INDEX = np.dtype(np.int64)


def refusal(what: str = "this use") -> UnsupportedError:
    return UnsupportedError(
        f"{what} of a slice whose bound is known only when the kernel runs (a loop's index, or a value read from "
        "arrays): its length is not known while tracing. Such a slice supports arithmetic with numbers and with "
        "slices of the same bounds, .sum(), dot products and @ over the sliced axis, @ with a whole array along "
        "an axis the product keeps, and assignment through the same bounds"
    )


def _unknown(bound) -> bool:
    return isinstance(bound, Tensor) and isinstance(python_value(bound, "a slice bound"), Tensor)


def _key_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def bounded(key) -> bool:
    """Whether an index holds a slice with a bound known only when the kernel runs."""
    return any(isinstance(k, slice) and (_unknown(k.start) or _unknown(k.stop)) for k in _key_tuple(key))


def split(t: Tensor, key) -> tuple[tuple, int, Node]:
    """For an index with such a slice: the index with that slice whole, the axis of t[whole index] it is,
    and the bool vector of the places along that axis inside the slice."""
    key = _key_tuple(key)
    found = [n for n, k in enumerate(key) if isinstance(k, slice) and (_unknown(k.start) or _unknown(k.stop))]
    if len(found) != 1:
        raise refusal("more than one such bound in one index is not supported: an index")
    at = found[0]
    dim = axis = 0
    for k in key[:at]:
        if k is None:
            axis += 1
        elif isinstance(k, slice):
            dim, axis = dim + 1, axis + 1
        elif isinstance(k, (bool, np.bool_)) or k is Ellipsis:
            raise refusal("an index with ... or a bool beside")
        elif isinstance(k, (int, np.integer)) or isinstance(k, Tensor) and k.shape == () and k.dtype.kind in "iu":
            dim += 1
        else:
            raise refusal("an index with an array beside")
    s = key[at]
    if s.step is not None and python_value(s.step, "a slice step") != 1:
        raise refusal("a step other than 1 with")
    length = t.shape[dim]
    places = build.iota((length,), 0, INDEX)
    first, last = _bound(s.start, 0, length), _bound(s.stop, length, length)
    start, stop = build.broadcast_to(first, (length,)), build.broadcast_to(last, (length,))
    inside = build.binary(
        Op.AND, build.binary(Op.LE, start, places), build.binary(Op.LT, places, stop)
    )  # (start <= p < stop)
    whole = key[:at] + (slice(None),) + key[at + 1 :]
    _BOUNDS[inside] = (first, last)
    return whole, axis, inside


# a slice's mask -> its bounds (0-d: the first place inside, one past the last), as split made them; nodes are
# hash-consed, so every slice with the same bounds along an axis of the same length has the same mask
_BOUNDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bound(value, default: int, length: int) -> Node:
    """A slice bound as Python takes it (None: the default; negative: from the end; clipped to [0, length]), a 0-d
    value."""
    if value is None:
        node = build.const(default, INDEX, ())
    else:
        value = python_value(value, "a slice bound")
        node = as_node(value)
        if node.dtype.kind not in "iu":
            raise TypeError("slice indices must be integers or None or have an __index__ method")
        node = build.cast(node, INDEX)
        n = build.const(length, INDEX, ())
        zero = build.const(0, INDEX, ())
        node = build.where(build.binary(Op.LT, node, zero), build.binary(Op.ADD, node, n), node)
        node = build.binary(Op.MIN, build.binary(Op.MAX, node, zero), n)
    return node


def getitem(t: Tensor, key) -> BoundedSlice | Tensor:
    window = windows(t, key)
    if window is None and _inside(t, key):
        window = windows(t, key, proven=True)
    if window is not None:
        return window
    whole, axis, inside = split(t, key)
    return BoundedSlice(t[whole]._node, axis, inside)


def take(t: Tensor, positions) -> BoundedSlice:
    """t[cols] where cols is such a slice of integer positions (spmv's `x[A_col[A_row[i]:A_row[i + 1]]]`): a slice of
    the same bounds whose places inside hold t at those positions. Outside the slice the positions are taken as 0
    (they are never read: a position there, another row's, must not fault)."""
    if not isinstance(positions, BoundedSlice) or positions.ndim != 1 or positions.dtype.kind not in "iu":
        raise refusal("indexing with (only a 1-d slice of integer positions is supported)")
    if t.ndim < 1 or t.shape[0] == 0:
        raise refusal("indexing an empty axis with")
    zero = build.const(0, positions.dtype, positions.values.shape)
    picked = t[Tensor(build.where(positions.inside, positions.values, zero))]
    return BoundedSlice(as_node(picked), 0, positions.inside)


def _inside(t: Tensor, key) -> bool:
    """Whether the one slice with a bound known only when the kernel runs has a constant length (stop - start) and
    lies inside its axis for every value its start takes (a loop's index, its bounds known while tracing:
    int_comparisons.span_of): it is then that many places from its start, a value of known shape (cma_pt's
    `E[:, i * os:i * os + ntaps]`), which arithmetic with whole arrays and complex values takes as any array."""
    key = _key_tuple(key)
    found = [n for n, k in enumerate(key) if isinstance(k, slice) and (_unknown(k.start) or _unknown(k.stop))]
    if len(found) != 1 or len(key) > t.ndim or any(k is None or k is Ellipsis for k in key):
        return False
    k = key[found[0]]
    length = _constant_length(k.start, k.stop)
    if k.step not in (None, 1) or length is None or length < 0:
        return False
    span = int_comparisons.span_of(as_node(k.start))
    return span is not None and 0 <= span[0] and span[1] + length <= t.shape[found[0]]


def windows(t: Tensor, key, proven: bool = False) -> Tensor | None:
    """t[i - 1:i + 2, j - 1:j + 2]: slices along several axes whose bounds are read when the kernel runs but whose
    lengths are constants (stop - start, as written): each a gather of that many places from its start, a value
    of known shape. NumPy's slice has that length only where it lies inside the axis (or wholly in its negative
    indices); elsewhere it is shorter, which such a value cannot follow: the kernel raises there instead of
    answering (faulting.check). One such slice is a BoundedSlice instead, which follows every length. None where
    the index is not of this form."""
    key = _key_tuple(key)
    if any(k is None for k in key):  # (new axes: the windows of the other entries, then the axes added where asked)
        inner = windows(t, tuple(k for k in key if k is not None))
        if inner is None:
            return None
        axes, at = [], 0
        for k in key:
            if k is None:
                axes.append(at)
            if k is None or isinstance(k, slice):
                at += 1
        return np.expand_dims(inner, tuple(axes))  # type: ignore[return-value]  # (a Tensor: the protocol)
    found = [n for n, k in enumerate(key) if isinstance(k, slice) and (_unknown(k.start) or _unknown(k.stop))]
    if len(found) < (1 if proven else 2) or len(key) > t.ndim:
        return None
    if not all(isinstance(k, slice) or isinstance(k, (int, np.integer, Tensor)) for k in key):
        return None  # (None, Ellipsis, arrays: the axes' places are not one per key entry)
    lengths = {}
    for n in found:
        k = key[n]
        length = _constant_length(k.start, k.stop)
        if k.step not in (None, 1) or length is None or length < 0:
            return None
        lengths[n] = length
    whole = tuple(slice(None) if n in lengths else k for n, k in enumerate(key))
    result = t[whole]
    for n, length in lengths.items():
        axis = sum(1 for k in key[:n] if isinstance(k, slice))
        size = t.shape[n]
        start = build.cast(as_node(key[n].start), INDEX)
        zero, top = build.const(0, INDEX, ()), build.const(size, INDEX, ())
        inside = build.binary(
            Op.AND,
            build.binary(Op.LE, zero, start),
            build.binary(Op.LE, start, build.const(size - length, INDEX, ())),
        )
        behind = build.binary(  # (wholly in the negative indices: x[-3:-1])
            Op.AND,
            build.binary(Op.LE, build.const(-size, INDEX, ()), start),
            build.binary(Op.LE, start, build.const(-length - 1, INDEX, ())),
        )
        fault = Fault(
            "IndexError",
            f"a slice of {length} elements whose bounds are known only when the kernel runs (a loop's index) "
            f"reaches past the ends of an axis of size {size}: NumPy gives a shorter slice there, which tracejit "
            "cannot follow when it slices along more than one axis so; keep the bounds inside the array",
        )
        ok = build.binary(Op.OR, inside, behind)
        offset = build.where(build.binary(Op.LT, start, zero), build.binary(Op.ADD, start, top), start)
        last = build.const(size - length, INDEX, ())  # (clamped: where the check fails, its error is the one)
        offset = build.binary(Op.MIN, build.binary(Op.MAX, offset, zero), last)
        offset = build.binary(Op.ADD, offset, build.cast(faulting.check(ok, fault), INDEX))
        places = build.binary(
            Op.ADD, build.broadcast_to(build.reshape(offset, (1,)), (length,)), build.iota((length,), 0, INDEX)
        )
        result = np.take(result, Tensor(places), axis=axis)  # type: ignore[assignment]  # (a Tensor: the protocol)
    return result


def _constant_length(start, stop) -> int | None:
    """stop - start where both are a common value plus constants (i - 1 and i + 2: 3), else None."""
    base_a, a = _base_and_offset(start)
    base_b, b = _base_and_offset(stop)
    return b - a if base_a is base_b and base_a is not None else None


def _base_and_offset(bound) -> tuple[Node | None, int]:
    if bound is None or not isinstance(bound, Tensor):
        return None, 0
    node, offset = as_node(bound), 0
    while node.op in (Op.ADD, Op.SUB) and node.shape == ():
        a, b = node.srcs
        if b.op is Op.CONST and b.dtype.kind in "iu":
            offset += int(b.arg) if node.op is Op.ADD else -int(b.arg)
            node = a
        elif a.op is Op.CONST and a.dtype.kind in "iu" and node.op is Op.ADD:
            offset += int(a.arg)
            node = b
        else:
            break
    while node.op is Op.CAST and node.srcs[0].dtype.kind in "iu":
        node = node.srcs[0]
    return node, offset


def setitem(t: Tensor, key, value) -> None:
    """t[key] = value for a key with such a slice: where() over the whole axis."""
    whole, axis, inside = split(t, key)
    region = t[whole]
    if isinstance(value, BoundedSlice):
        v = value.values_for(axis, inside, region.shape)
    else:
        v = as_node(value)
        if v.shape != ():
            raise refusal("storing an array (its length must be the slice's) into")
        v = build.broadcast_to(build.cast(v, region.dtype), region.shape)
    mask = _along(inside, axis, region.shape)
    t[whole] = Tensor(build.where(mask, build.cast(v, region.dtype), region._node))


def _along(inside: Node, axis: int, shape: tuple[int, ...]) -> Node:
    """The places vector as a mask of `shape`, along `axis`."""
    lead = tuple(1 if d != axis else n for d, n in enumerate(shape))
    return build.expand(build.reshape(inside, lead), tuple(shape))


class BoundedSlice(np.lib.mixins.NDArrayOperatorsMixin):
    """A slice of a traced array whose bound is known only when the kernel runs (module docstring)."""

    __slots__ = ("values", "axis", "inside")
    __array_priority__ = 1002
    _tracejit_defer = True  # (Tensor's operators leave `x * s` to it: numpy/tensor.py)

    def __init__(self, values: Node, axis: int, inside: Node):
        self.values, self.axis, self.inside = values, axis, inside

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return len(self.values.shape)

    def values_for(self, axis: int, inside: Node, shape) -> Node:
        if axis != self.axis or inside is not self.inside or self.values.shape != tuple(shape):
            raise refusal("combining it with a slice of other bounds, or of another shape, as in")
        return self.values

    def _operand(self, x):
        if isinstance(x, BoundedSlice):
            return Tensor(x.values_for(self.axis, self.inside, self.values.shape))
        if isinstance(x, (bool, int, float, complex)) or as_node(x).shape == ():
            return x
        raise refusal("arithmetic with a whole array (its shape must match the slice's length)")

    def _zeroed(self) -> Tensor:
        """The values with the places outside the slice zero."""
        v = self.values
        return Tensor(build.where(_along(self.inside, self.axis, v.shape), v, build.const(0, v.dtype, v.shape)))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from tracejit.numpy.numpy_protocol import array_ufunc

        if method != "__call__" or kwargs.get("out") is not None or ufunc.nout != 1:
            raise refusal(f"np.{ufunc.__name__}.{method}" if method != "__call__" else f"np.{ufunc.__name__}(out=)")
        if ufunc is np.matmul:
            return _contract(*inputs)
        if ufunc.nin > 2 or ufunc is np.power and any(as_node(self._operand(x)).dtype.kind in "iu" for x in inputs):
            raise refusal(f"np.{ufunc.__name__}")  # (an int power faults where the data outside is negative)
        result = array_ufunc(ufunc, method, tuple(self._operand(x) for x in inputs), kwargs)
        return BoundedSlice(as_node(result), self.axis, self.inside)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.dot or func is np.matmul:
            if kwargs:
                raise refusal(f"np.{func.__name__} with keywords")
            return _contract(*args)
        if func is np.sum:
            return args[0].sum(*args[1:], **kwargs) if isinstance(args[0], BoundedSlice) else _refuse_sum()
        if func is np.flip and args[0] is self:
            return self._flip(*args[1:], **kwargs)
        extreme = _EXTREMES.get(func)
        if extreme is not None and args[0] is self and set(kwargs) <= {"axis", "keepdims"}:
            return self._extreme(extreme, *args[1:2], **kwargs)
        raise refusal(f"np.{func.__name__}")

    def _flip(self, axis=None) -> BoundedSlice:
        """np.flip: along the sliced axis its elements reversed in their places (durbin's `np.flip(r[:k])`: r[k - 1
        - p] at p), along the others the values reversed."""
        axes = range(self.ndim) if axis is None else [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        values = Tensor(self.values)
        for a in sorted({int(a) % self.ndim if -self.ndim <= a < self.ndim else a for a in axes}):
            if not 0 <= a < self.ndim:
                raise np.exceptions.AxisError(f"axis {a} is out of bounds for array of dimension {self.ndim}")
            if a != self.axis:
                values = np.flip(values, int(a))  # type: ignore[assignment]  # (a Tensor: the protocol)
                continue
            bounds = _BOUNDS.get(self.inside)
            if bounds is None:
                raise refusal("np.flip along the axis of")
            length = self.values.shape[a]
            places = build.iota((length,), 0, INDEX)
            far = build.binary(Op.ADD, bounds[0], bounds[1])  # start + stop - 1 - p: inside, the mirror place
            mirror = build.binary(
                Op.SUB,
                build.binary(Op.SUB, build.broadcast_to(far, (length,)), places),
                build.const(1, INDEX, (length,)),
            )
            low, high = build.const(0, INDEX, (length,)), build.const(max(length - 1, 0), INDEX, (length,))
            mirror = build.binary(Op.MIN, build.binary(Op.MAX, mirror, low), high)  # (outside: any place, unread)
            values = np.take(values, Tensor(mirror), axis=a)  # type: ignore[assignment]
        return BoundedSlice(as_node(values), self.axis, self.inside)

    def sum(self, axis=None, dtype=None, keepdims=False) -> Tensor:
        return self._zeroed().sum(axis=axis, dtype=dtype, keepdims=keepdims)

    def max(self, axis=None, keepdims=False) -> Tensor:
        return self._extreme("max", axis, keepdims)

    def min(self, axis=None, keepdims=False) -> Tensor:
        return self._extreme("min", axis, keepdims)

    def argmax(self, axis=None, keepdims=False) -> Tensor:
        return self._extreme("argmax", axis, keepdims)

    def argmin(self, axis=None, keepdims=False) -> Tensor:
        return self._extreme("argmin", axis, keepdims)

    def _extreme(self, name: str, axis=None, keepdims: bool = False) -> Tensor:
        """max, min, argmax or argmin over the sliced axis (of a 1-d slice, axis=None too): reduced over the whole
        axis, the places outside holding the dtype's lowest value (highest for min), which no value inside
        exceeds and NaN inside still wins; where every value inside is that one, an arg- reduction finding a
        place before the slice answers the slice's first place. An empty slice raises NumPy's ValueError."""
        v = self.values
        if axis is None and self.ndim == 1:
            axis = 0
        if axis is None or python_value(axis, "an axis") % self.ndim != self.axis:
            raise refusal(f".{name}() over an axis other than the sliced one, of")
        if v.dtype.kind not in "biuf":
            raise refusal(f".{name}() of {v.dtype} values, of")
        high = name in ("max", "argmax")
        if v.dtype.kind == "f":
            fill = -np.inf if high else np.inf
        elif v.dtype.kind == "b":
            fill = not high
        else:
            info = np.iinfo(v.dtype)
            fill = info.min if high else info.max
        filled = Tensor(build.where(_along(self.inside, self.axis, v.shape), v, build.const(fill, v.dtype, v.shape)))
        found = getattr(filled, name)(axis=self.axis, keepdims=keepdims)
        first, last = _BOUNDS[self.inside]
        if name.startswith("arg"):  # (the place in the whole axis, counted from the slice's start)
            at = build.binary(Op.SUB, as_node(found), build.broadcast_to(first, found.shape))
            found = Tensor(build.binary(Op.MAX, at, build.const(0, at.dtype, at.shape)))
        message = (
            f"attempt to get {name} of an empty sequence"
            if name.startswith("arg")
            else f"zero-size array to reduction operation {'maximum' if high else 'minimum'} which has no identity"
        )
        ok = faulting.check(build.binary(Op.LT, first, last), Fault("ValueError", message))
        return Tensor(build.binary(Op.ADD, as_node(found), build.cast(ok, found.dtype)))

    def dot(self, other) -> Tensor | BoundedSlice:
        return _contract(self, other)

    def __array__(self, dtype=None, copy=None):
        raise refusal("converting to a NumPy array")

    def __getattr__(self, name):
        raise refusal(f".{name}")

    def __getitem__(self, key):
        raise refusal("indexing into")

    def __len__(self):
        raise refusal("len()")

    def __iter__(self):
        raise refusal("iteration over")

    def __bool__(self):
        raise refusal("the truth value")

    def __repr__(self) -> str:
        return f"<a slice along axis {self.axis} of a traced array of shape {self.values.shape}, bounds known when run>"


_EXTREMES = {np.max: "max", np.amax: "max", np.min: "min", np.amin: "min", np.argmax: "argmax", np.argmin: "argmin"}


def _refuse_sum():
    raise refusal("np.sum")


def _contract(a, b) -> Tensor | BoundedSlice:
    """a @ b (np.dot of 1-D and 2-D operands) where the contracted axis is a slice with the same bounds in both:
    the product of the operands zeroed outside the slice."""
    if not (isinstance(a, BoundedSlice) and isinstance(b, BoundedSlice)):
        free = _free_axis_product(a, b)
        if free is not None:
            return free
        raise refusal("a product of a slice and a whole array (the contracted lengths must match) as in a")
    if not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
        raise refusal("a product of arrays of more than two dimensions with")
    if a.axis != a.ndim - 1 or b.axis != (0 if b.ndim == 1 else b.ndim - 2) or a.inside is not b.inside:
        raise refusal("a product that does not contract the sliced axis of both, as in a")
    if a.values.shape[a.axis] != b.values.shape[b.axis]:
        raise refusal("a product of slices of axes of other lengths, as in a")
    return a._zeroed() @ b._zeroed()


def _free_axis_product(a, b) -> BoundedSlice | None:
    """a @ b where one operand is such a slice along an axis the product keeps (`data[:, i] @ data[:, i:M]`, a
    covariance's row: the slice is of the columns, the sum is over the rows) and the other a whole array: the
    product of the whole arrays, a slice with the same bounds along the product's axis that axis becomes (the
    places outside it are computed and never read). None where the operands are not of that form."""
    sliced, whole = (a, b) if isinstance(a, BoundedSlice) else (b, a)
    if not isinstance(sliced, BoundedSlice) or isinstance(whole, BoundedSlice):
        return None
    other = as_node(whole)
    if not (1 <= sliced.ndim <= 2 and 1 <= len(other.shape) <= 2):
        return None
    if sliced is a:  # a's rows are its axis 0 of 2 (a 1-d a has none the product keeps)
        if sliced.ndim != 2 or sliced.axis != 0:
            return None
        axis = 0
    else:  # b's columns: its last axis of 2
        if sliced.ndim != 2 or sliced.axis != 1:
            return None
        axis = len(other.shape) - 1
    values = Tensor(sliced.values) @ Tensor(other) if sliced is a else Tensor(other) @ Tensor(sliced.values)
    return BoundedSlice(as_node(values), axis, sliced.inside)


def _update(symbol: str, compute):
    def method(self, other):
        from tracejit.numpy.assign import check_inplace

        current = Tensor(self.values)
        result = compute(current, self._operand(other))
        check_inplace(result, current, symbol)  # (NumPy's same_kind rule: an int slice -= 0.5 raises)
        return BoundedSlice(build.cast(as_node(result), self.values.dtype), self.axis, self.inside)

    method.__name__ = f"__i{AUGMENTED_NAMES[symbol]}__"
    return method


for _symbol, _compute in AUGMENTED.items():
    setattr(BoundedSlice, f"__i{AUGMENTED_NAMES[_symbol]}__", _update(_symbol, _compute))
