"""np.histogram and np.digitize with a static number of bins, with NumPy's rules: bins half-open but the
last one closed, values outside the range ignored; edges may be traced (bins=int without range=). Few
values times bins: each bin counts the values between its edges (every value compared with every edge,
reduced, fused). Beyond: each value's bin is computed (NumPy's arithmetic for equal bins, a search of the
edges otherwise) and the counts are a scatter-add (scatter.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tracejit.ir import build, faulting
from tracejit.ir.graph import Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy import functions as F
from tracejit.numpy import reductions
from tracejit.numpy.creation import zeros
from tracejit.numpy.indexing import searchsorted
from tracejit.numpy.scatter import DENSE_MAX
from tracejit.numpy.tensor import ArrayLike, Tensor, as_node, python_value

__all__ = ["digitize", "histogram"]


def histogram(
    a: ArrayLike,
    bins: int | Sequence[float] | np.ndarray = 10,
    range: tuple[float, float] | None = None,
    density: bool | None = None,
    weights: ArrayLike | None = None,
) -> tuple[Tensor, Tensor]:
    """np.histogram: (hist, bin_edges). bins is an int or a sequence of edges (not a traced array, not a
    string); range=(lo, hi) static, else the data's min and max as NumPy does (the edges are then traced)."""
    shape = as_node(a).shape
    a = Tensor(build.reshape(as_node(a), (as_node(a).size,)))
    if isinstance(bins, str):  # a number of bins estimated from the data: read back when the kernel runs
        if weights is not None:
            raise TypeError("Automated estimation of the number of bins is not supported for weighted data")
        edges = _estimated_edges(a, bins, range)
    else:
        edges = _edges(a, bins, range)
    w = None
    if weights is not None:
        given = as_node(weights)
        if given.shape != shape:
            raise ValueError("weights should have the same shape as a.")
        w = F.reshape(Tensor(given), (a.size,))
    n = edges.shape[0] - 1
    if (a.size + 1) * n <= DENSE_MAX:
        hist = _dense_counts(a, edges, w)
    else:
        hist = _scattered_counts(a, edges, w, uniform=np.ndim(bins) == 0)
    if density:
        widths = F.astype(edges[1:] - edges[:-1], np.float64)
        hist = hist / widths / F.sum(hist)
    return hist, edges


def _dense_counts(a: Tensor, edges: Tensor, w: Tensor | None) -> Tensor:
    """Every value compared with every bin's edges, the matches summed: fuses into one kernel."""
    values = F.reshape(a, (a.size, 1))
    lo, hi = edges[None, :-1], edges[None, 1:]
    last = F.reshape(F.equal(np.arange(edges.shape[0] - 1), edges.shape[0] - 2), (1, -1))
    inside = F.less_equal(lo, values) & (F.less(values, hi) | (last & F.equal(values, hi)))
    if w is None:
        return F.sum(F.astype(inside, np.int64), axis=0)
    return F.sum(F.where(inside, F.reshape(w, (a.size, 1)), np.zeros((), w.dtype)), axis=0, dtype=w.dtype)


def _scattered_counts(a: Tensor, edges: Tensor, w: Tensor | None, uniform: bool) -> Tensor:
    """Each value's bin, then a scatter-add of ones (or the weights) into the bins; values outside the
    edges (NaN too) go to one more bin, dropped."""
    n = edges.shape[0] - 1
    common = np.result_type(a.dtype, edges.dtype)  # data and edges compared as NumPy compares them
    values, edges = F.astype(a, common), F.astype(edges, common)
    keep = F.less_equal(edges[0], values) & F.less_equal(values, edges[n])
    if uniform:
        index = _uniform_bins(values, edges, keep)
    else:  # the last edge closes the last bin
        index = F.minimum(F.subtract(searchsorted(edges, values, side="right"), 1), n - 1)
    index = F.where(keep, index, n)
    # counted in int32 (exact: at most a.size), returned as NumPy's int64: 32-bit atomics on every SIMT target
    counts = zeros(n + 1, (np.int32 if a.size < 2**31 else np.int64) if w is None else w.dtype)
    np.add.at(counts, index, 1 if w is None else w)
    return counts[:n] if w is not None else F.astype(counts[:n], np.int64)


def _uniform_bins(values: Tensor, edges: Tensor, keep: Tensor) -> Tensor:
    """NumPy's bin of each value for equal bins (np.histogram's fast path, the same arithmetic): scaled into
    [0, n], then corrected by comparing with the edges it falls between."""
    n = edges.shape[0] - 1
    lo, hi = edges[0], edges[n]
    scaled = F.where(keep, F.multiply(F.true_divide(F.subtract(values, lo), F.subtract(hi, lo)), n), 0)
    index = F.astype(scaled, np.int64)
    index = F.where(F.equal(index, n), index - 1, index)
    index = F.where(F.less(values, edges[index]), index - 1, index)
    return F.where(F.less_equal(edges[index + 1], values) & F.not_equal(index, n - 1), index + 1, index)


