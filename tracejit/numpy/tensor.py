"""The traced Tensor: a symbolic array that records NumPy-style operations as graph IR nodes."""

from __future__ import annotations

import contextvars
import os
import importlib
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, Union


import numpy as np

from tracejit.errors import IndexOutOfBoundsError, ShapeError, TraceError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import check, weak_dtype
from tracejit.ir.evaluate import constant_value
from tracejit.ir.graph import Node, Op
from tracejit.numpy import python_numbers, user_frames, views

# what the traced functions take as an array, as as_node does: a traced array, a NumPy array or scalar, a
# Python number or a (nested) list of them
ArrayLike = Union["Tensor", Node, np.ndarray, np.generic, bool, int, float, list, tuple]
Casting = Literal["no", "equiv", "safe", "same_kind", "unsafe"]  # NumPy's casting rules, as its casting= takes
Scalar = bool | int | float | np.generic  # a Python or NumPy number (an initial=, a bound)

MAX_UNROLL = 64  # `for row in t`, `a, b = t`, zip(*t): at most this many rows, each traced separately


# [traced values left, the limit, the Tensors alive] of the trace running in this context (Kernel._trace): a trace
# that would fill the machine's memory stops with an error at the user's line instead of being killed by the
# system; a loop compiled as a loop (loops.py) finds the arrays its body may assign into among the living
_BUDGET: contextvars.ContextVar[list | None] = contextvars.ContextVar("tracejit_trace_budget", default=None)


@contextmanager
def trace_budget(values: int, arguments=()) -> Iterator[None]:
    """Trace at most `values` traced values (Tensors) in this block; `arguments`: the kernel's, made before."""
    token = _BUDGET.set([values, values, weakref.WeakSet(a for a in arguments if isinstance(a, Tensor))])
    try:
        yield
    finally:
        _BUDGET.reset(token)


class MayAlias:
    """Why an array may not be assigned into: it is one array or another depending on the data (may_alias)."""

    def __init__(self, why: str, resolve: Callable[[], bool] | None = None):
        self.why, self.resolve = why, resolve
        self.through: tuple[Tensor, Any] | None = None  # x[i] for a traced i: (x, i), where writes go too
        self.written: Node | None = None  # its value last written into x (numpy/assign.inplace)
        self.seen: Node | None = None  # x[i]: the value of x's root it was read from (Tensor._node reads it again)

    def refresh(self, t: Tensor) -> Node:
        """x[i] for a traced i (`through`): read again from x where x changed since, as NumPy's view shows it."""
        assert self.through is not None
        source, key = self.through
        now = source._root()._value
        if now is not self.seen:
            self.seen = now
            t._value = _index(source._node, key)
        return t._value

    def __bool__(self) -> bool:
        return True


def may_alias(t, why: str, resolve: Callable[[], bool] | None = None):
    """`t` (a value an `if` or a loop on array values made) marked as possibly the very array it was made
    from, depending on the data: NumPy would assign into that array through it only sometimes, which a kernel
    cannot follow, so assigning into it is an error saying `why` (reading it is fine). `resolve`: where the
    choice depends on the kernel's Python numbers only, a function that specialises the kernel on them (the
    trace runs again with them known, python_numbers.py) and returns True."""
    if isinstance(t, Tensor) and t.ndim:
        t._read_only = MayAlias(why, resolve)
    return t


# the condition under which the statements being traced run: inside a branch of an `if` on array values, whose
# both branches are traced (conditional_expressions.branches); assignments then change only where it holds
_GUARD: contextvars.ContextVar[Node | None] = contextvars.ContextVar("tracejit_guard", default=None)


def current_guard() -> Node | None:
    """The 0-d bool under which assignments traced now take effect (None: always)."""
    return _GUARD.get()


@contextmanager
def guarded(condition: Node) -> Iterator[None]:
    """Trace the block as running only where `condition` (a 0-d bool) holds, inside any guard around it."""
    outer = _GUARD.get()
    token = _GUARD.set(condition if outer is None else build.binary(Op.AND, outer, condition))
    try:
        yield
    finally:
        _GUARD.reset(token)


_WATCHED: contextvars.ContextVar[frozenset | None] = contextvars.ContextVar("tracejit_watched", default=None)


class Made(Exception):
    """Not an error: a value `watching` looks for was made, at `site` (the user's "file:line")."""

    def __init__(self, node: Node, site: str):
        super().__init__(site)
        self.node, self.site = node, site


