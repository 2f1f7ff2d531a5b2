"""Constructors for graph nodes: each checks its operands and infers the result's shape and dtype."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tracejit.errors import ShapeError
from tracejit.ir.dtypes import BOOL, identity
from tracejit.ir.faulting import note
from tracejit.ir.graph import BINARY, MOVEMENT, PREDICATES, REDUCE_OPS, UNARY, Node, Op
from tracejit.ir.table import Table


def const(value, dtype, shape=(), weak: bool = False) -> Node:
    dtype = np.dtype(dtype)
    value = dtype.type(value).item()
    return Node.make(Op.CONST, dtype, shape, (), value, weak)


def iota(shape: tuple[int, ...], axis: int, dtype=np.int64) -> Node:
    """An array of `shape` whose elements are their own index along `axis` (np.arange, np.eye, tri)."""
    shape = tuple(int(s) for s in shape)
    assert 0 <= axis < len(shape), (shape, axis)
    return Node.make(Op.IOTA, dtype, shape, (), int(axis))


def table(values: np.ndarray) -> Node:
    """A constant array embedded in the kernel (callers keep it small: see table.MAX_ELEMENTS)."""
    return Node.make(Op.TABLE, values.dtype, values.shape, (), Table.of(values))


def input_(index: int | tuple, dtype, shape, weak: bool = False) -> Node:
    """The argument at position `index`, or a hidden scalar passed beside the arguments, keyed by a tuple
    (numpy/int_comparisons.py)."""
    return Node.make(Op.INPUT, dtype, shape, (), index, weak)


def unary(op: Op, x: Node) -> Node:
    assert op in UNARY, op
    return Node.make(op, BOOL if op in PREDICATES else x.dtype, x.shape, (x,), None, x.weak)


def binary(op: Op, a: Node, b: Node) -> Node:
    assert op in BINARY, op
    assert a.shape == b.shape and a.dtype == b.dtype, (op, a, b)
    return note(Node.make(op, BOOL if op in PREDICATES else a.dtype, a.shape, (a, b), None, a.weak and b.weak))


def where(cond: Node, a: Node, b: Node) -> Node:
    assert cond.dtype == BOOL and cond.shape == a.shape == b.shape and a.dtype == b.dtype
    return Node.make(Op.WHERE, a.dtype, a.shape, (cond, a, b), None, a.weak and b.weak)


def cast(x: Node, dtype, weak: bool = False) -> Node:
    dtype = np.dtype(dtype)
    if x.dtype == dtype and x.weak == weak:
        return x
    if x.op is Op.CONST:
        with np.errstate(all="ignore"):
            return const(np.asarray(x.arg, x.dtype).astype(dtype).item(), dtype, x.shape, weak)
    if x.dtype.kind == "f" and dtype.kind in "iu":
        return _float_to_int(x, dtype, weak)
    if dtype == np.float16 and x.dtype == np.float64:  # rounded once (LLVM's fptrunc and numba's round_f16 do not)
        x = float32_rounded_to_odd(x)
    inner = x.srcs[0] if x.op is Op.CAST else None
    if inner is not None and inner.dtype == dtype and inner.weak == weak and _widens(inner.dtype, x.dtype):
        return inner  # (a cast back from a wider type of the same kind: argsort's int64 taken as int32 again)
    return note(Node.make(Op.CAST, dtype, x.shape, (x,), dtype, weak))


def float32_rounded_to_odd(x: Node) -> Node:
    """x as float32 rounded to odd: truncated toward zero, its last bit set where that dropped anything. float16,
    bfloat16 and float8 have at least two bits fewer than float32, so rounding this to one of them rounds x itself
    once, as NumPy converts float64 to float16 and ml_dtypes (0.7 and later) float64 and integers to its types:
    1 + 2**-8 + 2**-30 becomes bfloat16's 1 + 2**-7, where rounding to float32 first loses the 2**-30 and then ties
    to 1. Exact in float32 (so cast plainly): float16, float32 and integers of up to 16 bits. A float64 scalar
    argument is cast plainly too: devices without float64 receive it as float32 already (a Python float next to
    float16 or bfloat16 data there is rounded twice; codegen/simt/cstyle.py's _check_float64_scalars)."""
    dt, f32, u32 = x.dtype, np.dtype(np.float32), np.dtype(np.uint32)
    t = cast(x, f32)  # rounded to nearest
    if not (dt == np.float64 or dt.kind in "iu" and dt.itemsize >= 4) or _scalar_argument(x):
        return t

    def c(v, d=f32):
        return const(v, d, x.shape)

    if dt == np.float64:
        back = cast(t, dt)
        inexact = binary(Op.AND, binary(Op.NE, back, x), binary(Op.EQ, x, x))  # (a NaN's payload kept as it was)
        away = binary(Op.LT, unary(Op.ABS, x), unary(Op.ABS, back))
    else:  # t may be 2**bits (2**(bits-1) signed), one past the type: rounded up, and not convertible back
        big = binary(Op.LE, c(2.0 ** (dt.itemsize * 8 - (dt.kind == "i"))), t)
        back = cast(where(big, c(0.0), t), dt)
        inexact = binary(Op.OR, big, binary(Op.NE, back, x))
        beyond = binary(Op.LT, x, back)
        if dt.kind == "i":
            beyond = where(binary(Op.LT, x, c(0, dt)), binary(Op.LT, back, x), beyond)
        away = binary(Op.OR, big, beyond)
    bits = bitcast(t, u32)
    bits = where(away, binary(Op.SUB, bits, c(1, u32)), bits)  # one step toward zero: the truncation
    return bitcast(where(inexact, binary(Op.OR, bits, c(1, u32)), bits), f32)


def _scalar_argument(x: Node) -> bool:
    while x.op in MOVEMENT:
        x = x.srcs[0]
    return x.op is Op.INPUT and x.shape == ()


def bitcast(x: Node, dtype) -> Node:
    """x's bits read as `dtype`, of x's itemsize: float32 <-> uint32 (bfloat16's and float8's, ir/narrow_floats.py)."""
    dtype = np.dtype(dtype)
    assert {x.dtype, dtype} == {np.dtype(np.float32), np.dtype(np.uint32)}, (x, dtype)
    return Node.make(Op.BITCAST, dtype, x.shape, (x,), dtype, False)


def _widens(narrow: np.dtype, wide: np.dtype) -> bool:
    """Whether every value of `narrow` is one of `wide` of the same kind (int32 in int64, float32 in float64)."""
    return narrow.kind == wide.kind and narrow.kind in "iuf" and wide.itemsize >= narrow.itemsize


def _float_to_int(x: Node, dtype: np.dtype, weak: bool) -> Node:
    """NumPy's float-to-integer cast for every value, in range or not. C leaves an out-of-range conversion
    undefined (LLVM: poison; vectorised, it saturated: 300.7 -> int8 127 where NumPy gives 44); NumPy's is
    x86's: a truncation to int32 (int64 for int64 and uint64), INT_MIN where the value is NaN or beyond,
    then the low bits for narrower types (-1.5 -> uint8 255). uint32 is the low 32 bits of the int64
    truncation, which NumPy gives for 0-d arrays and short ones (its vectorised loop gives 0 for some values
    beyond: it is NumPy's only cast whose answer depends on where the element is), and uint64 goes through
    int64 from 2**63 up. The conversions left to the target (_raw) only ever see values in range."""
    if x.dtype == np.float16:
        x = cast(x, np.float32)  # exact; float16's range is well inside every target's
    if dtype == np.uint32:
        return cast(_uint32_bits(x), dtype, weak)
    wide = dtype.itemsize == 8
    t = _truncation(x, np.dtype(np.int64 if wide else np.int32))
    if dtype == np.uint64:
        top = const(2.0**63, x.dtype, x.shape)
        high = binary(
            Op.XOR, _truncation(binary(Op.SUB, x, top), np.dtype(np.int64)), const(-(2**63), np.int64, x.shape)
        )
        t = where(binary(Op.LE, top, x), high, t)
    return cast(t, dtype, weak)


def _raw(x: Node, dtype) -> Node:
    return Node.make(Op.CAST, np.dtype(dtype), x.shape, (x,), np.dtype(dtype), False)


def _truncation(x: Node, dtype: np.dtype) -> Node:
    """x truncated to int32 or int64 as x86's cvtt does: the type's minimum for NaN and out-of-range values."""
    bits = dtype.itemsize * 8
    # -2**(bits-1) - 1 as x's dtype: in float32 it rounds to -2**(bits-1), whose conversion is the minimum anyway
    low = const(float(np.float64(-(2.0 ** (bits - 1)) - 1).astype(x.dtype)), x.dtype, x.shape)
    inside = binary(Op.AND, binary(Op.LT, low, x), binary(Op.LT, x, const(2.0 ** (bits - 1), x.dtype, x.shape)))
    return where(inside, _raw(x, dtype), const(-(2 ** (bits - 1)), dtype, x.shape))


def _uint32_bits(x: Node) -> Node:
    """The low 32 bits of x's int64 truncation (0 for NaN and beyond 2**63), with 32-bit integers only (WGSL
    has no 64-bit ones): below 2**31 the int32 truncation; above, the truncation modulo 2**32, which float
    arithmetic gives exactly (an integer below 2**32 that is a multiple of x's ulp), split at 2**31."""

    def c(v, dt=x.dtype):
        return const(v, dt, x.shape)

    t = unary(Op.TRUNC, x)
    a = unary(Op.ABS, t)
    small = _raw(where(binary(Op.LT, a, c(2.0**31)), t, c(0.0)), np.int32)
    rest = binary(Op.SUB, t, binary(Op.MUL, unary(Op.FLOOR, binary(Op.MUL, t, c(2.0**-32))), c(2.0**32)))
    rest = where(binary(Op.LT, a, c(2.0**63)), rest, c(0.0))  # NaN and beyond: 0, as int64's minimum gives
    upper = binary(Op.LE, c(2.0**31), rest)
    low = _raw(where(upper, binary(Op.SUB, rest, c(2.0**31)), rest), np.int32)
    big = where(upper, binary(Op.XOR, low, c(-(2**31), np.int32)), low)
    return where(binary(Op.LT, a, c(2.0**31)), small, big)


def reduce(x: Node, op: str, axes: tuple[int, ...]) -> Node:
    """Reduce over axes, keeping them as size-1 dimensions (callers reshape for keepdims=False)."""
    axes = tuple(sorted(set(axes)))
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    if x.size == 0 and op in ("sum", "prod", "max", "min"):
        # nothing to reduce (an empty contraction, the sum of an empty slice): the identity, as in NumPy;
        # no kernel loops over an extent of 0 (its index arithmetic would divide by it)
        return const(identity(op, x.dtype), x.dtype, shape)
    return Node.make(Op.REDUCE, x.dtype, shape, (x,), (op, axes))


def scan(x: Node, op: str, axis: int) -> Node:
    """Running reduction along axis: element i combines elements 0..i (NumPy's cumsum, cumprod and
    ufunc.accumulate, whose callers cast to the result dtype first). Same shape and dtype as x."""
    assert op in REDUCE_OPS and 0 <= axis < len(x.shape), (op, axis, x.shape)
    if x.shape[axis] <= 1 or x.size == 0:
        return x  # each element is its own running total
    return Node.make(Op.SCAN, x.dtype, x.shape, (x,), (op, int(axis)))


def sort(x: Node, axis: int, indices: bool = False) -> Node:
    """x sorted ascending along axis, NaN last, equal values in their order (np.sort), or with indices the
    int32 positions the sorted elements come from (np.argsort, kind="stable")."""
    assert 0 <= axis < len(x.shape) and x.shape[axis] < 2**31, (axis, x.shape)
    if x.shape[axis] <= 1 or x.size == 0:  # already in order
        return iota(x.shape, axis, np.int32) if indices else x
    if x.dtype == BOOL:  # sorted as bytes: False before True
        as_bytes = sort(cast(x, np.uint8), axis, indices)
        return as_bytes if indices else cast(as_bytes, BOOL)
    return Node.make(
        Op.SORT, np.int32 if indices else x.dtype, x.shape, (x,), (int(axis), "indices" if indices else "values")
    )


def reshape(x: Node, shape: tuple[int, ...]) -> Node:
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) != x.size:
        raise ShapeError(f"cannot reshape an array of shape {x.shape} (size {x.size}) into shape {shape}")
    if shape == x.shape:
        return x
    if x.op is Op.CONST:
        return Node.make(Op.CONST, x.dtype, shape, (), x.arg, x.weak)
    if x.op is Op.RESHAPE:  # two reshapes in a row are one
        return reshape(x.srcs[0], shape)
    return Node.make(Op.RESHAPE, x.dtype, shape, (x,), shape, x.weak)


