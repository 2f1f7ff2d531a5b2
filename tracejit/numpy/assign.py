"""Assignment into traced arrays with NumPy's semantics: `t[key] = v`, `t[key] += v` (and every augmented
operator), boolean masks, a ufunc's `out=`, np.copyto, ndarray.fill.

The graph IR is functional, so a write is a new value of the written array: where(region, values, old),
the values brought into the array's index space with movement ops only (views.scatter). The Tensor that
owns the memory (the root of the written view) is rebound to it; views of it see the change when read.
"""

from __future__ import annotations

import numpy as np

from tracejit.errors import (
    AssignmentError,
    CastingError,
    ScalarOverflowError,
    ShapeError,
    UnsupportedError,
)
from tracejit.ir import build
from tracejit.ir.dtypes import BOOL
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import Node, Op
from tracejit.numpy import bounded_slices, indexing, scatter, views
from tracejit.numpy.selection import MaskedSelection, check_mask, full_mask
from tracejit.numpy.tensor import (
    Casting,
    MayAlias,
    Tensor,
    _has_traced_slice,
    _index,
    as_node,
    current_guard,
    in_loop_body,
    picked_view,
)

__all__ = ["copyto"]


# --- t[key] = value ------------------------------------------------------------------------------


def setitem(t: Tensor, key, value) -> None:
    """`t[key] = value`: value broadcast to the indexed region and cast to t's dtype as NumPy's setitem
    casts (unsafely: a float stored into an int array is truncated)."""
    through = _through_pick(t, key)
    if through is not None:  # row = x[i] (i traced, `for row in x`), row[j] = v: NumPy's row is a view of x
        _setitem(t, key, value)
        setitem(*through, value)
        return
    check_writeable(t, "assignment destination is read-only")
    _setitem(t, key, value)


def _through_pick(t: Tensor, key) -> tuple[Tensor, tuple] | None:
    """(x, (i, *key)) where t is x[i] for traced indices i (a copy where NumPy's is a view: picked_view) and key
    is ints and slices, so that t[key] = v is x[i, *key] = v as well; else None."""
    alias = t._read_only
    if not (picked_view(t) and isinstance(alias, MayAlias) and alias.through is not None):
        return None
    source, picked = alias.through
    picked = picked if isinstance(picked, tuple) else (picked,)
    key = key if isinstance(key, tuple) else (key,)
    if not all(isinstance(k, Tensor) or isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in picked):
        return None  # (x[i, :] and the like: the places of row[j] in x are not one index away)
    for k in key:
        if isinstance(k, Tensor) and k.shape == () and k.dtype.kind in "iu" or isinstance(k, slice):
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            continue
        return None
    return source, (*picked, *key)


def _setitem(t: Tensor, key, value) -> None:
    if isinstance(value, Tensor) and picked_view(value) and _written_through(value, t, key):
        return  # x[i] op= v, i traced: the augmented operator already wrote x[i] (inplace)
    if _has_traced_slice(key) and bounded_slices.bounded(key):  # x[:i] = ..., i known when the kernel runs
        bounded_slices.setitem(t, key, value)
        return
    mask = traced_mask(key)
    if mask is not None:
        _store_masked(t, mask, value)
        return
    only = _only(key)
    if isinstance(only, Tensor) and only.dtype == BOOL and only.ndim == 0:  # x[np.True_] = v: all of x, or none
        root, steps = t._root(), t._steps
        region = views.shapes(root.shape, steps)[-1]
        current = views.apply(root._value, steps)
        store(root, steps, build.where(build.broadcast_to(only._node, region), fit(value, region, root.dtype), current))
        return
    constant = constant_mask(key)
    if constant is not None:
        _store_constant_mask(t, constant, value)
        return
    listed = _listed_picks(key)
    if listed is not None:  # x[[k, p]] = v, k and p traced (a row swap): one store per index, in order
        picks, rest = listed
        values = np.broadcast_to(value, t[key].shape)
        for m, i in enumerate(picks):
            _setitem(t, (i, *rest), values[m])
        return
    if _has_array(key):  # integer-array indices: the scatter's new value of the whole array
        store(t._root(), t._steps, scatter.set_at(t, key, value)._node)
        return
    steps = t._steps + index_steps(t.shape, t.dtype, key)
    root = t._root()
    if isinstance(value, Tensor) and value._root() is root and value._steps == steps:
        return  # x[k] op= v: the augmented operator already wrote through the view x[k]
    region = views.shapes(root.shape, steps)[-1]
    store(root, steps, fit(value, region, root.dtype))