@contextmanager
def watching(nodes: frozenset) -> Iterator[None]:
    """Trace the block stopping (Made) where the user's code makes a traced value of one of `nodes` (graph nodes
    are hash-consed: a trace made again makes the same ones): where a value a device cannot hold comes from."""
    token = _WATCHED.set(nodes)
    try:
        yield
    finally:
        _WATCHED.reset(token)


_LOOP_BODY: contextvars.ContextVar[bool] = contextvars.ContextVar("tracejit_loop_body", default=False)


@contextmanager
def loop_body() -> Iterator[None]:
    """Trace the block as the body of a loop compiled as a loop (numpy/loops.py)."""
    token = _LOOP_BODY.set(True)
    try:
        yield
    finally:
        _LOOP_BODY.reset(token)


def in_loop_body() -> bool:
    """Whether the body of a loop compiled as a loop is being traced here."""
    return _LOOP_BODY.get()


def tracing() -> bool:
    """Whether a kernel's function is being traced here."""
    return _BUDGET.get() is not None


def living() -> list[Tensor]:
    """The Tensors of the trace running here that are still referenced (empty outside a kernel's trace)."""
    budget = _BUDGET.get()
    return [] if budget is None else list(budget[2])


def _over_budget(limit: int) -> None:
    raise TraceError(
        f"the trace grew past {limit:,} traced values, about half of this machine's free memory: "
        "a Python loop is traced step by step (a loop in a helper function, or one whose body uses its index "
        "as a Python number, such as a slice bound; TRACEJIT_DEBUG=1 says why per loop). Move the loop into "
        "the kernel function, write its body with whole-array operations (slices, np.where, reductions), or "
        "split the work into several calls of the kernel"
    )


def python_value(value, use: str):
    """`value` as a Python value where the code needs one (an axis, a count, a shape): a 0-d traced value made
    from constants or from the kernel's Python-number arguments becomes its number (python_numbers.py), lists
    and tuples item by item; anything else comes back as it is, for the caller to refuse."""
    if isinstance(value, (list, tuple)):
        return type(value)(python_value(v, use) for v in value)
    if isinstance(value, Tensor) and not value.shape:
        known = value._known(use)
        if known is not None:
            return known.reshape(()).item()
    return value


def _has_traced_slice(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, slice) and (isinstance(k.start, Tensor) or isinstance(k.stop, Tensor)) for k in keys)


def as_node(x) -> Node:
    """A graph node for a Tensor, Python scalar or NumPy scalar / 0-d array."""
    if isinstance(x, Tensor):
        return x._node
    if isinstance(x, Node):
        return x
    if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):  # strong, NEP 50
        return build.const(x.item(), check(x.dtype, "constant"), ())
    if isinstance(x, (bool, int, float)):  # after np.generic: np.float64 is a float, yet strong
        return build.const(x, weak_dtype(x), (), weak=True)
    if isinstance(x, np.ndarray):  # np.arange(n), np.tri(n), a captured table: see captured.py
        from tracejit.numpy.captured import array_node

        return array_node(x)
    if isinstance(x, (list, tuple)):
        return as_node(np.asarray(x))
    if isinstance(x, _frontend("selection").MaskedSelection):  # x[mask] as an array (data_sizes.py)
        return x.array()._node
    raise UnsupportedError(f"cannot use a value of type {type(x).__name__} in a traced computation")


def _selections_as_arrays(key):
    """An index holding x[mask] selections (y[x[m] > 0]), each as the array it is (selection.py)."""
    selection = _frontend("selection").MaskedSelection
    if isinstance(key, selection) or (type(key) is tuple and any(isinstance(k, selection) for k in key)):
        return _frontend("selection").arrays(key)
    return key