def _edges(a: Tensor, bins, range) -> Tensor:
    bins = python_value(bins, "np.histogram's bins")
    if isinstance(bins, Tensor):  # edges computed in the kernel
        if bins.ndim != 1:
            raise ValueError("`bins` must be 1d, when an array")
        if bins.shape[0] < 2:
            return bins
        ok = as_node((bins[:-1] <= bins[1:]).all())
        check = faulting.check(ok, _NOT_INCREASING)
        return bins + Tensor(build.cast(check, bins.dtype))
    if np.ndim(bins) == 1:
        edges = np.asarray(bins)
        if np.any(edges[:-1] > edges[1:]):
            raise ValueError("`bins` must increase monotonically, when an array")
        return Tensor(as_node(edges))
    if np.ndim(bins) != 0 or int(bins) < 1:
        raise ValueError("`bins` must be positive, when an integer")
    n = int(bins)
    if range is not None and any(isinstance(python_value(v, "np.histogram's range"), Tensor) for v in range):
        lo, hi = range
        return _range_edges(a, lo, hi, n)
    if range is not None:
        lo, hi = range
        if lo > hi:
            raise ValueError("max must be larger than min in range parameter.")
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"supplied range of [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        dtype = np.result_type(lo, hi, np.empty(0, a.dtype))
        dtype = np.dtype(np.float64) if dtype.kind in "iub" else dtype
        return Tensor(as_node(np.linspace(lo, hi, n + 1, endpoint=True, dtype=dtype)))
    if a.size == 0:
        return Tensor(as_node(np.linspace(0, 1, n + 1)))
    return _traced_edges(a, n)


def _traced_edges(a: Tensor, n: int) -> Tensor:
    """NumPy's default range (a.min(), a.max()), widened by 0.5 each side when they are equal, then
    np.linspace(lo, hi, n + 1) between them (creation.py's, of bounds read from arrays)."""
    from tracejit.numpy.creation import linspace

    dtype = np.float64 if a.dtype.kind in "iub" else a.dtype
    lo, hi = F.astype(F.min(a), dtype), F.astype(F.max(a), dtype)
    same = F.equal(lo, hi)
    lo, hi = F.where(same, lo - 0.5, lo), F.where(same, hi + 0.5, hi)
    return linspace(lo, hi, n + 1)  # type: ignore[return-value]


_NOT_INCREASING = Fault("ValueError", "`bins` must increase monotonically, when an array")
_BAD_RANGE = Fault("ValueError", "max must be larger than min in range parameter.")
_NOT_FINITE = Fault("ValueError", "supplied range is not finite")


def _range_edges(a: Tensor, lo, hi, n: int) -> Tensor:
    """np.histogram's edges for a range read from arrays: NumPy's checks (raised when the kernel runs), equal
    bounds widened by 0.5, then np.linspace(lo, hi, n + 1)."""
    from tracejit.numpy.creation import linspace

    lo, hi = (Tensor(as_node(v)) for v in (lo, hi))
    dtype = np.result_type(np.empty(0, lo.dtype), np.empty(0, hi.dtype), np.empty(0, a.dtype))
    dtype = np.dtype(np.float64) if dtype.kind in "iub" else dtype
    lo, hi = F.astype(lo, dtype), F.astype(hi, dtype)
    ordered = faulting.check(as_node(F.less_equal(lo, hi)), _BAD_RANGE)
    finite = faulting.check(as_node(F.isfinite(lo) & F.isfinite(hi)), _NOT_FINITE)
    lo = lo + Tensor(build.cast(build.binary(Op.ADD, ordered, finite), dtype))
    same = F.equal(lo, hi)
    lo, hi = F.where(same, lo - 0.5, lo), F.where(same, hi + 0.5, hi)
    return linspace(lo, hi, n + 1)  # type: ignore[return-value]


