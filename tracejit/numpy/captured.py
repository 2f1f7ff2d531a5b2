"""NumPy arrays met while tracing (np.arange(n), np.tri(n), a captured lookup table) as graph IR: a
broadcast constant, an index pattern whose NumPy evaluation reproduces the array bit for bit (arange,
linspace where exact, eye/tri masks), a table embedded in the kernel (at most MAX_ELEMENTS elements), or,
larger, an array the plan holds and passes to the kernels beside the call's arguments (`holding`: JAX's
captured constants; NPBench's stockham_fft computes its twiddle factors with NumPy, 2 x 32,768 of them).

A held array is a copy made when the function was traced: as a table's values, and as Numba's global arrays,
it is frozen then (a global array the code changes afterwards is not seen by the compiled kernel)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import check
from tracejit.ir.graph import Node, Op, toposort
from tracejit.ir.table import MAX_ELEMENTS, MAX_KERNEL_BYTES

_INDEX = np.dtype("int32")  # index patterns count in int32: every device has it, arrays here are small
KIND = "captured"  # INPUT args (KIND, digest): an array the plan holds, passed after the call's hidden scalars


class Held(dict):
    """The arrays held by a trace, by their INPUT arg; `table_bytes`: what the tables it embedded hold. Once a
    table would take that past a GPU kernel's constant memory (table.MAX_KERNEL_BYTES), arrays are held instead,
    so that no kernel can embed more (NPBench's stockham_fft: twiddle factors of 4,096 complex values, 64 KiB as
    two float64 tables, beside its DFT matrix)."""

    table_bytes = 0


# the arrays held by the trace under way (holding()); None: none may be held (a large array is refused)
_HELD: ContextVar[Held | None] = ContextVar("tracejit_captured", default=None)


@contextmanager
def holding(held: Held | None = None) -> Iterator[Held]:
    """While a kernel's function is traced: the large NumPy arrays it uses, held by the plan (their INPUT args);
    `held`: a trace's own again (its results made graph values after the function returned)."""
    held = Held() if held is None else held
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)


def hidden(outputs: list[Node], held: dict[tuple, np.ndarray]) -> tuple[tuple[tuple, np.ndarray], ...]:
    """The held arrays a graph reads, in a fixed order: (INPUT arg, array) each. (A loop's body reads them
    through its LOOP node's sources, numpy/loops.py, as it reads every value from outside it.)"""
    if not held:
        return ()
    found = {n.arg for n in toposort(outputs) if n.op is Op.INPUT and isinstance(n.arg, tuple) and n.arg[:1] == (KIND,)}
    return tuple((arg, held[arg]) for arg in sorted(found))


def array_node(a: np.ndarray) -> Node:
    """The graph node for a NumPy array used as a value of the traced computation."""
    if type(a) is not np.ndarray:  # a mask or matrix product would be silently lost
        raise UnsupportedError(
            f"a {type(a).__module__}.{type(a).__name__} (a NumPy array subclass) is used inside "
            "the kernel; only plain arrays are embedded: pass np.asarray(...) of it, or pass it "
            "to the kernel as an argument"
        )
    dt = check(a.dtype, f"a NumPy array of shape {a.shape} used in the kernel", internal=False)
    a = np.asarray(a, dt, order="C")  # ascontiguousarray would make a 0-d array 1-d
    if a.size == 0:
        return build.const(0, dt, a.shape)
    bits = _bits(a)
    if (bits == bits[0]).all():
        return build.const(a.flat[0].item(), dt, a.shape)
    for pattern in (_diagonal_band, _affine):
        found = pattern(a)
        if found is not None and np.array_equal(_bits(np.ascontiguousarray(found[1], dt)), bits):
            return found[0]
    held = _HELD.get()
    if a.size <= MAX_ELEMENTS and (held is None or held.table_bytes + a.nbytes <= MAX_KERNEL_BYTES):
        if held is not None:
            held.table_bytes += a.nbytes
        return build.table(a)
    if held is None:
        raise UnsupportedError(
            f"a NumPy array of shape {a.shape} ({a.size} elements) is used with traced values; constants are "
            f"embedded only up to {MAX_ELEMENTS} elements (or when they are all equal, an arange or a "
            "triangle/diagonal mask). Pass it as an argument instead"
        )
    digest = hashlib.sha256(f"{dt.str}{a.shape}".encode() + a.tobytes()).hexdigest()[:24]
    arg = (KIND, digest)
    if arg not in held:
        copy = a.copy()
        copy.flags.writeable = False
        held[arg] = copy
    return build.input_(arg, dt, a.shape)


def _bits(a: np.ndarray) -> np.ndarray:
    """The elements as unsigned integers of the same width: compared exactly (NaN, -0.0)."""
    return a.reshape(-1).view(f"u{a.dtype.itemsize}")


# --- where(lo <= j - i <= hi, v1, v0): eye, identity, tri, tril/triu of ones, band masks ------------