class Tensor:
    """A traced array. Shape, ndim and dtype are ordinary Python values; the data is symbolic.

    As in NumPy, a Tensor either owns its memory (a root: a kernel argument, or an array the kernel made)
    or is a view of a root (basic indexing, transpose, reshape, ...: see views.py). Assigning into either
    gives the root a new value (assign.py); a view's value is recomputed from its root's when read."""

    __slots__ = ("_value", "_base", "_steps", "_seen", "_strides", "_read_only", "_argument", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, node: Node):
        budget = _BUDGET.get()
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                _over_budget(budget[1])
            budget[2].add(self)
        watched = _WATCHED.get()
        if watched is not None and node in watched:
            file, line = user_frames.user_site()
            raise Made(node, f"{os.path.basename(file)}:{line}")
        self._value = node  # roots: the current value
        self._base: Tensor | None = None  # views: the root whose memory they show ...
        self._steps: tuple[views.Step, ...] = ()  # ... through these movement steps
        self._seen: tuple[Node, Node] | None = None  # views: (the root value last read, the view's value then)
        self._strides: tuple[int, ...] | None = None  # roots: element strides of the memory (None: C order)
        self._read_only: bool | MayAlias = False  # MayAlias: why it may not be assigned into
        self._argument: int | None = None  # roots that are array arguments of the kernel: their position

    @classmethod
    def argument(cls, node: Node, position: int, strides: tuple[int, ...], writeable: bool) -> Tensor:
        """The array passed as argument `position`: the kernel's writes into it reach the caller's array."""
        t = cls(node)
        t._strides, t._read_only, t._argument = tuple(strides), not writeable, position
        return t

    @property
    def _node(self) -> Node:
        base = self._base
        if base is None:
            alias = self._read_only
            if alias.__class__ is MayAlias and alias.through is not None:
                return alias.refresh(self)
            return self._value
        seen = self._seen
        if seen is None or seen[0] is not base._value:
            seen = self._seen = (base._value, views.apply(base._value, self._steps))
        return seen[1]

    def _root(self) -> Tensor:
        return self if self._base is None else self._base

    def _view(self, steps: tuple, contiguous_only: bool = False) -> Tensor:
        """This array seen through more movement steps: a view of its root where NumPy makes one (a reshape
        NumPy can only do by copying, and a ravel of a non-contiguous array, give a new array instead)."""
        root, steps = self._root(), self._steps + steps
        strides = views.strides_after(root.shape, root._strides or views.c_strides(root.shape), steps)
        shape = views.shapes(root.shape, steps)[-1]
        if strides is None or contiguous_only and not views.is_c_contiguous(shape, strides):
            return Tensor(views.apply(root._value, steps))
        view = Tensor(root._value)
        view._base, view._steps = root, steps
        view._read_only = root._read_only or views.read_only(steps)
        return view

    # -- static facts --
    @property
    def shape(self) -> tuple[int, ...]:
        return self._node.shape

    @shape.setter
    def shape(self, value) -> None:
        """NumPy's `x.shape = s`: for an array the kernel made, with no view of it alive, its value reshaped in place;
        for a view (`v = y[1:5]; v.shape = n`), the view's own steps, where NumPy can reshape it without
        a copy (else NumPy's AttributeError); anything else is refused (a kernel argument's shape is the caller's)."""
        value = python_value(value, "an array's shape")
        shape = (value,) if isinstance(value, int) else tuple(value)
        if self._base is None and self._argument is None and not any(t._base is self for t in living()):
            self._value = build.reshape(self._value, F.reshape(Tensor(self._value), shape).shape)
            return
        if self._base is not None:
            moved = view_call(F.reshape, self, shape)
            if moved._base is not self._base:
                raise AttributeError(
                    "Incompatible shape for in-place modification. Use `.reshape()` to make a copy with the desired "
                    "shape."
                )
            self._steps, self._seen = moved._steps, None
            return
        raise UnsupportedError(
            "x.shape = ... of a kernel argument or of an array with views is not supported: write x = x.reshape(...)"
        )

    @property
    def ndim(self) -> int:
        return len(self._node.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._node.dtype

    @property
    def size(self) -> int:
        return self._node.size

    @property
    def itemsize(self) -> int:
        return self._node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self._node.size * self._node.dtype.itemsize

    @property
    def T(self) -> Tensor:
        return view_call(F.transpose, self)

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"matrix transpose with ndim < 2 is undefined (shape {self.shape})")
        return view_call(_frontend("methods").swapaxes, self, -1, -2)

    @property
    def real(self) -> Tensor:
        return self  # tracejit's dtypes are all real

    @property
    def imag(self) -> Tensor:
        return Tensor(build.const(0, self.dtype, self.shape))

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype})"

    # -- what tracing cannot do --
    def _known(self, use: str):
        """The value while tracing where the kernel made it from constants (np.arange(n)[2]) or from its
        Python-number arguments alone (a plan then specialised on their values, python_numbers.py), else None;
        large arrays are not evaluated (a Python number comes from at most one element)."""
        if self.size != 1:
            return None
        value = constant_value(self._node)
        return value if value is not None else python_numbers.value_of(self._node, use)

    def __bool__(self):
        if self.size != 1:  # (NumPy's error, whatever the values)
            raise ValueError(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to check that an array is not "
                "empty."
                if self.size == 0
                else "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
            )
        value = self._known("a Python bool (`if`, `while`, `and`/`or`)")
        if value is not None:
            return bool(value)
        raise TraceError(
            "a traced value was used as a Python bool (in `if`, `while`, `and`/`or`, or bool()); "
            "its value is not known while tracing. Use tj.where(cond, a, b) (or np.where) to "
            "select values instead"
        )

    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedError("len() of unsized object (a 0-d traced value), as in NumPy")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise UnsupportedError("iteration over a 0-d array (a traced value), as in NumPy")
        if self.shape[0] > MAX_UNROLL:
            raise TraceError(
                f"iterating over a traced value unrolls one step per row; its first axis has "
                f"length {self.shape[0]}, over the limit of {MAX_UNROLL}. Use whole-array "
                "operations (broadcasting, reductions with axis=0) instead of a Python loop"
            )
        return (self[i] for i in range(self.shape[0]))

    def __index__(self):
        value = self._known("a Python integer (a range bound, a shape, an index)")
        if value is not None and not self.shape and value.dtype.kind in "iub":
            return int(value)
        raise TraceError(
            "a traced value was used as a Python integer (e.g. as an index or a range bound); "
            "its value is not known while tracing"
        )

    def __float__(self):
        value = self._known("float()")
        if value is not None:
            return float(value.reshape(()))
        raise TraceError(
            "float() of a traced value; its value is not known while tracing. Keep it an array "
            "(x.astype(np.float64)) or pass the number as a static argument"
        )

    def __int__(self):
        value = self._known("int()")
        if value is not None:
            return int(value.reshape(()))
        return self.__index__()

    def __hash__(self):
        return id(self)

    # -- methods (ndarray's; each calls the NumPy function of the same name, see _METHODS) --
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True) -> Tensor:
        if _complex_dtype(dtype):
            return _frontend("complex_values").astype(self, dtype)
        return F.astype(self, dtype)

    def reshape(self, *shape, order="C") -> Tensor:
        return view_call(
            F.reshape, self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, order
        )

    def transpose(self, *axes) -> Tensor:
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return view_call(F.transpose, self, axes or None)

    def clip(self, min=None, max=None, out=None, **kwargs):  # noqa: A002
        result = F.clip(self, kwargs.pop("a_min", min), kwargs.pop("a_max", max), **kwargs)
        return result if out is None else _frontend("assign").write_out(out, result, name="clip")

    def sort(self, axis=-1, kind=None, order=None, *, stable=None) -> None:
        """In place, as NumPy's: an input array sorted inside the kernel is sorted for the caller too."""
        _frontend("assign").setitem(self, Ellipsis, _frontend("sorting").sort(self, axis, kind, order))

    def flatten(self, order="C") -> Tensor:
        return _frontend("methods").ravel(self, order)

    def conj(self) -> Tensor:
        return self  # tracejit's dtypes are all real

    conjugate = conj

    def _known_selection(self, key):
        """x[mask] with a mask made from constants alone (x[np.arange(n) != k]): its count is known while
        tracing, so it is the NumPy mask it was before a trace; NumPy's value when x is constant too."""
        parts = key if isinstance(key, tuple) else (key,)
        known = [constant_value(k._node) if isinstance(k, Tensor) else k for k in parts]
        if any(k is None for k in known):
            return None
        known = tuple(known) if isinstance(key, tuple) else known[0]
        value = constant_value(self._node)
        return value[known] if value is not None else self[known]

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: say whether NumPy has it, so the user knows why
        value = constant_value(self._node) if not name.startswith("_") and name in _NDARRAY_NAMES else None
        if value is not None:  # made from constants alone (np.arange(5).tolist()): NumPy's, as before a trace
            return getattr(value, name)
        if not name.startswith("_") and name in _NDARRAY_NAMES:
            raise UnsupportedError(
                f"ndarray.{name} is not supported by tracejit on traced values; supported "
                f"methods and attributes: {', '.join(sorted(_SUPPORTED_NAMES))}"
            )
        raise AttributeError(f"'Tensor' object (a traced ndarray) has no attribute {name!r}")

    # -- operators --
    def __add__(self, o):
        self, o = _python_ints(self, o)
        return F.add(self, o)  # noqa: E704

    def __radd__(self, o):
        self, o = _python_ints(self, o)
        return F.add(o, self)  # noqa: E704

    def __sub__(self, o):
        self, o = _python_ints(self, o)
        return F.subtract(self, o)  # noqa: E704

    def __rsub__(self, o):
        self, o = _python_ints(self, o)
        return F.subtract(o, self)  # noqa: E704

    def __mul__(self, o):
        self, o = _python_ints(self, o)
        return F.multiply(self, o)  # noqa: E704

    def __rmul__(self, o):
        self, o = _python_ints(self, o)
        return F.multiply(o, self)  # noqa: E704

    def __truediv__(self, o):
        self, o = _python_ints(self, o)
        return F.true_divide(self, o)  # noqa: E704

    def __rtruediv__(self, o):
        self, o = _python_ints(self, o)
        return F.true_divide(o, self)  # noqa: E704

    def __floordiv__(self, o):
        self, o = _python_ints(self, o)
        return F.floor_divide(self, o)  # noqa: E704

    def __rfloordiv__(self, o):
        self, o = _python_ints(self, o)
        return F.floor_divide(o, self)  # noqa: E704

    def __mod__(self, o):
        self, o = _python_ints(self, o)
        return F.remainder(self, o)  # noqa: E704

    def __rmod__(self, o):
        self, o = _python_ints(self, o)
        return F.remainder(o, self)  # noqa: E704

    def __pow__(self, o):
        self, o = _python_ints(self, o)
        return F.power(self, o)  # noqa: E704

    def __rpow__(self, o):
        self, o = _python_ints(self, o)
        return F.power(o, self)  # noqa: E704

    def __matmul__(self, o):
        return _frontend("linalg").matmul(self, o)  # noqa: E704

    def __rmatmul__(self, o):
        return _frontend("linalg").matmul(o, self)  # noqa: E704

    def __and__(self, o):
        return F.bitwise_and(self, o)  # noqa: E704

    def __rand__(self, o):
        return F.bitwise_and(o, self)  # noqa: E704

    def __or__(self, o):
        return F.bitwise_or(self, o)  # noqa: E704

    def __ror__(self, o):
        return F.bitwise_or(o, self)  # noqa: E704

    def __xor__(self, o):
        return F.bitwise_xor(self, o)  # noqa: E704

    def __rxor__(self, o):
        return F.bitwise_xor(o, self)  # noqa: E704

    def __lt__(self, o):
        return F.less(self, o)  # noqa: E704

    def __le__(self, o):
        return F.less_equal(self, o)  # noqa: E704

    def __gt__(self, o):
        return F.less(o, self)  # noqa: E704

    def __ge__(self, o):
        return F.less_equal(o, self)  # noqa: E704

    def __eq__(self, o):
        return F.equal(self, o)  # noqa: E704

    def __ne__(self, o):
        return F.not_equal(self, o)  # noqa: E704

    def __lshift__(self, o):
        return _U().left_shift(self, o)  # noqa: E704

    def __rlshift__(self, o):
        return _U().left_shift(o, self)  # noqa: E704

    def __rshift__(self, o):
        return _U().right_shift(self, o)  # noqa: E704

    def __rrshift__(self, o):
        return _U().right_shift(o, self)  # noqa: E704

    def __divmod__(self, o):
        return F.floor_divide(self, o), F.remainder(self, o)  # noqa: E704

    def __rdivmod__(self, o):
        return F.floor_divide(o, self), F.remainder(o, self)  # noqa: E704

    def __neg__(self):
        (self,) = _python_ints(self)
        return F.negative(self)  # noqa: E704

    # augmented assignment (x += y, ...): see AUGMENTED below the class

    def __pos__(self):
        (self,) = _python_ints(self)
        return _U().positive(self)  # noqa: E704

    def __abs__(self):
        (self,) = _python_ints(self)
        return F.abs(self)  # noqa: E704

    def __invert__(self):
        (self,) = _python_ints(self)
        return F.invert(self)  # noqa: E704

    # -- indexing: basic indices give views, as in NumPy; an element (all indices ints) is a new scalar --
    def __getitem__(self, key) -> Tensor:
        if _defers(key) or isinstance(key, tuple) and len(key) == 1 and _defers(key[0]):  # x[cols], cols = c[a:b]
            return _frontend("bounded_slices").take(self, key[0] if isinstance(key, tuple) else key)
        key = _selections_as_arrays(key)
        if _has_traced_slice(key) and _frontend("bounded_slices").bounded(key):  # x[:i], i known when run
            return _frontend("bounded_slices").getitem(self, key)
        only = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        if isinstance(only, Tensor) and only.dtype == np.bool_ and only.ndim == 0:  # x[np.True_]: (1, *x.shape) or
            return self[None][only.reshape(1)]  # (0, *x.shape), as NumPy: a new axis that the mask selects, or not
        mask = _frontend("assign").traced_mask(key)
        if mask is not None:  # its shape depends on the data: see selection.py for what works
            known = self._known_selection(key)
            if known is not None:
                return known
            return _frontend("selection").MaskedSelection(mask, self._node, self)
        if _is_element(key, self.ndim):
            return Tensor(_index(self._node, key))
        result = view_call(lambda t: Tensor(_index(t._node, key)), self)
        picked = _traced_picks(key)
        if picked and isinstance(result, Tensor) and result.ndim:
            # NumPy's x[i] is a view, which writes through change x; this one is a copy (the index is traced)
            def resolve() -> bool:  # an index from the kernel's Python numbers: known once specialised on them
                use = "an index of a view that is assigned into (x[i][j] = v)"
                return all(python_numbers.value_of(k._node, use) is not None for k in picked)

            may_alias(result, _PICKED_VIEW, resolve)
            alias = result._read_only
            assert isinstance(alias, MayAlias)
            alias.through = (self, key)  # (row op= v writes through: assign.inplace)
            alias.seen = self._root()._value
        return result

    def __setitem__(self, key, value):
        _frontend("assign").setitem(self, _selections_as_arrays(key), value)

    def fill(self, value) -> None:
        _frontend("assign").fill(self, value)

    # -- NumPy protocols: existing NumPy code traces unchanged --
    def __array__(self, dtype=None, copy=None):
        value = constant_value(self._node)  # an array the kernel made from constants alone has a value
        if value is None:
            entry = user_frames.library_entry()
            if entry is not None:  # a library function of the user's code converts its argument
                from tracejit.numpy.host_calls import nearest

                raise TraceError(
                    f"{entry} converts a traced value to a NumPy array (np.asarray), which tracejit cannot trace "
                    f"into, and it is no NumPy function a fallback could run{nearest(entry)}; call it outside the "
                    "kernel on the kernel's result"
                )
            raise TraceError(
                "a traced value was converted to a NumPy array (np.asarray / np.array, stored into a "
                "NumPy array, a NumPy function tracejit does not implement, or an index into a NumPy "
                "array: table[i]); keep it symbolic inside the kernel. To index a NumPy array, pass it "
                "to the kernel as an argument or write tj.take(table, i)"
            )
        return value if dtype is None else value.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from tracejit.numpy.numpy_protocol import array_ufunc

        if any(_defers(x) for x in (*inputs, *(kwargs.get("out") or ()))):
            return NotImplemented
        if any(_complex_operand(x) for x in inputs) or _complex_dtype(kwargs.get("dtype")):
            return _frontend("complex_protocol").array_ufunc(ufunc, method, inputs, kwargs)
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from tracejit.numpy.numpy_protocol import array_function

        if any(getattr(t, "_tracejit_defer", False) for t in types):
            return NotImplemented
        if _holds_complex(args) or _holds_complex(kwargs):
            return _frontend("complex_protocol").array_function(func, args, kwargs)
        return array_function(func, args, kwargs)