def _written_through(value: Tensor, t: Tensor, key) -> bool:
    """Whether value is t[key] for a traced index, changed in place and written into t since (inplace)."""
    alias = value._read_only
    if not isinstance(alias, MayAlias) or alias.through is None:
        return False
    source, picked_key = alias.through
    return source is t and picked_key is key and alias.written is value._value


def index_steps(shape, dtype, key) -> tuple[views.Step, ...]:
    """The movement steps a basic index makes (IndexError and ShapeError as reading t[key] raises them)."""
    stand_in = views.probe(shape, dtype)
    steps = views.steps_from(_index(stand_in, key), stand_in)
    assert steps is not None  # a basic index only moves: slices, new axes and ints
    return steps


def store(root: Tensor, steps, value: Node) -> None:
    """Write `value` (the region's shape and the root's dtype) over the region the steps select."""
    if value.size == 0:
        return
    current = views.apply(root._value, steps)
    if value is current:
        return
    guard = current_guard()
    if value.size == 1 and root.size > 1 and in_loop_body():  # x[2, 0] = v in a loop: scatter.set_at's form, which
        # a loop over elements reads back as the store it is (ir/element_loops.py); elsewhere the constant mask
        position = constant_value(views.apply(build.flat_positions(root.shape), steps))
        assert position is not None  # (positions and movement ops only: known)
        stored = build.store_element(
            root._value, build.const(int(position.reshape(())), position.dtype), build.reshape(value, ())
        )
        if guard is not None:
            stored = build.where(build.broadcast_to(guard, stored.shape), stored, root._value)
        root._value = stored
        return
    if guard is not None:  # a branch of an `if` on array values: the region changes only where its test holds
        value = build.where(build.broadcast_to(guard, value.shape), value, current)
    test = None
    while value.op is Op.WHERE and value.srcs[2] is current and value.srcs[0].shape == value.srcs[1].shape:
        # the view changes only where tests hold (z[i] = v with i traced writes z's parts' views; a branch's
        # guard): the tests are placed in the root too (False outside the view), so the root keeps its own
        # elements wherever they fail. where(region, place(where(test, v, region's values)), root) would read
        # the whole region back: a loop over elements could not tell the store it is from a stencil's step
        # (ir/element_loops.py), and each step would write every element of the region
        test = value.srcs[0] if test is None else build.binary(Op.AND, test, value.srcs[0])
        value = value.srcs[1]
    if test is not None:
        placed, _ = views.scatter(test, steps, root.shape)
        values, _ = views.scatter(value, steps, root.shape)
        root._value = build.where(placed, values, root._value)
        return
    values, mask = views.scatter(value, steps, root.shape)
    root._value = values if mask is None else build.where(mask, values, root._value)


def fit(value, shape: tuple[int, ...], dtype: np.dtype) -> Node:
    """The value to store: cast to the destination's dtype (unsafe, as NumPy's setitem), broadcast to the
    region's shape (leading length-1 dimensions beyond the region's are dropped, as NumPy does)."""
    v = as_node(value)
    given = v.shape
    if v.op is Op.CONST and v.weak:  # a Python scalar: NumPy's own checks (300 into uint8, NaN into int)
        v = build.const(_python_scalar_as(v.arg, dtype), dtype, v.shape)
    else:
        v = build.cast(v, dtype)
    while len(v.shape) > len(shape) and v.shape[0] == 1:
        v = build.reshape(v, v.shape[1:])
    try:
        return build.broadcast_to(v, shape)
    except ShapeError:
        raise ShapeError(f"could not broadcast input array from shape {given} into shape {shape}") from None