def permute(x: Node, perm: tuple[int, ...]) -> Node:
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(f"axes {perm} are not a permutation of the {len(x.shape)} axes of shape {x.shape}")
    if perm == tuple(range(len(perm))):
        return x
    if x.op is Op.PERMUTE:  # compose
        inner = x.arg
        return permute(x.srcs[0], tuple(inner[p] for p in perm))
    return Node.make(Op.PERMUTE, x.dtype, tuple(x.shape[p] for p in perm), (x,), perm, x.weak)


def expand(x: Node, shape: tuple[int, ...]) -> Node:
    """Broadcast size-1 dimensions of x to shape (same rank)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(x.shape) or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise ShapeError(f"cannot broadcast shape {x.shape} to shape {shape}")
    if shape == x.shape:
        return x
    if x.op is Op.CONST:
        return Node.make(Op.CONST, x.dtype, shape, (), x.arg, x.weak)
    return Node.make(Op.EXPAND, x.dtype, shape, (x,), shape, x.weak)


def slice_(x: Node, spec: Sequence[tuple[int, int, int]]) -> Node:
    """Per dimension (start, step, length): element i of the result is element start + i*step of x."""
    spec = tuple((int(a), int(b), int(n)) for a, b, n in spec)
    for (start, step, n), size in zip(spec, x.shape):
        assert step != 0 and n >= 0 and (n == 0 or (0 <= start < size and 0 <= start + (n - 1) * step < size))
    if all(st == 0 and sp == 1 and n == s for (st, sp, n), s in zip(spec, x.shape)):
        return x
    shape = tuple(n for _, _, n in spec)
    return Node.make(Op.SLICE, x.dtype, shape, (x,), spec, x.weak)


def pad(x: Node, pads: Sequence[tuple[int, int]], fill) -> Node:
    """Extend each dimension by (before, after) elements equal to fill."""
    pads = tuple((int(a), int(b)) for a, b in pads)
    if all(p == (0, 0) for p in pads):
        return x
    shape = tuple(s + a + b for s, (a, b) in zip(x.shape, pads))
    return Node.make(Op.PAD, x.dtype, shape, (x,), (pads, x.dtype.type(fill).item()), x.weak)


def gather(x: Node, indices: tuple[Node, ...], source_axes: tuple[int | None, ...]) -> Node:
    """Integer-array indexing. Element o of the result reads x at position p, where for each axis d of x
    p[d] = o[source_axes[d]], or, where source_axes[d] is None (a gathered axis), p[d] is the value at o
    of the next index array. Index arrays have an integer dtype and the result's shape (broadcast them
    first); a negative index counts from the end, and one outside its axis raises IndexError when the
    kernel runs."""
    indices, source_axes = tuple(indices), tuple(None if a is None else int(a) for a in source_axes)
    shape = indices[0].shape
    assert len(source_axes) == len(x.shape) and sum(a is None for a in source_axes) == len(indices) > 0
    assert all(i.shape == shape and i.dtype.kind in "iu" for i in indices), indices
    assert all(a is None or shape[a] == n for a, n in zip(source_axes, x.shape)), (shape, source_axes, x.shape)
    return note(Node.make(Op.GATHER, x.dtype, shape, (x, *indices), source_axes, x.weak))


def scatter(target: Node, positions: Node, values: Node, op: str) -> Node:
    """The target (n, L...) with every update combined in: row positions[k] of the result is combined (op:
    sum, prod, max, min) with values[k] (m, L...), duplicates all applied. Positions are in [0, n) (the
    caller checks them, a gather does); the order of the updates is NumPy's on the CPU and any on SIMT
    targets (atomics), so only float sums and products may differ in rounding there."""
    assert op in REDUCE_OPS and positions.dtype.kind in "iu" and len(positions.shape) == 1, (op, positions)
    assert values.shape == positions.shape + target.shape[1:] and values.dtype == target.dtype, (values, target)
    return Node.make(Op.SCATTER, target.dtype, target.shape, (target, positions, values), op)


def flat_positions(shape: tuple[int, ...]) -> Node:
    """An array of `shape` whose elements are their own flat (C order) positions: int32 where they fit."""
    dt = np.dtype(np.int32 if math.prod(shape) < 2**31 else np.int64)
    flat = const(0, dt, shape)
    step = 1
    for axis in reversed(range(len(shape))):
        flat = binary(Op.ADD, flat, binary(Op.MUL, iota(shape, axis, dt), const(step, dt, shape)))
        step *= shape[axis]
    return flat


def store_element(x: Node, position: Node, value: Node) -> Node:
    """x with the element at flat `position` (0-d, flat_positions' dtype, inside x) replaced by `value` (0-d,
    x's dtype): x[i, j] = v as one select, which a loop over elements (ir/element_loops.py) reads back as the
    store it is (element_store)."""
    assert position.shape == value.shape == () and value.dtype == x.dtype, (position, value, x)
    flat = flat_positions(x.shape)
    at = binary(Op.EQ, flat, broadcast_to(position, x.shape))
    return where(at, broadcast_to(value, x.shape), x)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ShapeError(
                "operands could not be broadcast together with shapes " + " ".join(str(tuple(s)) for s in shapes)
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(x: Node, shape: tuple[int, ...]) -> Node:
    shape = tuple(shape)
    if len(shape) < len(x.shape):
        raise ShapeError(f"cannot broadcast shape {x.shape} to shape {shape}")
    x = reshape(x, (1,) * (len(shape) - len(x.shape)) + x.shape) if len(shape) > len(x.shape) else x
    return expand(x, shape)