_PICKED_VIEW = (
    "it is x[i] for an index i known only when the kernel runs: NumPy's x[i] is a view of x that writes change, "
    "which tracejit does not follow for such an index yet; write through one index instead (x[i, j] += v)"
)


def picked_view(t: Tensor) -> bool:
    """Whether t is x[i] for a traced index i (a copy where NumPy's is a view: _PICKED_VIEW)."""
    return isinstance(t._read_only, MayAlias) and t._read_only.why is _PICKED_VIEW


class PythonBool(Tensor):
    """A traced value that is a Python bool in the user's code: bool() or `not` of a value read from arrays
    (python_math.py), a bool argument of the kernel. Python's arithmetic on such values is int arithmetic
    (_python_ints); a weak bool alone cannot say so (NumPy's np.isfinite(1.5) is a NumPy bool)."""

    __slots__ = ()


def _python_ints(*operands):
    """Operands of Python's arithmetic operators where every one is a Python bool: as Python ints (weak int64),
    since Python's True + True is 2, -True is -1 and ~True is -2 (NumPy's bools would give True, an error,
    False)."""
    if all(isinstance(x, (bool, PythonBool)) for x in operands):
        if any(isinstance(x, Tensor) for x in operands):
            return tuple(
                Tensor(build.cast(as_node(x), np.dtype(np.int64), weak=True)) if isinstance(x, Tensor) else int(x)
                for x in operands
            )
    return operands