def _python_scalar_as(value, dtype: np.dtype):
    slot = np.zeros((), dtype)
    try:
        with np.errstate(all="ignore"):
            slot[()] = value
    except OverflowError as e:
        raise ScalarOverflowError(f"storing {value!r} into a {dtype} array: {e}") from None
    except ValueError as e:
        raise AssignmentError(f"storing {value!r} into a {dtype} array: {e}") from None
    return slot.item()


def check_writeable(t: Tensor, message: str) -> None:
    alias = t._read_only
    if isinstance(alias, MayAlias):  # an array that is one of two depending on the data (tensor.may_alias)
        if alias.resolve is not None and alias.resolve():
            return  # (this trace is traced again, the choice known: python_numbers.py)
        raise AssignmentError(f"{message}: {alias.why}")
    if t._read_only:
        why = (
            "it is a view made by np.broadcast_to (or another broadcast view)"
            if t._base is not None and views.read_only(t._steps)
            else "the array argument is not writeable (x.flags.writeable is False)"
        )
        raise AssignmentError(f"{message}: {why}; write into a copy (y = x.copy()) instead")


_LISTED = 16  # the most indices such a list may hold


def _listed_picks(key) -> tuple[list, tuple] | None:
    """(the indices, the rest of the key) where the key's first index is a list of a few ints and 0-d traced ints,
    one traced at least, and the rest basic (ints, 0-d traced ints, slices): x[[k, p]] = v stores v[0] at x[k],
    then v[1] at x[p], as NumPy writes them (the last of equal indices wins). One store per row, each a store a
    loop over elements takes, where the scatter of the whole array would not be one."""
    first, *rest = key if isinstance(key, tuple) else (key,)
    if not isinstance(first, list) or not 0 < len(first) <= _LISTED:
        return None
    if not any(isinstance(i, Tensor) for i in first):
        return None

    def scalar(k) -> bool:  # an int or a 0-d traced int
        if isinstance(k, Tensor):
            return k.shape == () and k.dtype.kind in "iu"
        return isinstance(k, (int, np.integer)) and not isinstance(k, bool)

    if not all(scalar(k) for k in first) or not all(isinstance(k, slice) or scalar(k) for k in rest):
        return None
    return first, tuple(rest)


def _has_array(key) -> bool:
    return any(isinstance(k, (Tensor, np.ndarray, list)) for k in (key if isinstance(key, tuple) else (key,)))


# --- boolean masks -------------------------------------------------------------------------------


def _only(key):
    return key[0] if isinstance(key, tuple) and len(key) == 1 else key


def traced_mask(key) -> Node | None:
    """The mask of `x[mask]` where it is a traced bool array (how many it selects is not known), else None."""
    k = _only(key)
    return k._node if isinstance(k, Tensor) and k.dtype == BOOL and k.ndim > 0 else None


def constant_mask(key) -> np.ndarray | None:
    """The mask of `x[mask]` where it is a NumPy bool array or a list of bools (known while tracing)."""
    k = _only(key)
    if isinstance(k, list):
        try:
            k = np.asarray(k)
        except Exception:  # noqa: BLE001 - a list of traced values: not a mask of constants
            return None
    return k if isinstance(k, np.ndarray) and k.dtype == BOOL and k.ndim > 0 else None


def _masked_values(t: Tensor, mask: Node, value) -> Node:
    """`value` as x[mask] = value spreads it: over the selected elements, broadcast against the axes
    the mask does not cover. One value per selected element depends on how many the mask selects."""
    trailing = t.shape[len(mask.shape) :]
    v = as_node(value)
    while len(v.shape) > len(trailing) and v.shape[0] == 1:
        v = build.reshape(v, v.shape[1:])
    if len(v.shape) > len(trailing):  # one value per selected element: the count is the data's (data_sizes.py)
        return _per_selected(t, mask, value)
    v = fit(v, trailing, t.dtype)
    return build.broadcast_to(v, t.shape)


