"""Reductions over Dask blocks: what a block contributes (computed in the stage kernel), the partial it is
packed into, and how partials combine into NumPy's result: sums, products, extremes as themselves, var and
std from (count, mean, M2) by Chan's formula, argmax and argmin from (value, index) with global indices."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tracejit.ir import build
from tracejit.numpy import reductions as R
from tracejit.dask.plan import Unit
from tracejit.numpy.tensor import Tensor

_REDUCE: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
MOMENTS = np.dtype([("count", np.int64), ("mean", np.float64), ("m2", np.float64)])


def block_values(unit: Unit | None, block) -> list[Tensor]:
    """What the stage kernel returns for one root, given its node at the block's sizes: the value itself for
    an output, the block's partial (one or two arrays) for a unit."""
    if unit is None:
        return [Tensor(block)]
    if unit.kind in _REDUCE:
        return [Tensor(build.reduce(block, unit.kind, unit.axes))]
    x, stat = Tensor(block), unit.statistic
    if unit.kind == "moments":
        acc = unit.node.dtype  # the dtype NumPy's var is computed in (float32 for float16)
        mean = R.mean(x, axis=unit.axes, dtype=acc, keepdims=True)
        deviation = x.astype(acc) - mean
        return [mean, R.sum(deviation * deviation, axis=unit.axes, keepdims=True)]
    assert stat is not None  # an arg unit comes from a recorded np.argmax / np.argmin
    axis = None if stat.axes is None else stat.axes[0]
    extreme, position = (R.max, R.argmax) if stat.kind == "argmax" else (R.min, R.argmin)
    return [extreme(x, axis=unit.axes, keepdims=True), position(x, axis=axis, keepdims=True)]


def partial_dtype(unit: Unit) -> np.dtype:
    if unit.kind in _REDUCE:
        return unit.node.dtype
    if unit.kind == "moments":
        return MOMENTS
    return np.dtype([("value", unit.operand.dtype), ("index", np.int64)])


def pack(unit: Unit, values, block_shape: tuple[int, ...], offsets: tuple[int, ...]) -> np.ndarray:
    """The partial of one block from the kernel's arrays (an iterator: one or two are taken). block_shape is
    the operand's shape in this block, offsets where the block starts in the whole operand."""
    first = next(values)
    if unit.kind in _REDUCE:
        return first
    out = np.empty(first.shape, partial_dtype(unit))
    if unit.kind == "moments":
        out["count"] = math.prod(block_shape[d] for d in unit.axes)
        out["mean"], out["m2"] = first, next(values)
        return out
    out["value"], local = first, next(values)
    assert unit.statistic is not None  # an arg unit comes from a recorded np.argmax / np.argmin
    if unit.statistic.axes is not None:
        out["index"] = local + offsets[unit.axes[0]]
    else:  # a flat index into the block, made a flat index into the whole array
        where = np.unravel_index(local, block_shape)
        out["index"] = np.ravel_multi_index(tuple(w + o for w, o in zip(where, offsets)), unit.operand.shape)
    return out


def identity(x, axis=None, keepdims=True, **_):
    """The partials are made per block by the stage kernel already (da.reduction's `chunk` step)."""
    return x


def combine(x: np.ndarray, axis, keepdims: bool, *, kind: str, **_) -> np.ndarray:
    """Partials along `axis` joined into one partial. kind: sum, prod, max, min, var, std, argmax, argmin."""
    if kind in _REDUCE:
        return _REDUCE[kind](x, axis=axis, keepdims=keepdims)
    if kind in ("var", "std"):
        n, mean, m2 = x["count"], x["mean"], x["m2"]
        total = n.sum(axis=axis, keepdims=True)
        seen = n > 0  # an empty block's mean is NaN (0 / 0): it must count for nothing
        with np.errstate(invalid="ignore", divide="ignore"):
            grand = np.where(seen, n * mean, 0).sum(axis=axis, keepdims=True) / total
            spread = np.where(seen, m2 + n * (mean - grand) ** 2, 0).sum(axis=axis, keepdims=True)
        out = np.empty(total.shape, MOMENTS)
        out["count"], out["mean"], out["m2"] = total, grand, spread
    else:
        value, index = x["value"], x["index"]
        best = (np.max if kind == "argmax" else np.min)(value, axis=axis, keepdims=True)
        hit = value == best
        if value.dtype.kind == "f":  # NaN wins, the first one (by position in the whole array) as in NumPy
            hit |= np.isnan(value) & np.isnan(best)
        out = np.empty(best.shape, x.dtype)
        out["value"] = best
        out["index"] = np.where(hit, index, np.iinfo(np.int64).max).min(axis=axis, keepdims=True)
    return out if keepdims else out.reshape([s for d, s in enumerate(out.shape) if d not in axis])


def aggregate(x: np.ndarray, axis, keepdims: bool, *, kind: str, ddof: float = 0, dtype=None, **_) -> np.ndarray:
    """The last combine, then the statistic itself (var, std, the index) in `dtype`, the one the kernel
    computes it in."""
    out = combine(x, axis, keepdims, kind=kind)
    if kind in _REDUCE:
        return out
    if kind in ("var", "std"):
        dof = np.maximum(out["count"] - ddof, 0)  # NumPy's var divides by max(n - ddof, 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = out["m2"] / dof
        return (np.sqrt(var) if kind == "std" else var).astype(dtype)
    return out["index"].astype(dtype)


def kind_of(unit: Unit) -> str:
    """The name combine and aggregate know the unit's reduction by."""
    return unit.statistic.kind if unit.statistic is not None else unit.kind
