"""NumPy arrays met while tracing (np.arange(n), np.tri(n), a captured lookup table) as graph IR: a
broadcast constant, an index pattern whose NumPy evaluation reproduces the array bit for bit, or a table
embedded in the kernel (at most ir.table.MAX_ELEMENTS elements)."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..ir import build
from ..ir.dtypes import check
from ..ir.graph import Node, Op
from ..ir.table import MAX_ELEMENTS

_INDEX = np.dtype("int32")   # index patterns count in int32: every device has it, arrays here are small


def array_node(a: np.ndarray) -> Node:
    """The graph node for a NumPy array used as a value of the traced computation."""
    dt = check(a.dtype, f"a NumPy array of shape {a.shape} used in the kernel", internal=False)
    a = np.ascontiguousarray(a, dt)
    if a.size == 0:
        return build.const(0, dt, a.shape)
    bits = _bits(a)
    if (bits == bits[0]).all():
        return build.const(a.flat[0].item(), dt, a.shape)
    for pattern in (_diagonal_band, _affine, _affine_last_replaced):
        found = pattern(a)
        if found is not None and _bits(np.ascontiguousarray(found[1], dt)).tobytes() == bits.tobytes():
            return found[0]
    if a.size <= MAX_ELEMENTS:
        return build.table(a)
    raise UnsupportedError(
        f"a NumPy array of shape {a.shape} ({a.size} elements) is used inside the kernel; constants are "
        f"embedded in the kernel only up to {MAX_ELEMENTS} elements (or when they are all equal, an arange or "
        "a triangle/diagonal mask). Pass it to the kernel as an argument instead")


def _bits(a: np.ndarray) -> np.ndarray:
    """The elements as unsigned integers of the same width: compared exactly (NaN, -0.0)."""
    return a.reshape(-1).view(f"u{a.dtype.itemsize}")


def _consts(value, dt, shape) -> Node:
    return build.const(value, dt, shape)


# --- where(lo <= j - i <= hi, v1, v0): eye, identity, tri, tril/triu of ones, band masks ------------

def _diagonal_band(a: np.ndarray):
    if a.ndim != 2:
        return None
    bits = _bits(a).reshape(a.shape)
    values = np.unique(bits)
    if len(values) != 2:
        return None
    d = np.arange(a.shape[1])[None, :] - np.arange(a.shape[0])[:, None]
    for v1 in values:
        inside = d[bits == v1]
        lo, hi = int(inside.min()), int(inside.max())
        cond = (d >= lo) & (d <= hi)
        if (cond == (bits == v1)).all():
            break
    else:
        return None
    one, zero = a[bits == v1][0], a[bits != v1][0]
    dn = build.binary(Op.SUB, build.iota(a.shape, 1, _INDEX), build.iota(a.shape, 0, _INDEX))
    conds = []
    if lo > int(d.min()):
        conds.append(build.binary(Op.LE, _consts(lo, _INDEX, a.shape), dn))
    if hi < int(d.max()):
        conds.append(build.binary(Op.LE, dn, _consts(hi, _INDEX, a.shape)))
    c = conds[0] if len(conds) == 1 else build.binary(Op.AND, *conds)
    node = build.where(c, _consts(one.item(), a.dtype, a.shape), _consts(zero.item(), a.dtype, a.shape))
    return node, np.where(cond, one, zero)


# --- c0 + sum_d i_d * c_d: arange, linspace, arange(...).reshape(...) -------------------------------
# Float patterns are used only where every product i * c is exact: then a compiler that fuses the
# multiply-add (CUDA's -fmad, numba's fastmath 'contract') rounds exactly as NumPy did, once. float16 is
# computed in float32 on some devices, so it is never a pattern.

def _steps(a: np.ndarray):
    """Per axis of length > 1 the difference between the first two elements along it."""
    origin = a[(0,) * a.ndim]
    with np.errstate(all="ignore"):
        return origin, [(d, a[tuple(1 if k == d else 0 for k in range(a.ndim))] - origin)
                        for d in range(a.ndim) if a.shape[d] > 1]


def _affine(a: np.ndarray, steps=None):
    if a.dtype.kind not in "iuf" or a.dtype == np.float16:
        return None
    origin, found = _steps(a)
    steps = steps or [(d, c) for d, c in found if c != 0]
    if not steps:   # constant along the first row and column but not everywhere
        return None
    if a.dtype.kind == "f" and (len(steps) != 1 or not _exact_products(a.dtype, steps[0][1], a.shape[steps[0][0]])):
        return None
    node, ref = None, None
    with np.errstate(all="ignore"):
        for d, c in steps:
            i = build.iota(a.shape, d, a.dtype)
            term = i if c == 1 else build.binary(Op.MUL, i, _consts(c.item(), a.dtype, a.shape))
            iv = np.arange(a.shape[d]).astype(a.dtype).reshape([-1 if k == d else 1 for k in range(a.ndim)])
            tv = iv if c == 1 else iv * c
            node = term if node is None else build.binary(Op.ADD, node, term)
            ref = tv if ref is None else ref + tv
        if origin != 0:   # adding a zero is simplified away, so the reference skips it too
            node = build.binary(Op.ADD, node, _consts(origin.item(), a.dtype, a.shape))
            ref = ref + origin
    return node, np.broadcast_to(ref, a.shape).astype(a.dtype)


def _exact_products(dt: np.dtype, step, n: int) -> bool:
    if not np.isfinite(step):
        return False
    num, _ = float(step).as_integer_ratio()
    num = abs(num)
    while num and num % 2 == 0:
        num //= 2
    return (n - 1) * num < 2 ** (np.finfo(dt).nmant + 1)


def _affine_last_replaced(a: np.ndarray):
    """linspace(..., endpoint=True): NumPy computes i * step + start and then sets the last element to
    stop. The step is not stored anywhere, so a few candidates are tried (each verified exactly)."""
    if a.ndim != 1 or a.dtype.kind != "f" or a.dtype == np.float16 or len(a) < 3:
        return None
    n = len(a)
    with np.errstate(all="ignore"):
        guesses = {(a[-1] - a[0]) / (n - 1), (a[-2] - a[0]) / (n - 2), a[1] - a[0]}
    for step in guesses:
        for s in (step, np.nextafter(step, np.inf), np.nextafter(step, -np.inf)):
            found = _affine(a, [(0, a.dtype.type(s))])
            if found is None:
                continue
            node, ref = found
            ref = ref.copy()
            ref[-1] = a[-1]
            last = build.binary(Op.EQ, build.iota(a.shape, 0, _INDEX), _consts(n - 1, _INDEX, a.shape))
            node = build.where(last, _consts(a[-1].item(), a.dtype, a.shape), node)
            if _bits(ref).tobytes() == _bits(a).tobytes():
                return node, ref
    return None
