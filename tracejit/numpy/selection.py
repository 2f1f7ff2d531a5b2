"""`x[mask]` while tracing: how many elements a boolean mask selects is not known, so the selection keeps
its elements at their places in x's shape. Elementwise arithmetic on selections of one mask (and on
values that broadcast over the selected elements) stays a selection, storing one back with that
mask (`x[mask] = y[mask] ** 2`, `x[mask] += 1`) is a where(), and a reduction over the selected elements is one
with where=mask: none of these needs the count. Any other use (a shape, another array's elements one per selected
element, a function that is not a reduction, a result returned) makes the selection an array of the count's length
(`array()`, numpy/data_sizes.py: the count is read when the kernel runs).

Once made, that array is the selection: a write into it (`np.add(y, v, out=y)` with v of the count's length,
`y.sort()`, `np.cumsum(y, out=y)`) changes only the array, so every later use of the selection reads the array,
never the values at their places again (`_placed()`). A ufunc writing into the selection itself (`np.multiply(y, y,
y)`) from operands at their places changes its values there."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import CastingError, InvalidIndexError, ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir import faulting
from tracejit.ir.dtypes import is_float
from tracejit.ir.graph import Node, Op
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy.tensor import AUGMENTED, AUGMENTED_NAMES, Tensor, as_node


class _NeedsArray(Exception):
    """A use of a selection that needs it as an array of the count's length."""


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


def arrays(values):
    """`values` (a value, or a tuple, list or dict of them) with every selection made an array."""
    if isinstance(values, (MaskedSelection, MaskedComplex)):
        return values.array()
    if isinstance(values, (tuple, list)):
        items = [arrays(v) for v in values]
        if all(a is b for a, b in zip(items, values)):
            return values
        return type(values)(*items) if hasattr(values, "_fields") else type(values)(items)
    if isinstance(values, dict):
        return {k: arrays(v) for k, v in values.items()}
    return values


class _AsArray:
    """What a selection does for any use that needs it as an array of the count's length: that array's."""

    __slots__ = ()
    mask: Node  # (the selection's: its leading axes)
    values: Any  # (the values at their places, of the selected array's shape)
    array: Callable[[], Any]  # (each class's: the selected elements as an array of the count's length)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return 1 + len(self.values.shape) - len(self.mask.shape)

    def _placed(self) -> bool:
        """Whether the values at their places are the selection's: not once its array is made, which writes may
        have changed since (module docstring)."""
        return self._array is None

    def _write_in_place(self, ufunc, method, inputs, kwargs) -> bool:
        """Whether ufunc(*inputs, out=(self,)) can be computed at the selected places (no where=, one output, each
        operand a selection of the same mask or a value that broadcasts over the selected elements)."""
        out = kwargs.get("out")
        return (
            method == "__call__"
            and out is not None
            and len(out) == 1
            and out[0] is self
            and ufunc.nout == 1
            and "where" not in kwargs
            and self._placed()
        )

    def __array__(self, dtype=None, copy=None):
        return self.array().__array__(dtype, copy)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.array(), name)

    def __getitem__(self, key):
        return self.array()[arrays(key)]

    def __len__(self):
        return len(self.array())

    def __iter__(self):
        return iter(self.array())

    def __bool__(self):
        return bool(self.array())