def _traced_picks(key) -> list[Tensor]:
    """The traced 0-d integers of a key that is basic indexing in NumPy (ints, slices, None, ...): its result
    is a view there; empty where the key holds none, or holds arrays or masks (a copy in NumPy too)."""
    picked = []
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, Tensor):
            if k.shape != () or k.dtype.kind not in "iu":
                return []
            picked.append(k)
        elif not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)) and not isinstance(k, bool)):
            return []
    return picked


def _defers(x) -> bool:
    """Whether x is a traced value of its own kind that computes with Tensors itself (numpy/bounded_slices.py):
    Tensor's operators and NumPy's protocols leave the operation to it."""
    return getattr(type(x), "_tracejit_defer", False)


def _complex_operand(x) -> bool:
    """A complex value that is no traced value of its own (a Python complex, a NumPy complex scalar or
    array): an operation of a Tensor with it is complex (complex_values.py)."""
    return isinstance(x, complex) or (isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind == "c")


def _complex_dtype(dtype) -> bool:
    if dtype is None:
        return False
    try:
        return np.dtype(dtype).kind == "c"
    except TypeError:
        return False


def _holds_complex(value) -> bool:
    """Whether a NumPy function's arguments hold a complex value or ask for a complex dtype."""
    if isinstance(value, dict):
        return _complex_dtype(value.get("dtype")) or any(_holds_complex(v) for k, v in value.items() if k != "dtype")
    if isinstance(value, (tuple, list)):
        return any(_holds_complex(v) for v in value)
    return _complex_operand(value)


