"""Small numerical helpers scientists call every day (issue 48, item 5): np.trace, diagonal, diag, meshgrid,
gradient, interp, polyval, convolve, correlate, cross, kron, isin, vander, ediff1d. Each is written as NumPy
writes it, in terms of the traced NumPy functions and operators (so it fuses with what comes before and after),
with NumPy's dtypes and its order of operations where that decides the rounding (vander's running product,
polyval's Horner steps, interp's slope)."""

from __future__ import annotations

import operator

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.numpy.tensor import Tensor, as_node

_UNROLLED_TAPS = 64  # a correlation with at most this many taps: one shifted slice per tap; more: windows @ taps
_WINDOW_ELEMENTS = 1 << 24  # beyond this many window elements a long correlation is refused


def _array(x):
    return x if isinstance(x, Tensor) else np.asarray(x)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """np.diagonal: the diagonal's elements (a copy; NumPy's is a read-only view) along the last axis."""
    a = _array(a)
    moved = np.moveaxis(a, (axis1, axis2), (-2, -1))
    n, m = moved.shape[-2:]
    offset = operator.index(offset)
    rows = np.arange(max(0, -offset), max(0, min(n, m - offset)))
    return moved[..., rows, rows + offset]


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise UnsupportedError("np.trace(..., out=...) is not supported by tracejit; assign the result instead")
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """np.diag: a 2-D array's k-th diagonal, or a 2-D array with a 1-D array on its k-th diagonal."""
    v = _array(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0]
    size = n + abs(k)
    i, j = np.indices((size, size))
    on = j - i == k
    place = np.clip(i if k >= 0 else j, 0, max(n - 1, 0))
    if n == 0:
        return np.zeros((size, size), v.dtype)
    return np.where(on, v[place], np.zeros((), v.dtype))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    xi = [_array(x).reshape(-1) for x in xi]
    ndim = len(xi)
    shapes = [(1,) * k + (x.shape[0],) + (1,) * (ndim - k - 1) for k, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        shapes[0] = (1, xi[0].shape[0]) + (1,) * (ndim - 2)
        shapes[1] = (xi[1].shape[0], 1) + (1,) * (ndim - 2)
    grids = [x.reshape(s) for x, s in zip(xi, shapes)]
    if not sparse:
        full = np.broadcast_shapes(*(g.shape for g in grids))
        grids = [np.broadcast_to(g, full) + np.zeros((), g.dtype) for g in grids]  # (copies, as copy=True makes)
    return tuple(grids)


def gradient(f, *varargs, axis=None, edge_order=1):
    """np.gradient with uniform spacing (a number per axis, or none: 1): central differences inside, one-sided
    differences of `edge_order` at the ends, as NumPy computes them."""
    f = _array(f)
    axes = tuple(range(f.ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % f.ndim for a in axes)
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes) and all(np.ndim(d) == 0 for d in varargs):
        spacing = list(varargs)
    else:
        raise UnsupportedError(
            "np.gradient with coordinate arrays as spacing is not supported by tracejit; give one number per axis"
        )
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    if f.dtype.kind in "iub":
        f = f.astype(np.float64)
    out = []
    for ax, dx in zip(axes, spacing):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ValueError(
                "Shape of array too small to calculate a numerical gradient, at least (edge_order + 1) elements are "
                "required."
            )

        def part(start, stop, ax=ax):
            index = [slice(None)] * f.ndim
            index[ax] = slice(start, stop)
            return f[tuple(index)]

        inner = (part(2, None) - part(None, -2)) / (2.0 * dx)
        if edge_order == 1:
            first = (part(1, 2) - part(0, 1)) / dx
            last = (part(-1, None) - part(-2, -1)) / dx
        else:
            first = -(1.5 * part(0, 1) - 2.0 * part(1, 2) + 0.5 * part(2, 3)) / dx
            last = (0.5 * part(-3, -2) - 2.0 * part(-2, -1) + 1.5 * part(-1, None)) / dx
        out.append(np.concatenate([first, inner, last], axis=ax).astype(f.dtype, copy=False))
    return out[0] if len(out) == 1 else tuple(out)


def interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp, increasing xp: NumPy's slope times the distance from the point below, plus its value; x at or
    past the ends gives the end values (or left/right)."""
    if period is not None:
        raise UnsupportedError("np.interp(..., period=...) is not supported by tracejit")
    x, xp, fp = (_array(v) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ValueError("object too deep for desired array")
    if xp.shape[0] != fp.shape[0]:
        raise ValueError("fp and xp are not of the same length.")
    if xp.shape[0] == 0:
        raise ValueError("array of sample points is empty")
    # (constants as traced values: xp and fp are read at positions the data decides)
    x, xp, fp = (
        v.astype(np.float64) if isinstance(v, Tensor) else Tensor(as_node(np.asarray(v, np.float64)))
        for v in (x, xp, fp)
    )
    n = xp.shape[0]
    lo = fp[0] if left is None else np.float64(left)
    hi = fp[-1] if right is None else np.float64(right)
    if n == 1:
        return np.where(x < xp[0], lo, np.where(x > xp[0], hi, fp[0]))
    j = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, n - 2)
    x0, x1, y0, y1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
    slope = (y1 - y0) / (x1 - x0)
    value = slope * (x - x0) + y0
    again = slope * (x - x1) + y1  # (NumPy's second try where the first is NaN: an infinite slope)
    value = np.where(np.isnan(value), np.where(np.isnan(again) & (y0 == y1), y0, again), value)
    value = np.where(x == xp[-1], fp[-1], value)
    return np.where(x < xp[0], lo, np.where(x > xp[-1], hi, value))


def polyval(p, x):
    """np.polyval, Horner's rule as NumPy writes it: y = zeros_like(x); y = y * x + p[i] for each coefficient."""
    p, x = _array(p), _array(x)
    y = np.zeros_like(x)
    for k in range(p.shape[0]):
        y = y * x + p[k]
    return y


def correlate(a, v, mode="valid"):
    a, v = _array(a).reshape(-1), _array(v).reshape(-1)
    n, m = a.shape[0], v.shape[0]
    if n == 0 or m == 0:
        raise ValueError("v cannot be empty" if m == 0 else "a cannot be empty")
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    flipped = m > n
    if flipped:  # (NumPy correlates the longer with the shorter, then reverses)
        a, v, n, m = v, a, m, n
    pad = {"valid": (0, 0), "same": (m // 2, m - 1 - m // 2), "full": (m - 1, m - 1)}[mode]
    padded = np.pad(a, pad) if pad != (0, 0) else a
    length = padded.shape[0] - m + 1
    if m <= _UNROLLED_TAPS:
        out = padded[0:length] * v[0]
        for j in range(1, m):
            out = out + padded[j : j + length] * v[j]
    elif length * m <= _WINDOW_ELEMENTS:
        windows = padded[np.arange(length)[:, None] + np.arange(m)[None, :]]
        out = windows @ v
    else:
        raise UnsupportedError(
            f"np.correlate/np.convolve of {n} by {m} elements is not supported by tracejit (more than "
            f"{_WINDOW_ELEMENTS} products of windows); use an FFT-based convolution outside the kernel"
        )
    return out[::-1] if flipped else out


def convolve(a, v, mode="full"):
    a, v = _array(a).reshape(-1), _array(v).reshape(-1)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return correlate(a, v[::-1], mode)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross of 2- and 3-element vectors along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(_array(a), axisa, -1), np.moveaxis(_array(b), axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a0 * b1 - a1 * b0
    a2 = a[..., 2] if a.shape[-1] == 3 else None
    b2 = b[..., 2] if b.shape[-1] == 3 else None
    z = a0 * b1 - a1 * b0
    if a2 is None:
        x, y = a1 * b2, -(a0 * b2)
    elif b2 is None:
        x, y = -(a2 * b1), a2 * b0
    else:
        x, y = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    x, y, z = np.broadcast_arrays(x, y, z)
    return np.moveaxis(np.stack([x, y, z], axis=-1), -1, axisc)


def kron(a, b):
    a, b = _array(a), _array(b)
    nd = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    b = b.reshape((1,) * (nd - b.ndim) + b.shape)
    spread_a = a.reshape(tuple(s for n in a.shape for s in (n, 1)))
    spread_b = b.reshape(tuple(s for n in b.shape for s in (1, n)))
    product = spread_a * spread_b
    return product.reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """np.isin: each element looked up in the sorted test elements (NaN is in nothing, as NumPy's == says)."""
    element, tests = _array(element), _array(test_elements).reshape(-1)
    if tests.shape[0] == 0:
        found = np.zeros(element.shape, bool)
    else:
        ordered = np.sort(tests)
        if isinstance(ordered, np.ndarray):  # (test elements known while tracing: a constant, read by index)
            ordered = Tensor(as_node(ordered))
        at = np.clip(np.searchsorted(ordered, element), 0, tests.shape[0] - 1)
        found = ordered[at] == element
    return ~found if invert else found


def vander(x, N=None, increasing=False):
    """np.vander: powers by a running product, as NumPy makes them (x**k rounds differently)."""
    x = _array(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = x.shape[0] if N is None else operator.index(N)
    dtype = np.promote_types(x.dtype, np.int64)
    if n == 0:
        return np.zeros((x.shape[0], 0), dtype)
    repeated = np.broadcast_to(x[:, None], (x.shape[0], n - 1)).astype(dtype)
    columns = np.concatenate([np.ones((x.shape[0], 1), dtype), repeated], axis=1)
    powers = np.multiply.accumulate(columns, axis=1)
    return powers if increasing else powers[:, ::-1]


def ediff1d(ary, to_end=None, to_begin=None):
    ary = _array(ary).reshape(-1)
    parts = [] if to_begin is None else [np.asarray(to_begin, ary.dtype).reshape(-1)]
    parts.append(ary[1:] - ary[:-1])
    if to_end is not None:
        parts.append(np.asarray(to_end, ary.dtype).reshape(-1))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


NUMPY_FUNCTIONS = {
    np.diagonal: diagonal,
    np.trace: trace,
    np.diag: diag,
    np.meshgrid: meshgrid,
    np.gradient: gradient,
    np.interp: interp,
    np.polyval: polyval,
    np.correlate: correlate,
    np.convolve: convolve,
    np.cross: cross,
    np.kron: kron,
    np.isin: isin,
    np.vander: vander,
    np.ediff1d: ediff1d,
}
