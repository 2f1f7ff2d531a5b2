"""`x[mask]` while tracing: how many elements a boolean mask selects is not known, so the selection keeps
its elements at their places in x's shape. Elementwise arithmetic on selections of one mask (and on
values that broadcast over the selected elements) stays a selection, and storing one back with that
mask (`x[mask] = y[mask] ** 2`, `x[mask] += 1`) is a where(); any use whose shape is the count refuses."""

from __future__ import annotations

import numpy as np

from tracejit.errors import InvalidIndexError, ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir import faulting
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy.tensor import AUGMENTED, AUGMENTED_NAMES, Tensor, as_node


def check_mask(shape, mask: Node) -> None:
    """NumPy's IndexError for a mask that does not match the leading axes it indexes."""
    if len(mask.shape) > len(shape):
        raise ShapeError(
            f"too many indices: a boolean index of {len(mask.shape)} dimensions into an array of shape {shape}"
        )
    for axis, (n, m) in enumerate(zip(shape, mask.shape)):
        if n != m:
            raise InvalidIndexError(
                f"boolean index did not match indexed array along axis {axis}; size of axis is {n} "
                f"but size of corresponding boolean axis is {m}"
            )


def full_mask(mask: Node, shape) -> Node:
    """The mask of the leading axes broadcast over the axes it does not cover."""
    return build.expand(build.reshape(mask, mask.shape + (1,) * (len(shape) - len(mask.shape))), shape)


def data_dependent() -> UnsupportedError:
    return UnsupportedError(
        "x[mask] (boolean-mask indexing) has a shape that depends on the data, which is not "
        "known while tracing; reduce it (x[mask].sum(), .mean(), .max(), over all axes or axis 0), use "
        "np.where(mask, x, 0), a reduction with where=mask (np.sum(x, where=mask)), or assign through it "
        "(x[mask] = v, x[mask] += v, x[mask] = f(x[mask]))"
    )