# Tensor's operators by the NumPy ufunc they are (for a complex operand: complex_protocol.py)
_OPERATOR_UFUNCS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "matmul": np.matmul,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "lshift": np.left_shift,
    "rshift": np.right_shift,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _deferring(method):
    name = method.__name__[2:-2]
    reflected = name.startswith("r") and name[1:] in _OPERATOR_UFUNCS
    ufunc = _OPERATOR_UFUNCS[name[1:] if reflected else name]

    def operator(self, o):
        if _defers(o):
            return NotImplemented
        if _complex_operand(o):
            operands = (o, self) if reflected else (self, o)
            return _frontend("complex_protocol").array_ufunc(ufunc, "__call__", operands, {})
        return method(self, o)

    operator.__name__, operator.__doc__ = method.__name__, method.__doc__
    return operator


_BINARY = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift"}
for _name, _operator in list(vars(Tensor).items()):
    _op = _name[2:-2]
    if _name.startswith("__") and (_op in _BINARY | {"lt", "le", "gt", "ge", "eq", "ne"} or _op[1:] in _BINARY):
        setattr(Tensor, _name, _deferring(_operator))


def view_call(fn, a, *args, contiguous_only: bool = False, **kwargs):
    """fn(a, ...) for a NumPy function that returns views of its first argument: each result that is a
    moved (a chain of movement ops, found by running fn on a stand-in input) is a view of a's root, so
    writes through it reach a; any other result is a new array, computed from a's value."""
    if not isinstance(a, Tensor) or a._node.weak:
        return fn(a, *args, **kwargs)
    stand_in = views.probe(a.shape, a.dtype)
    probed = fn(Tensor(stand_in), *args, **kwargs)
    single = isinstance(probed, Tensor)
    found = [
        views.steps_from(r._node, stand_in) if isinstance(r, Tensor) else None for r in ([probed] if single else probed)
    ]
    chains = [steps for steps in found if steps is not None]
    if len(chains) < len(found):
        return fn(a, *args, **kwargs)
    results = [a._view(steps, contiguous_only) for steps in chains]
    return results[0] if single else type(probed)(results)