def _per_selected(t: Tensor, mask: Node, value) -> Node:
    """x[mask] = values with one value (row) per selected element: the k-th selected element takes values[k]. How
    many the mask selects is read when the kernel runs (numpy/data_sizes.py); NumPy's ValueError where it is not
    the number of values."""
    from tracejit.numpy import data_sizes

    trailing = t.shape[len(mask.shape) :]
    n = data_sizes.positions(mask, "x[mask] = values").shape[0]
    v = as_node(value)
    while len(v.shape) > len(trailing) + 1 and v.shape[0] == 1:
        v = build.reshape(v, v.shape[1:])
    if v.shape[0] != n:
        raise ShapeError(
            f"NumPy boolean array indexing assignment cannot assign {v.shape[0]} input values to the {n} output "
            "values where the mask is true"
        )
    if n == 0:
        return t._node
    values = fit(v, (n,) + trailing, t.dtype)
    flat = build.reshape(mask, (mask.size,))
    dt = np.int32  # (data_sizes.positions holds at most 2**31 - 1 elements)
    rank = build.binary(Op.SUB, build.scan(build.cast(flat, dt), "sum", 0), build.const(1, dt, flat.shape))
    rank = build.binary(
        Op.MAX,
        build.binary(Op.MIN, rank, build.const(n - 1, dt, flat.shape)),
        build.const(0, dt, flat.shape),
    )
    rows = data_sizes.take_rows(values, rank)  # (the selected places' values; the others' are not kept)
    return build.reshape(rows, t.shape)


def _store_constant_mask(t: Tensor, mask: np.ndarray, value) -> None:
    """x[mask] = value with a mask known while tracing: the count is known, so a value with one element
    per selected element (x[m] = x[m] * 2, where x[m] was a gather) is placed by the rank of each
    selected element, a gather of the values."""
    node = as_node(mask)
    check_mask(t.shape, node)
    trailing = t.shape[mask.ndim :]
    if isinstance(value, MaskedSelection) or len(as_node(value).shape) <= len(trailing):
        _store_masked(t, node, value)
        return
    count = int(mask.sum())
    values = fit(value, (count,) + trailing, t.dtype)
    if count == 0:
        return
    rank = np.maximum(np.cumsum(mask.reshape(-1)) - 1, 0).reshape(mask.shape)
    placed = indexing.advanced_index(values, (rank,))
    store(t._root(), t._steps, build.where(full_mask(node, t.shape), placed, t._node))


def _store_masked(t: Tensor, mask: Node, value) -> None:
    check_mask(t.shape, mask)
    placed = value.values_for(mask, t.shape) if isinstance(value, MaskedSelection) else None
    if placed is not None:  # x[mask] = f(x[mask], y[mask]): the values sit at their places
        values = build.cast(placed, t.dtype)
    else:
        values = _masked_values(t, mask, value)
    store(t._root(), t._steps, build.where(full_mask(mask, t.shape), values, t._node))


# --- augmented operators and out= ----------------------------------------------------------------

_UFUNC_OF = {
    "+=": "add",
    "-=": "subtract",
    "*=": "multiply",
    "/=": "divide",
    "//=": "floor_divide",
    "%=": "remainder",
    "**=": "power",
    "&=": "bitwise_and",
    "|=": "bitwise_or",
    "^=": "bitwise_xor",
    "<<=": "left_shift",
    ">>=": "right_shift",
    "@=": "matmul",
}


def check_inplace(result: Tensor, dest: Tensor, symbol: str) -> None:
    if result.shape != dest.shape:
        raise ShapeError(
            f"non-broadcastable output operand with shape {dest.shape} doesn't match the broadcast "
            f"shape {result.shape} (x {symbol} y keeps x's shape)"
        )
    if not np.can_cast(result.dtype, dest.dtype, "same_kind"):
        raise CastingError(
            f"Cannot cast ufunc '{_UFUNC_OF[symbol]}' output from dtype('{result.dtype}') to "
            f"dtype('{dest.dtype}') with casting rule 'same_kind' (x {symbol} y writes into x, as "
            f"in NumPy); write x = x {symbol[:-1]} y for a new array"
        )