class MaskedSelection(_AsArray, np.lib.mixins.NDArrayOperatorsMixin):
    """The elements of an array of `shape` that `mask` selects, as `values` (of that shape: only the
    selected places matter). NumPy's operators come from the mixin, through __array_ufunc__."""

    __slots__ = ("mask", "values", "source", "where", "_array")
    __array_priority__ = 1001

    def __init__(self, mask: Node, values: Node, source: Tensor | None = None):
        check_mask(values.shape, mask)
        self.mask, self.values = mask, values
        self.source = source  # the array it was read from: x[mask] op= v writes there
        self._array: Tensor | None = None
        from tracejit.numpy.data_sizes import site_of_user

        self.where = site_of_user()  # the user's line that selected (the count is read back there, as errors say)

    def array(self) -> Tensor:
        """The selection as NumPy has it: the selected elements (rows) in order, an array of the count's length."""
        if self._array is None:
            from tracejit.numpy.data_sizes import select

            self._array = Tensor(select(self.values, self.mask, self.where))
        return self._array

    def values_for(self, mask: Node, shape) -> Node | None:
        """The values at their places, to store with `mask` into an array of `shape`; None for another mask or
        shape (the two may select different numbers of elements: then the selection is taken as an array)."""
        if mask is not self.mask or self.values.shape != tuple(shape) or not self._placed():
            return None
        return self.values

    def _operand(self, x):
        """An operand of elementwise arithmetic with the selection, as a Tensor or scalar of the full shape."""
        if isinstance(x, MaskedSelection):
            values = x.values_for(self.mask, self.values.shape)
            if values is None:
                raise _NeedsArray
            return Tensor(values)
        v = as_node(x)
        trailing = self.values.shape[len(self.mask.shape) :]
        while len(v.shape) > len(trailing) and v.shape[0] == 1:
            v = build.reshape(v, v.shape[1:])
        if len(v.shape) > len(trailing):  # one value per selected element: pairs with the count
            raise _NeedsArray
        return x if v.shape == as_node(x).shape else Tensor(v)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from tracejit.numpy.assign import write_out
        from tracejit.numpy.numpy_protocol import array_ufunc

        in_place = self._write_in_place(ufunc, method, inputs, kwargs)
        try:
            if method != "__call__" or (kwargs.get("out") is not None and not in_place) or not self._placed():
                raise _NeedsArray
            operands = tuple(self._operand(x) for x in inputs)
        except _NeedsArray:  # (an output that is a selection is written as its array, which is the selection after)
            return array_ufunc(ufunc, method, arrays(inputs), arrays(kwargs))
        if in_place:  # np.multiply(y, y, out=y): y's values at their places change (cast as NumPy's out= casts)
            kwargs = dict(kwargs)
            del kwargs["out"]
            casting = kwargs.pop("casting", "same_kind")
            result = array_ufunc(ufunc, method, operands, kwargs)
            self.values = as_node(write_out(Tensor(self.values), result, casting, True, ufunc.__name__))
            return self
        result = array_ufunc(ufunc, method, operands, kwargs)
        if isinstance(result, tuple):
            return tuple(MaskedSelection(self.mask, as_node(r)) for r in result)
        return MaskedSelection(self.mask, as_node(result))

    def update(self, symbol: str, compute, operand) -> MaskedSelection:
        """y op= operand, for y = x[mask] (NumPy's copy: y changes, and every name bound to it sees the change) and
        for x[mask] op= operand (x's store then keeps the selected places): computed over the whole array where
        the operand pairs with the places, else on the selection's array."""
        from tracejit.numpy.assign import check_inplace, check_writeable

        if self.source is not None:
            check_writeable(self.source, "output array is read-only")
        try:
            if not self._placed():
                raise _NeedsArray
            current = Tensor(self.values)
            result = compute(current, self._operand(operand))
        except _NeedsArray:
            self._array = getattr(self.array(), f"__i{AUGMENTED_NAMES[symbol]}__")(arrays(operand))
            return self
        check_inplace(result, current, symbol)
        self.values = build.cast(result._node, current.dtype)
        return self

    # -- reductions: over the selected elements (the count is never needed as a shape) --

    def _reduce(self, name: str, axis=None, dtype=None, out=None, keepdims=False, **extra):
        """x[mask].<name>(axis, ...) (sum, mean, max, ...): the reduction over the selected places with where=. The
        selection's axis 0 is the mask's axes; a reduction that keeps it (its length the count) is refused. A max
        or min of no elements raises NumPy's ValueError when the kernel runs."""
        from tracejit.numpy import reductions as R
        from tracejit.numpy.functions import _axes

        if out is not None:
            raise UnsupportedError(f"x[mask].{name}(out=...) is not supported while tracing; use the returned value")
        if not self._placed():
            return getattr(self.array(), name)(
                axis=axis, keepdims=keepdims, **extra, **({} if dtype is None else {"dtype": dtype})
            )
        lead, trailing = len(self.mask.shape), self.values.shape[len(self.mask.shape) :]
        ndim = 1 + len(trailing)
        axes = tuple(range(ndim)) if axis is None else _axes(axis, ndim)
        if 0 not in axes:  # (the count's axis kept)
            return getattr(self.array(), name)(
                axis=axis, keepdims=keepdims, **extra, **({} if dtype is None else {"dtype": dtype})
            )
        over = tuple(range(lead)) + tuple(lead + a - 1 for a in axes if a != 0)
        where = Tensor(full_mask(self.mask, self.values.shape))
        values = Tensor(self.values)
        kwargs = dict(extra, axis=over, where=where)
        if dtype is not None:
            kwargs["dtype"] = dtype
        if name in ("max", "min"):
            dt = self.values.dtype
            if is_float(dt):
                kwargs["initial"] = -np.inf if name == "max" else np.inf
            elif dt.kind in "iu":
                info = np.iinfo(dt)
                kwargs["initial"] = info.min if name == "max" else info.max
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
        """How many elements are selected: in arithmetic a traced int (x[m].sum() / x[m].size needs no count read
        back), where Python needs the number (if, int(), a shape, a comparison with a number) the count."""
        trailing = int(np.prod(self.values.shape[len(self.mask.shape) :], dtype=np.int64))
        from tracejit.numpy import reductions as R

        count = SelectedCount(as_node(R.sum(Tensor(self.mask)) * trailing))
        count._selection = self
        return count

    def __array_function__(self, func, types, args, kwargs):
        name = _REDUCTIONS.get(func)
        if name is None or not args or args[0] is not self:
            return func(*arrays(args), **arrays(kwargs))
        return getattr(self, name)(*args[1:], **kwargs)

    def __int__(self):
        return int(self.array())

    def __float__(self):
        return float(self.array())

    def __index__(self):
        return self.array().__index__()

    def __repr__(self) -> str:
        return f"<the elements of a traced array of shape {self.values.shape} a boolean mask selects>"