def _is_element(key, ndim: int) -> bool:
    """An index of ints only, one per axis: NumPy returns a scalar (a copy), not a view."""
    key = key if isinstance(key, tuple) else (key,)
    return len(key) == ndim and all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key)


def _index(node: Node, key) -> Node:
    key = key if isinstance(key, tuple) else (key,)
    indexing = _frontend("indexing")
    if any(indexing.is_array_index(k) for k in key):
        return indexing.advanced_index(node, key)
    if sum(k is Ellipsis for k in key) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(node.shape):
        raise ShapeError(
            f"too many indices: array of shape {node.shape} is {len(node.shape)}-dimensional, but {used} were indexed"
        )
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(node.shape) - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (len(node.shape) - used)
    spec, out_shape, dim = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = node.shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            n = len(range(start, stop, step))
            spec.append((start if n else 0, step, n))
            out_shape.append(n)
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k)
            if not -size <= i < size:
                raise IndexOutOfBoundsError(f"index {i} is out of bounds for axis {dim} with size {size}")
            spec.append((i % size, 1, 1))
        else:
            raise UnsupportedError(f"index of type {type(k).__name__} is not supported")
        dim += 1
    return build.reshape(build.slice_(node, tuple(spec)), tuple(out_shape))


def _U():
    """The ufunc module, which needs functions (and so this module) loaded first."""
    from tracejit.numpy import ufuncs

    return ufuncs