def augmented_symbol(ufunc) -> str:
    """The augmented operator (`+=`, `*=`, ...) a ufunc with out= computes, for inplace's errors; `+=` for one
    that has none."""
    return next((k for k, v in _UFUNC_OF.items() if v == ufunc.__name__), "+=")


def inplace(t: Tensor, result: Tensor, symbol: str) -> Tensor:
    """`t op= y` as NumPy computes it: into t's own memory (so views of it, and the caller's array when t
    is an argument, change), the result cast back to t's dtype ('same_kind'). A 0-d value that is not an
    argument is a NumPy scalar (or a Python scalar argument), which `op=` rebinds instead."""
    if t.ndim == 0 and t._base is None and t._argument is None:
        return result  # a NumPy (or Python) scalar is immutable: x op= y is x = x op y, in its dtype
    check_inplace(result, t, symbol)
    value = build.cast(result._node, t.dtype)
    picked = picked_view(t)
    if not picked:
        check_writeable(t, "output array is read-only")
    store(t._root(), t._steps, value)
    alias = t._read_only
    if picked and isinstance(alias, MayAlias) and alias.through is not None:
        # row = x[i]; row -= v with i traced: NumPy's row is a view, its change is x's
        source, key = alias.through
        setitem(source, key, t)
        alias.written = t._value  # (x[i] -= v: Python's store back after it writes nothing new)
    return t


def write_out(
    out, result, casting: Casting = "same_kind", where=True, name: str = "ufunc", exact: bool = False
) -> Tensor:
    """A NumPy function's `out=`: the result, broadcast to out's shape (a ufunc's) or of exactly its shape
    (`exact`: reductions, np.round), cast under `casting`, stored in out where `where` is true. Returns out,
    as NumPy does."""
    if not isinstance(out, Tensor):
        raise UnsupportedError(
            f"np.{name}(..., out=...) got a {type(out).__module__}.{type(out).__name__}; inside a "
            "kernel out= must be a traced array (an argument, or an array the kernel made, e.g. "
            "with np.empty_like): a NumPy array the function closes over cannot be written"
        )
    check_writeable(out, "output array is read-only")
    r = as_node(result)
    if exact and r.shape != out.shape:
        raise ShapeError(f"np.{name}(..., out=...): out has shape {out.shape}, the result has shape {r.shape}")
    if build.broadcast_shapes(r.shape, out.shape) != out.shape:
        raise ShapeError(
            f"non-broadcastable output operand with shape {out.shape} doesn't match the broadcast "
            f"shape {build.broadcast_shapes(r.shape, out.shape)}"
        )
    if not np.can_cast(r.dtype, out.dtype, casting):
        raise CastingError(
            f"Cannot cast ufunc '{name}' output from dtype('{r.dtype}') to dtype('{out.dtype}') with "
            f"casting rule '{casting}'"
        )
    value = build.broadcast_to(build.cast(r, out.dtype), out.shape)
    if where is not True:
        m = as_node(where)
        m = m if m.dtype == BOOL else build.binary(Op.NE, m, build.const(0, m.dtype, m.shape))
        value = build.where(build.broadcast_to(m, out.shape), value, out._node)
    store(out._root(), out._steps, value)
    return out


def copyto(dst, src, casting: Casting = "same_kind", where=True) -> None:
    """np.copyto: src broadcast into dst, under NumPy's casting rule, where `where` is true."""
    if type(src) in (bool, int, float) and isinstance(dst, Tensor):  # weak: NumPy's own rules decide
        try:
            np.copyto(np.zeros((), dst.dtype), src, casting=casting)
        except TypeError as e:
            raise CastingError(f"np.copyto: {e}") from None
        src = Tensor(build.const(_python_scalar_as(src, dst.dtype), dst.dtype, ()))
    write_out(dst, src, casting, where, "copyto")


def fill(t: Tensor, value) -> None:
    """ndarray.fill: every element set to value (cast as setitem casts)."""
    setitem(t, Ellipsis, value)


NUMPY_FUNCTIONS = {np.copyto: copyto}