def _estimated_edges(a: Tensor, name: str, range) -> Tensor:
    """np.histogram(bins="auto" or another of NumPy's estimators): the bin width NumPy's estimator gives, the number
    of bins from it (a size that depends on the data: numpy/data_sizes.py reads it back when the kernel runs), the
    edges over the data's range (or the range given, the data outside it left out of the estimate, as NumPy)."""
    from tracejit.numpy import data_sizes

    if name not in _ESTIMATORS:
        raise ValueError(f"{name!r} is not a valid estimator for `bins`")
    if a.size == 0:
        return _edges(a, 1, range)
    outer = _edges(a, 1, range)  # (NumPy's outer edges: the range given, else the data's, widened where equal)
    first, last = outer[0], outer[1]
    if range is not None:
        inside = (a >= first) & (a <= last)
        a = Tensor(data_sizes.select(as_node(a), as_node(inside)))
        if a.size == 0:
            return outer
    width = _ESTIMATORS[name](F.astype(a, np.float64), a.size)
    if a.dtype.kind in "iu":
        width = F.where(width < 1, 1.0, width)
    span = F.astype(last, np.float64) - F.astype(first, np.float64)
    bins = F.where(width > 0, F.ceil(span / F.where(width > 0, width, 1.0)), 1.0)
    count = data_sizes.number(as_node(F.astype(bins, np.int64)), f"np.histogram(bins={name!r})")
    return _range_edges(a, first, last, count)


def _ptp(x: Tensor) -> Tensor:
    return F.max(x) - F.min(x)


def _sturges(x: Tensor, n: int) -> Tensor:
    return _ptp(x) / (np.log2(n) + 1.0)


def _fd(x: Tensor, n: int) -> Tensor:
    from tracejit.numpy.sorting import percentile

    q75, q25 = percentile(x, 75), percentile(x, 25)
    return 2.0 * (q75 - q25) * n ** (-1.0 / 3.0)


def _doane(x: Tensor, n: int) -> Tensor:
    if n <= 2:
        return Tensor(build.const(0.0, np.float64, ()))
    sg1 = np.sqrt(6.0 * (n - 2) / ((n + 1.0) * (n + 3)))
    sigma = reductions.std(x)
    g1 = reductions.mean(((x - reductions.mean(x)) / F.where(sigma > 0, sigma, 1.0)) ** 3)
    width = _ptp(x) / (1.0 + np.log2(n) + F.log2(1.0 + F.abs(g1) / sg1))
    return F.where(sigma > 0, width, 0.0)


def _auto(x: Tensor, n: int) -> Tensor:
    fd, sturges = _fd(x, n), _sturges(x, n)
    return F.where(fd != 0, F.minimum(fd, sturges), sturges)


# NumPy's bin-width estimators (numpy.lib._histograms_impl), of the data as float64 and its size
_ESTIMATORS = {
    "auto": _auto,
    "fd": _fd,
    "doane": _doane,
    "scott": lambda x, n: (24.0 * np.pi**0.5 / n) ** (1.0 / 3.0) * reductions.std(x),
    "rice": lambda x, n: _ptp(x) / (2.0 * n ** (1.0 / 3)),
    "sturges": _sturges,
    "sqrt": lambda x, n: _ptp(x) / np.sqrt(n),
}


def digitize(x: ArrayLike, bins: Sequence[float] | np.ndarray | Tensor, right: bool = False) -> Tensor:
    """np.digitize: the index of the bin each value falls in, for monotonic bins. Bins read from arrays: both
    directions computed and the one the bins have selected (increasing where they are both, as NumPy decides),
    and bins that are neither raise NumPy's ValueError when the kernel runs."""
    if isinstance(bins, Tensor):
        return _digitize_traced(x, bins, right)
    bins = np.asarray(bins)
    if bins.ndim != 1:
        raise ValueError(
            "object too deep for desired array" if bins.ndim else "object of too small depth for desired array"
        )
    increasing = bool(np.all(bins[1:] >= bins[:-1]))
    if not increasing and not np.all(bins[1:] <= bins[:-1]):
        raise ValueError("bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    if increasing:
        return searchsorted(bins, x, side=side)
    return bins.size - searchsorted(bins[::-1].copy(), x, side=side)


_NOT_MONOTONIC = Fault("ValueError", "bins must be monotonically increasing or decreasing")


def _digitize_traced(x: ArrayLike, bins: Tensor, right: bool) -> Tensor:
    if bins.ndim != 1:
        raise ValueError(
            "object too deep for desired array" if bins.ndim else "object of too small depth for desired array"
        )
    side = "left" if right else "right"
    n = bins.shape[0]
    up = searchsorted(bins, x, side=side)
    if n < 2:
        return up  # (NumPy: increasing)
    increasing = as_node((bins[1:] >= bins[:-1]).all())
    decreasing = as_node((bins[1:] <= bins[:-1]).all())
    down = n - searchsorted(bins[::-1], x, side=side)
    check = faulting.check(build.binary(Op.OR, increasing, decreasing), _NOT_MONOTONIC)
    return F.where(Tensor(increasing), up, down) + Tensor(build.cast(check, np.dtype(np.int64)))


NUMPY_FUNCTIONS = {np.histogram: histogram, np.digitize: digitize}