class MaskedComplex(_AsArray, np.lib.mixins.NDArrayOperatorsMixin):
    """z[mask] of a traced complex array (numpy/complex_values.py) as MaskedSelection is of a real one: `values` a
    ComplexTensor of z's shape whose selected places matter. Elementwise arithmetic with selections of the same mask
    and values that broadcast over the selected elements stays one, and `z[mask] = z[mask] ** 2 + c[mask]` is a
    where() on each part (NPBench's mandelbrot1, inside a loop compiled as a loop, where the count cannot be read
    back each step); any other use makes it an array of the count's length, as NumPy has it."""

    __slots__ = ("mask", "values", "where", "_array")
    __array_priority__ = 1002  # (above ComplexTensor's and MaskedSelection's: mixed operations come here)

    def __init__(self, mask: Node, values):
        check_mask(values.shape, mask)
        self.mask, self.values = mask, values
        self._array = None
        from tracejit.numpy.data_sizes import site_of_user

        self.where = site_of_user()

    @staticmethod
    def of(re, im):
        """The selection of a complex array whose parts' selections are `re` and `im`, or None where they are not
        selections of one mask (ComplexTensor.__getitem__ then makes the parts arrays)."""
        if not (isinstance(re, MaskedSelection) and isinstance(im, MaskedSelection) and re.mask is im.mask):
            return None
        from tracejit.numpy.complex_values import ComplexTensor

        return MaskedComplex(re.mask, ComplexTensor(Tensor(re.values), Tensor(im.values)))

    def array(self):
        """The selected elements in order, an array of the count's length (numpy/data_sizes.py)."""
        if self._array is None:
            from tracejit.numpy.complex_values import ComplexTensor

            re, im = (MaskedSelection(self.mask, as_node(p)).array() for p in (self.values.re, self.values.im))
            self._array = ComplexTensor(re, im)
        return self._array

    @property
    def real(self) -> MaskedSelection | Any:
        return MaskedSelection(self.mask, as_node(self.values.re)) if self._placed() else self.array().real

    @property
    def imag(self) -> MaskedSelection | Any:
        return MaskedSelection(self.mask, as_node(self.values.im)) if self._placed() else self.array().imag

    def parts_for(self, mask: Node, shape) -> tuple[MaskedSelection, MaskedSelection] | None:
        """Its parts as selections to store with `mask` into a complex array of `shape` (ComplexTensor.__setitem__);
        None for another mask or shape."""
        if mask is not self.mask or self.values.shape != tuple(shape) or not self._placed():
            return None
        return self.real, self.imag

    def conj(self) -> MaskedComplex | Any:
        return MaskedComplex(self.mask, self.values.conj()) if self._placed() else self.array().conj()

    conjugate = conj

    def _operand(self, x):
        """An operand of elementwise arithmetic with the selection, of the full shape (or one that broadcasts over
        the selected elements)."""
        if isinstance(x, (MaskedComplex, MaskedSelection)):
            if x.mask is not self.mask or x.values.shape != self.values.shape or not x._placed():
                raise _NeedsArray
            return x.values if isinstance(x, MaskedComplex) else Tensor(x.values)
        shape = getattr(x, "shape", ())
        trailing = self.values.shape[len(self.mask.shape) :]
        lead = len(shape) - len(trailing)
        if lead > 0 and any(n != 1 for n in shape[:lead]):  # one value per selected element: pairs with the count
            raise _NeedsArray
        return x

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # z *= 2 (the mixin's __imul__), np.multiply(z, z, z): z's values at their places change, as NumPy's z does
        in_place = self._write_in_place(ufunc, method, inputs, kwargs)
        try:
            if method != "__call__" or (kwargs.get("out") is not None and not in_place) or not self._placed():
                raise _NeedsArray
            operands = tuple(self._operand(x) for x in inputs)
        except _NeedsArray:  # (an output that is a selection is written as its array, which is the selection after)
            return getattr(ufunc, method)(*arrays(inputs), **arrays(kwargs))
        kwargs = dict(kwargs)
        kwargs.pop("out", None)
        casting = kwargs.pop("casting", "same_kind")
        result = ufunc(*operands, **kwargs)
        if isinstance(result, tuple):
            return tuple(self._selected(r) for r in result)
        if in_place:
            from tracejit.numpy.complex_values import astype

            if not np.can_cast(result.dtype, self.dtype, casting):
                raise CastingError(
                    f"Cannot cast ufunc '{ufunc.__name__}' output from dtype('{result.dtype}') to "
                    f"dtype('{self.dtype}') with casting rule '{casting}'"
                )
            self.values = np.broadcast_to(astype(result, self.dtype), self.values.shape)
            return self
        return self._selected(result)

    def _selected(self, value):
        from tracejit.numpy.complex_values import ComplexTensor

        if isinstance(value, ComplexTensor):
            return MaskedComplex(self.mask, value)
        return MaskedSelection(self.mask, as_node(value))

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._parts("sum", axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._parts("mean", axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def _parts(self, name: str, **kwargs):
        """A reduction that is the same reduction of each part (sum, mean), over the selected elements."""
        from tracejit.numpy.complex_values import ComplexTensor

        dtype = kwargs.pop("dtype")
        if dtype is not None or not self._placed():
            return getattr(self.array(), name)(**({} if dtype is None else {"dtype": dtype}), **kwargs)
        return ComplexTensor(getattr(self.real, name)(**kwargs), getattr(self.imag, name)(**kwargs))

    def __array_function__(self, func, types, args, kwargs):
        name = _REDUCTIONS.get(func)
        if name in ("sum", "mean") and args and args[0] is self:
            return getattr(self, name)(*args[1:], **kwargs)
        return func(*arrays(args), **arrays(kwargs))

    def __complex__(self):
        return complex(self.array())

    def __repr__(self) -> str:
        return f"<the elements of a traced complex array of shape {self.values.shape} a boolean mask selects>"


class SelectedCount(Tensor):
    """x[mask].size (MaskedSelection.size): a traced int, but the count itself wherever Python needs a number."""

    __slots__ = ("_selection",)
    __hash__ = Tensor.__hash__

    def _number(self) -> int:
        return self._selection.array().size

    def _known(self, use: str):
        return np.asarray(self._number())  # (an `if`, a shape, a range bound: the count, read when it runs)

    def __bool__(self):
        return self._number() != 0

    def __int__(self):
        return self._number()

    def __index__(self):
        return self._number()

    def __float__(self):
        return float(self._number())


def _comparison(name: str):
    compare = getattr(operator, name)
    traced = getattr(Tensor, f"__{name}__")

    def method(self, other):
        if type(other) in (int, float, np.int64, np.float64, np.int32):  # (a Python number: the count compared)
            return compare(self._number(), other)
        return traced(self, other)

    method.__name__ = f"__{name}__"
    return method


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(SelectedCount, f"__{_name}__", _comparison(_name))


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