class MaskedSelection(np.lib.mixins.NDArrayOperatorsMixin):
    """The elements of an array of `shape` that `mask` selects, as `values` (of that shape: only the
    selected places matter). NumPy's operators come from the mixin, through __array_ufunc__."""

    __slots__ = ("mask", "values", "source")
    __array_priority__ = 1001

    def __init__(self, mask: Node, values: Node, source: Tensor | None = None):
        check_mask(values.shape, mask)
        self.mask, self.values = mask, values
        self.source = source  # the array it was read from: x[mask] op= v writes there

    def values_for(self, mask: Node, shape) -> Node:
        """The values, to store with `mask` into an array of `shape` (the same mask and shape only)."""
        if mask is not self.mask or self.values.shape != tuple(shape):
            raise UnsupportedError(
                "x[mask] = y[other_mask]: the two masks may select different numbers of elements, "
                "which is not known while tracing; use np.where"
            )
        return self.values

    def _operand(self, x):
        """An operand of elementwise arithmetic with the selection, as a Tensor or scalar of the full shape."""
        if isinstance(x, MaskedSelection):
            return Tensor(x.values_for(self.mask, self.values.shape))
        v = as_node(x)
        trailing = self.values.shape[len(self.mask.shape) :]
        while len(v.shape) > len(trailing) and v.shape[0] == 1:
            v = build.reshape(v, v.shape[1:])
        if len(v.shape) > len(trailing):  # one value per selected element: pairs with the count
            raise data_dependent()
        return x if v.shape == as_node(x).shape else Tensor(v)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs.get("out") is not None:
            raise data_dependent()
        from tracejit.numpy.numpy_protocol import array_ufunc

        result = array_ufunc(ufunc, method, tuple(self._operand(x) for x in inputs), kwargs)
        if isinstance(result, tuple):
            return tuple(MaskedSelection(self.mask, as_node(r)) for r in result)
        return MaskedSelection(self.mask, as_node(result))

    def update(self, symbol: str, compute, operand) -> MaskedSelection:
        """x[mask] op= operand: computed over the whole array; x's store keeps the selected places."""
        from tracejit.numpy.assign import check_inplace, check_writeable

        if self.source is not None:
            check_writeable(self.source, "output array is read-only")
        current = Tensor(self.values)
        result = compute(current, self._operand(operand))
        check_inplace(result, current, symbol)
        return MaskedSelection(self.mask, build.cast(result._node, current.dtype), self.source)

    # -- reductions: over the selected elements (the count is never needed as a shape) --

    def _reduce(self, name: str, axis=None, dtype=None, out=None, keepdims=False, **extra):
        """x[mask].<name>(axis, ...) (sum, mean, max, ...): the reduction over the selected places with where=. The
        selection's axis 0 is the mask's axes; a reduction that keeps it (its length the count) is refused. A max
        or min of no elements raises NumPy's ValueError when the kernel runs."""
        from tracejit.numpy import reductions as R
        from tracejit.numpy.functions import _axes

        if out is not None:
            raise UnsupportedError(f"x[mask].{name}(out=...) is not supported while tracing; use the returned value")
        lead, trailing = len(self.mask.shape), self.values.shape[len(self.mask.shape) :]
        ndim = 1 + len(trailing)
        axes = tuple(range(ndim)) if axis is None else _axes(axis, ndim)
        if 0 not in axes:
            raise data_dependent()
        over = tuple(range(lead)) + tuple(lead + a - 1 for a in axes if a != 0)
        where = Tensor(full_mask(self.mask, self.values.shape))
        values = Tensor(self.values)
        kwargs = dict(extra, axis=over, where=where)
        if dtype is not None:
            kwargs["dtype"] = dtype
        if name in ("max", "min"):
            dt = self.values.dtype
            info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt) if dt.kind in "iu" else None
            if info is not None:
                kwargs["initial"] = (
                    (-np.inf if name == "max" else np.inf)
                    if dt.kind == "f"
                    else (info.min if name == "max" else info.max)
                )
            result = getattr(R, name)(values, **kwargs)
            count = as_node(R.sum(Tensor(self.mask)))
            fault = Fault(
                "ValueError",
                f"zero-size array to reduction operation {'maximum' if name == 'max' else 'minimum'} which has "
                "no identity",
            )
            checked = build.binary(
                Op.ADD,
                count,
                build.cast(
                    faulting.check(build.binary(Op.LT, build.const(0, count.dtype, ()), count), fault), count.dtype
                ),
            )
            ok = build.binary(Op.LT, build.const(0, count.dtype, ()), checked)
            result = Tensor(
                build.where(
                    build.expand(build.reshape(ok, (1,) * len(result.shape)), result.shape) if result.shape else ok,
                    as_node(result),
                    as_node(result),
                )
            )
        else:
            result = getattr(R, name)(values, **kwargs)
        if keepdims:
            shape = tuple(1 if a in axes else n for a, n in enumerate((1, *trailing)))
            result = Tensor(build.reshape(as_node(result), shape))
        return result

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None):
        return self._reduce("sum", axis, dtype, out, keepdims, **({} if initial is None else {"initial": initial}))

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=None):
        return self._reduce("prod", axis, dtype, out, keepdims, **({} if initial is None else {"initial": initial}))

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._reduce("mean", axis, dtype, out, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return self._reduce("std", axis, dtype, out, keepdims, ddof=ddof)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return self._reduce("var", axis, dtype, out, keepdims, ddof=ddof)

    def max(self, axis=None, out=None, keepdims=False):
        return self._reduce("max", axis, None, out, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return self._reduce("min", axis, None, out, keepdims)

    def any(self, axis=None, out=None, keepdims=False):
        return self._reduce("any", axis, None, out, keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return self._reduce("all", axis, None, out, keepdims)

    @property
    def size(self):
        """How many elements are selected (a traced int: known when the kernel runs)."""
        trailing = int(np.prod(self.values.shape[len(self.mask.shape) :], dtype=np.int64))
        from tracejit.numpy import reductions as R

        return R.sum(Tensor(self.mask)) * trailing

    def __array_function__(self, func, types, args, kwargs):
        name = _REDUCTIONS.get(func)
        if name is None or not args or args[0] is not self:
            raise data_dependent()
        return getattr(self, name)(*args[1:], **kwargs)

    def __array__(self, dtype=None, copy=None):
        raise data_dependent()

    def __getattr__(self, name):
        raise data_dependent()

    def __len__(self):
        raise data_dependent()

    def __iter__(self):
        raise data_dependent()

    def __bool__(self):
        raise data_dependent()

    def __repr__(self) -> str:
        return f"<the elements of a traced array of shape {self.values.shape} a boolean mask selects>"


def _update(symbol: str, compute):
    def method(self, other):
        return self.update(symbol, compute, other)

    method.__name__ = f"__i{AUGMENTED_NAMES[symbol]}__"
    return method


for _symbol, _compute in AUGMENTED.items():
    setattr(MaskedSelection, f"__i{AUGMENTED_NAMES[_symbol]}__", _update(_symbol, _compute))


# np.<function>(x[mask], ...) that reduce the selection: the method of the same name
_REDUCTIONS = {
    np.sum: "sum",
    np.prod: "prod",
    np.mean: "mean",
    np.std: "std",
    np.var: "var",
    np.max: "max",
    np.amax: "max",
    np.min: "min",
    np.amin: "min",
    np.any: "any",
    np.all: "all",
}
