"""np.pad on traced tensors. Constant padding is one masked load; edge padding joins the edge slices to
the array; reflect and symmetric join the mirrored ends to it where each side is within one reflection; wrap,
and wider reflections, read a periodic view of the array (or of it joined to its mirror image), so a padded axis
is a modulo in the index. Axes are padded one after another, as NumPy does."""

from __future__ import annotations

import numpy as np

from tracejit.errors import ScalarOverflowError, ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL
from tracejit.ir.graph import Node
from tracejit.numpy import functions as F
from tracejit.numpy.joining import as_array, join, periodic, slice_axis
from tracejit.numpy.tensor import ArrayLike, Tensor, python_value

__all__ = ["pad"]

# NumPy's modes and the keyword arguments each takes
_MODES = {
    "constant": {"constant_values"},
    "edge": set(),
    "wrap": set(),
    "empty": set(),
    "reflect": {"reflect_type"},
    "symmetric": {"reflect_type"},
    "linear_ramp": {"end_values"},
    "maximum": {"stat_length"},
    "mean": {"stat_length"},
    "median": {"stat_length"},
    "minimum": {"stat_length"},
}
_SUPPORTED = ("constant", "edge", "reflect", "symmetric", "wrap", "empty")


def pad(array: ArrayLike, pad_width: ArrayLike, mode: str = "constant", **kwargs: object) -> Tensor:
    """As np.pad with the modes constant (constant_values: a scalar, a pair, or pairs per axis), edge,
    reflect and symmetric (reflect_type 'even', or 'odd' up to one reflection), wrap, and empty (zeros)."""
    node = as_array(array)
    _check_mode(mode, kwargs)
    widths = _pairs(_pad_width(pad_width, len(node.shape)), len(node.shape), as_index=True)
    if mode in ("constant", "empty"):
        values = kwargs.get("constant_values", 0) if mode == "constant" else 0
        return Tensor(_pad_constant(node, widths, _pairs(values, len(node.shape))))
    for axis, (before, after) in enumerate(widths):
        if node.shape[axis] == 0 and (before or after):
            raise ShapeError(f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
    if node.size == 0:
        return Tensor(build.const(0, node.dtype, tuple(s + a + b for s, (a, b) in zip(node.shape, widths))))
    odd = kwargs.get("reflect_type", "even") == "odd"
    for axis, (before, after) in enumerate(widths):
        if before or after:
            node = _pad_axis(node, axis, before, after, mode, odd)
    return Tensor(node)


def _check_mode(mode, kwargs) -> None:
    if callable(mode):
        raise UnsupportedError(
            "np.pad with a function as mode calls Python on every vector; tracejit supports "
            f"the modes {', '.join(_SUPPORTED)}"
        )
    if mode not in _MODES:
        raise ShapeError(f"mode '{mode}' is not supported")
    unexpected = set(kwargs) - _MODES[mode]
    if unexpected:
        raise ShapeError(f"unsupported keyword arguments for mode '{mode}': {unexpected}")
    if mode not in _SUPPORTED:
        raise UnsupportedError(
            f"np.pad(mode={mode!r}) is not supported by tracejit; supported modes: {', '.join(_SUPPORTED)}"
        )
    if _holds_tensor(kwargs.get("constant_values", 0)):
        raise UnsupportedError(
            "np.pad's constant_values must be plain values known while tracing; to pad with a "
            "traced value, pad with 0 and select it with np.where on a mask padded the same way"
        )


def _holds_tensor(value) -> bool:
    return isinstance(value, Tensor) or isinstance(value, (list, tuple)) and any(map(_holds_tensor, value))


def _pad_width(pad_width, ndim: int) -> np.ndarray:
    """pad_width as NumPy reads it: an int, pairs, or a dict {axis: width or (before, after)}."""
    pad_width = python_value(pad_width, "np.pad's widths")
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * ndim
        for axis, width in pad_width.items():
            seq[axis] = (width, width) if np.ndim(width) == 0 else tuple(width)
        pad_width = seq
    pad_width = np.asarray(pad_width)
    if pad_width.dtype.kind != "i":
        raise UnsupportedError("`pad_width` must be of integral type.")
    return pad_width


def _pairs(x, ndim: int, as_index: bool = False) -> list[tuple]:
    """NumPy's broadcast of a pad argument to (before, after) per axis."""
    x = np.array(x)
    if as_index:
        x = np.round(x).astype(np.intp, copy=False)
        if x.size and x.min() < 0:
            raise ShapeError("index can't contain negative values")
    if x.ndim < 3 and x.size == 1:
        flat = x.ravel()
        return [(flat[0].item(), flat[0].item())] * ndim
    if x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        flat = x.ravel()
        return [(flat[0].item(), flat[1].item())] * ndim
    try:
        return [tuple(p) for p in np.broadcast_to(x, (ndim, 2)).tolist()]
    except ValueError:
        raise ShapeError(
            f"np.pad: a pad argument of shape {x.shape} cannot be broadcast to ({ndim}, 2) "
            "(one (before, after) pair per axis)"
        ) from None


def _fill(value, dtype: np.dtype):
    """value stored into an array of dtype, as NumPy's np.pad stores it (1.7 into ints is 1)."""
    out = np.empty((), dtype)
    try:
        out[...] = value
    except OverflowError as e:
        raise ScalarOverflowError(f"np.pad constant_values: {e}") from None
    except ValueError as e:
        raise ShapeError(f"np.pad constant_values: {e}") from None
    return out.item()


def _pad_constant(node: Node, widths, values) -> Node:
    """One pad when every side takes the same value; else axis by axis and side by side, later axes
    covering the corners, as in NumPy."""
    fills = [(_fill(b, node.dtype), _fill(a, node.dtype)) for b, a in values]
    if len({f for pair in fills for f in pair}) == 1:
        return build.pad(node, tuple(widths), fills[0][0])
    for axis, ((before, after), (fill_before, fill_after)) in enumerate(zip(widths, fills)):
        for side, fill in (((before, 0), fill_before), ((0, after), fill_after)):
            pads = [(0, 0)] * len(node.shape)
            pads[axis] = side
            node = build.pad(node, tuple(pads), fill)
    return node


def _pad_axis(x: Node, axis: int, before: int, after: int, mode: str, odd: bool) -> Node:
    n = x.shape[axis]
    if mode == "edge" or n == 1 and mode in ("reflect", "symmetric"):
        return join([_edge(x, axis, 0, before), x, _edge(x, axis, n - 1, after)], axis)
    if mode == "wrap":
        return periodic(x, axis, -before, before + n + after)
    if odd:
        return _pad_odd(x, axis, before, after, mode == "symmetric")
    skip = 1 if mode == "reflect" else 0  # (reflecting leaves out the end points; symmetric repeats them)
    if before <= n - skip and after <= n - skip:
        # within one reflection: the mirrored ends joined to x, each element read by a comparison of its place,
        # where the periodic view takes a division by the period (2n - 2 when reflecting) for every element
        left = slice_axis(x, axis, before - 1 + skip, -1, before)
        right = slice_axis(x, axis, n - 1 - skip, -1, after)
        return join([piece for piece, width in ((left, before), (x, n), (right, after)) if width], axis)
    # one period of the mirrored axis: x, then x backwards (without its end points when reflecting)
    backwards = slice_axis(x, axis, n - 1, -1, n) if mode == "symmetric" else slice_axis(x, axis, n - 2, -1, n - 2)
    return periodic(join([x, backwards], axis), axis, -before, before + n + after)


def _edge(x: Node, axis: int, index: int, width: int) -> Node:
    """x's slice at index along axis, repeated width times."""
    edge = slice_axis(x, axis, index, 1, 1)
    return build.expand(edge, edge.shape[:axis] + (width,) + edge.shape[axis + 1 :])


def _pad_odd(x: Node, axis: int, before: int, after: int, symmetric: bool) -> Node:
    """reflect_type='odd': the mirror image turned about the edge value (2 * edge - mirrored), computed as
    NumPy computes it. Up to one reflection on each side; NumPy reflects wider pads again about the new
    edge, which pads applied one after another reproduce."""
    n = x.shape[axis]
    reach = n if symmetric else n - 1
    if x.dtype == BOOL:
        raise UnsupportedError(
            "np.pad(..., reflect_type='odd') of a bool array is not supported (NumPy computes "
            "2 * edge - x in int64 and casts it back to bool); cast to an integer dtype first"
        )
    if before > reach or after > reach:
        raise UnsupportedError(
            f"np.pad(..., reflect_type='odd') wider than one reflection ({reach} for an axis of "
            f"{n}) is not supported by tracejit; pad in steps (np.pad of np.pad) instead"
        )
    skip = 0 if symmetric else 1
    left = slice_axis(x, axis, skip + before - 1, -1, before)
    right = slice_axis(x, axis, n - 1 - skip, -1, after)
    pieces = [_turned(x, axis, 0, left), x, _turned(x, axis, n - 1, right)]
    return join([p for p in pieces if p.shape[axis]], axis)


def _turned(x: Node, axis: int, index: int, mirrored: Node) -> Node:
    edge = _edge(x, axis, index, mirrored.shape[axis])
    return F.astype(F.subtract(F.multiply(2, Tensor(edge)), Tensor(mirrored)), x.dtype)._node


NUMPY_FUNCTIONS = {np.pad: pad}