def _diagonal_band(a: np.ndarray):
    if a.ndim != 2:
        return None
    bits = _bits(a).reshape(a.shape)
    v1 = bits[0, 0]
    other = bits != v1
    first_other = np.unravel_index(np.argmax(other), a.shape)
    v0 = bits[first_other]
    if not ((bits == v0) | ~other).all():
        return None  # more than two values
    # the mask as a function of the diagonal d = j - i, read off the first column and the first row
    by_d = np.concatenate([~other[::-1, 0], ~other[0, 1:]])  # d = -(n-1) .. m-1
    inside = np.flatnonzero(by_d) - (a.shape[0] - 1)
    lo, hi = int(inside[0]), int(inside[-1])
    n, m = a.shape
    cond = np.tri(n, m, k=hi, dtype=bool) & ~np.tri(n, m, k=lo - 1, dtype=bool)  # lo <= j - i <= hi
    if not (cond == ~other).all():
        return None
    one, zero = a[0, 0], a[first_other]
    dn = build.binary(Op.SUB, build.iota(a.shape, 1, _INDEX), build.iota(a.shape, 0, _INDEX))
    conds = []
    if lo > 1 - a.shape[0]:
        conds.append(build.binary(Op.LE, build.const(lo, _INDEX, a.shape), dn))
    if hi < a.shape[1] - 1:
        conds.append(build.binary(Op.LE, dn, build.const(hi, _INDEX, a.shape)))
    c = conds[0] if len(conds) == 1 else build.binary(Op.AND, *conds)
    node = build.where(c, build.const(one.item(), a.dtype, a.shape), build.const(zero.item(), a.dtype, a.shape))
    return node, np.where(cond, one, zero)


# --- c0 + sum_d i_d * c_d: arange, linspace, arange(...).reshape(...) -------------------------------
# Integers are computed in their own dtype (wrapping as NumPy's did). Floats are used only where every
# element is an integer times one power of two, k * 2**e with |k| < 2**mantissa bits: the integer k is
# computed exactly in int32/int64 and converted, so no rounding happens anywhere and nothing a compiler
# may do with float arithmetic (CUDA's -fmad, numba's fastmath reassoc/contract) can change a bit.
# float16 is computed in float32 on some devices, so it is never a pattern.


def _steps(a: np.ndarray):
    """Per axis of length > 1 the difference between the first two elements along it."""
    origin = a[(0,) * a.ndim]
    with np.errstate(all="ignore"):
        return origin, [
            (d, a[tuple(1 if k == d else 0 for k in range(a.ndim))] - origin) for d in range(a.ndim) if a.shape[d] > 1
        ]


def _affine(a: np.ndarray):
    if a.dtype.kind not in "iuf" or a.dtype == np.float16:
        return None
    origin, found = _steps(a)
    steps = [(d, c) for d, c in found if c != 0]
    if not steps:  # constant along the first row and column but not everywhere
        return None
    if a.dtype.kind == "f":
        return _scaled_integers(a, origin, steps)
    return _index_sum(a.shape, a.dtype, [(d, c.item()) for d, c in steps], origin.item(), a.dtype)


def _index_sum(shape, dt: np.dtype, steps, origin: int, out: np.dtype):
    """sum_d i_d * c_d + origin computed in dt, then cast to out: the node and NumPy's evaluation of it."""
    node, ref = None, None
    with np.errstate(all="ignore"):
        for d, c in steps:
            i = build.iota(shape, d, dt)
            term = i if c == 1 else build.binary(Op.MUL, i, build.const(c, dt, shape))
            iv = np.arange(shape[d]).astype(dt).reshape([-1 if k == d else 1 for k in range(len(shape))])
            tv = iv if c == 1 else iv * dt.type(c)
            node = term if node is None else build.binary(Op.ADD, node, term)
            ref = tv if ref is None else ref + tv
        assert node is not None and ref is not None  # callers pass at least one step
        if origin != 0:  # adding a zero is simplified away, so the reference skips it too
            node = build.binary(Op.ADD, node, build.const(origin, dt, shape))
            ref = ref + dt.type(origin)
    return build.cast(node, out), np.broadcast_to(ref, shape).astype(out)


def _scaled_integers(a: np.ndarray, origin, steps):
    values = [origin, *(c for _, c in steps)]
    if not all(np.isfinite(v) for v in values):
        return None
    ratios = [float(v).as_integer_ratio() for v in values]  # denominators are powers of two
    den = max(d for _, d in ratios)
    ints = [num * (den // d) for num, d in ratios]
    largest = abs(ints[0]) + sum(abs(m) * (a.shape[d] - 1) for (d, _), m in zip(steps, ints[1:]))
    if largest >= 2 ** (np.finfo(a.dtype).nmant + 1) or den > 2 ** -np.finfo(a.dtype).minexp:
        return None  # not exact in the dtype, or a scale that would be subnormal
    scale = a.dtype.type(1.0 / den)
    it = np.dtype("int32") if largest < 2**31 else np.dtype("int64")
    node, ref = _index_sum(a.shape, it, [(d, m) for (d, _), m in zip(steps, ints[1:])], ints[0], a.dtype)
    if den != 1:
        node = build.binary(Op.MUL, node, build.const(scale.item(), a.dtype, a.shape))
        ref = ref * scale
    return node, ref