from tracejit.numpy import functions as F  # noqa: E402  (functions needs Tensor defined)

# ndarray methods that are the NumPy function of the same name with the array as first argument, by module.
# Resolved on call: those modules import this one, so they cannot be imported while it loads.
_METHODS = {
    "reductions": ("sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax", "argmin", "ptp"),
    "methods": ("ravel", "squeeze", "swapaxes", "round", "copy"),
    "linalg": ("dot",),
    "indexing": ("take", "searchsorted"),
    "movement": ("repeat",),
    "scans": ("cumsum", "cumprod"),
    "sorting": ("argsort",),
    "data_sizes": ("nonzero",),
    "numerical": ("diagonal", "trace"),
}


def _frontend(module: str):
    return importlib.import_module(f"{__package__}.{module}")


_VIEW_METHODS = {"squeeze": False, "swapaxes": False, "ravel": True}  # name -> a view only of contiguous data


def _method(module: str, name: str):
    def method(self, *args, **kwargs):
        fn = getattr(_frontend(module), name)
        out = kwargs.pop("out", None)
        if name in _VIEW_METHODS:
            return view_call(fn, self, *args, contiguous_only=_VIEW_METHODS[name], **kwargs)
        result = fn(self, *args, **kwargs)
        return result if out is None else _frontend("assign").write_out(out, result, "unsafe", name=name, exact=True)

    method.__name__ = name
    method.__doc__ = f"As ndarray.{name}: calls np.{name} on the traced value."
    return method


for _module, _names in _METHODS.items():
    for _name in _names:
        setattr(Tensor, _name, _method(_module, _name))


def _compress(self, condition, axis=None, out=None):
    """As ndarray.compress: np.compress(condition, x, axis)."""
    return _frontend("data_sizes").compress(condition, self, axis, out)


Tensor.compress = _compress  # type: ignore[attr-defined]


def _augmented(symbol: str, compute):
    def method(self, other):
        if _complex_operand(other) or type(other).__name__ == "ComplexTensor":
            raise UnsupportedError(
                f"x {symbol} y of a complex y into a real array x: NumPy cannot cast the complex result to "
                f"{self.dtype} with casting rule 'same_kind'; make x complex (x = x.astype(complex))"
            )
        return _frontend("assign").inplace(self, compute(self, other), symbol)

    method.__name__ = f"__i{AUGMENTED_NAMES[symbol]}__"
    method.__doc__ = f"x {symbol} y, computed into x's memory as NumPy does (see assign.inplace)."
    return method


# x op= y: the operator's function, by symbol; MaskedSelection (x[mask] op= y) uses the same table
AUGMENTED = {
    "+=": lambda a, b: F.add(a, b),
    "-=": lambda a, b: F.subtract(a, b),
    "*=": lambda a, b: F.multiply(a, b),
    "/=": lambda a, b: F.true_divide(a, b),
    "//=": lambda a, b: F.floor_divide(a, b),
    "%=": lambda a, b: F.remainder(a, b),
    "**=": lambda a, b: F.power(a, b),
    "&=": lambda a, b: F.bitwise_and(a, b),
    "|=": lambda a, b: F.bitwise_or(a, b),
    "^=": lambda a, b: F.bitwise_xor(a, b),
    "<<=": lambda a, b: _U().left_shift(a, b),
    ">>=": lambda a, b: _U().right_shift(a, b),
    "@=": lambda a, b: _frontend("linalg").matmul(a, b),
}
AUGMENTED_NAMES = {
    "+=": "add",
    "-=": "sub",
    "*=": "mul",
    "/=": "truediv",
    "//=": "floordiv",
    "%=": "mod",
    "**=": "pow",
    "&=": "and",
    "|=": "or",
    "^=": "xor",
    "<<=": "lshift",
    ">>=": "rshift",
    "@=": "matmul",
}
for _symbol, _compute in AUGMENTED.items():
    setattr(Tensor, f"__i{AUGMENTED_NAMES[_symbol]}__", _augmented(_symbol, _compute))

_NDARRAY_NAMES = frozenset(dir(np.ndarray))
_SUPPORTED_NAMES = frozenset(n for n in dir(Tensor) if not n.startswith("_")) & _NDARRAY_NAMES
