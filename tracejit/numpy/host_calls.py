"""Fallback to NumPy: a call tracejit does not compile (np.linalg.eig, np.fft.rfft, scipy.special.gamma, np.unwrap)
runs with NumPy, or the library called, on the host, in the middle of the kernel (issue 47).

While tracing, the call becomes HOST nodes (one per array it returns) whose sources are the traced values it is
passed; the graph is cut there as at a loop (frontend/staged.py), so what comes before and after still fuses and
compiles. The result's shapes and dtypes are learnt while tracing by calling the function on stand-in data of the
arguments' shapes and dtypes (an identity matrix, then random values: both must agree, else the shape depends on
the data, which is refused); each call checks that the real result has them. When the kernel runs, the values the
call needs are read to the host (on a GPU-API device: copied, after the kernels before it), the function is
called with them as NumPy arrays (a Python number as a Python number), and its results go on to the device.

Only what tracejit does not implement falls back: a call it implements never does, and an error of tracejit is
never hidden by one. `@tj.kernel(fallback=False)` or TRACEJIT_FALLBACK=0 refuses instead (a tj.UnsupportedError
at the user's line); the test suite runs that way. Each call site warns once (tj.FallbackWarning), with what the
call cost the first time it ran."""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tracejit.errors import FallbackWarning, UnsupportedError
from tracejit.ir.graph import Node, Op
from tracejit.numpy import data_sizes, python_numbers, user_frames
from tracejit.numpy.tensor import Tensor, as_node

_ALLOWED: contextvars.ContextVar[bool | None] = contextvars.ContextVar("tracejit_fallback", default=None)
_WARNED: set[str] = set()  # the call sites warned about in this process
_LOCK = threading.Lock()


# the nearest thing that compiles, for calls that have one
NEAREST = {
    "np.argpartition": "tj.topk(x, k) (the k largest and their positions, sorted)",
    "np.partition": "tj.topk(x, k) or np.sort",
    "scipy.special.expit": "tj.sigmoid(x)",
    "scipy.special.erf": "tj.erf(x)",
    "scipy.special.logsumexp": "tj.logsumexp(x, axis=...)",
    "scipy.special.softmax": "np.exp(x - tj.logsumexp(x, axis=..., keepdims=True))",
}


def nearest(name: str) -> str:
    """'; what compiles instead: ...' for a call that has a nearest thing (NEAREST), else ''."""
    found = NEAREST.get(name)
    return f"; what compiles instead: {found}" if found else ""


def enabled() -> bool:
    """Whether a call tracejit does not compile falls back to NumPy in the kernel being traced."""
    allowed = _ALLOWED.get()
    if allowed is None:
        return os.environ.get("TRACEJIT_FALLBACK", "1").strip().lower() not in ("0", "false", "no", "off")
    return allowed


@contextlib.contextmanager
def allowed(flag: bool | None):
    """Trace with fallback on (True), off (False), or as TRACEJIT_FALLBACK says (None)."""
    token = _ALLOWED.set(flag)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


class _Slot:
    """Where the j-th traced value goes in a call's arguments."""

    __slots__ = ("j",)

    def __init__(self, j: int):
        self.j = j


class _ComplexSlot(_Slot):
    """Where a complex traced value goes: the j-th traced value is its parts' array (shape + (2,)), viewed as
    `dtype` on the host."""

    __slots__ = ("dtype",)

    def __init__(self, j: int, dtype: np.dtype):
        super().__init__(j)
        self.dtype = dtype


class HostCall:
    """One call site's call, as the kernel runs it: the function, its arguments with slots for the traced values,
    and the shapes and dtypes of what it returns (the leaves of `structure`)."""

    def __init__(self, func: Callable, name: str, template, numbers: list[bool], leaves: list, structure, where: str):
        self.func, self.name, self.template, self.numbers = func, name, template, numbers
        self.leaves, self.structure, self.where = leaves, structure, where
        # leaves whose length (first axis) depends on the values (np.setdiff1d): the call also returns each one's
        # length, after the leaves, which data_sizes.py reads back and checks
        self.sized: tuple[int, ...] = ()
        self.site: tuple[str, int] = (where, 0)  # (the user's file, line): where the warning points
        self.library = False  # NumPy's LAPACK as tracejit's own way to compute it (LINALG_ON_HOST), not a fallback

    def __repr__(self) -> str:
        return f"{self.name}@{self.where}"

    @property
    def outputs(self) -> int:
        """How many values the call returns: its leaves, then the lengths of those sized by the data."""
        return len(self.leaves) + len(self.sized)

    def __call__(self, values: list) -> list[np.ndarray]:
        """The call on these values of its traced arguments (NumPy arrays, or Python numbers where the kernel had
        them), its results checked against what tracing learnt."""
        values = [_number(v) if n else v for v, n in zip(values, self.numbers)]
        args, kwargs = _fill(self.template, values)
        result = self.func(*args, **kwargs)
        out = []
        for k, (leaf, (shape, dtype)) in enumerate(zip(_leaves(result), self.leaves)):
            a = np.asarray(leaf)
            if dtype.kind == "c" and a.dtype == dtype and a.shape == shape:  # (as its parts: complex_values.py)
                out.append(np.ascontiguousarray(a)[..., None].view(a.real.dtype))
                continue
            if k in self.sized and a.ndim == len(shape) and a.shape[1:] == shape[1:] and a.dtype == dtype:
                out.append(a)  # (its length is checked where it is read: a SIZE node)
                continue
            if a.shape != shape or a.dtype != dtype:
                raise UnsupportedError(
                    f"{self.where}: {self.name} returned {a.dtype}{list(a.shape)} where tracing it on stand-in data "
                    f"gave {dtype}{list(shape)}: its result depends on the values in a way tracejit cannot follow "
                    "yet; compute it outside the kernel"
                )
            out.append(a)
        return out + [np.asarray(out[k].shape[0], np.int64) for k in self.sized]


# np.linalg's functions whose results' shapes and dtypes follow from their arguments': NumPy's own LAPACK calls on
# the host are how tracejit computes them (no warning on the numba device, where the values already are; on a
# GPU-API device they are copied there and back, and that warns). eig and eigvals are not among them: their dtype
# (real or complex) depends on the values.
LINALG_ON_HOST = frozenset(
    getattr(np.linalg, name)
    for name in (
        "solve inv det slogdet cholesky qr eigh eigvalsh svd lstsq pinv matrix_power matrix_rank cond multi_dot "
        "tensorsolve tensorinv"
    ).split()
)


def fallback(func: Callable, args: tuple, kwargs: dict, name: str, why: str, library: bool = False):
    """`func(*args, **kwargs)` with traced values among the arguments, as HOST nodes: the result's structure
    (an array, a tuple or NumPy's named result tuple of them) with a Tensor for each array. UnsupportedError
    where fallback is off, or where the result cannot be known from shapes and dtypes alone. `library`: the call
    is how tracejit computes it (LINALG_ON_HOST), not a fallback: made whether or not fallback is on."""
    site = user_frames.user_site()
    where = f"{os.path.basename(site[0])}:{site[1]}"
    if not library and not enabled():
        raise UnsupportedError(
            f"{name} is not supported by tracejit ({why}){nearest(name)}; with fallback on (the "
            "default, TRACEJIT_FALLBACK=1) it would run with NumPy on the host in the middle of the kernel. What "
            "compiles: docs/reference/numpy-api.md"
        )
    traced: list[Tensor] = []
    template = _template((args, kwargs), traced, f"an argument of {name}")
    numbers = [t._node.weak and t.shape == () for t in traced]
    result, varying = _stand_in_result(func, template, traced, numbers, name, where)
    leaves = []
    for k, leaf in enumerate(_leaves(result)):
        a = np.asarray(leaf)
        if a.dtype.kind not in "biufc" or (a.dtype.kind == "c" and (a.dtype not in _PARTS or varying[k])):
            raise UnsupportedError(
                f"{name} returns {a.dtype}{' of a length the values decide' if a.dtype.kind == 'c' else ''}, which "
                "tracejit cannot hold; compute it outside the kernel"
            )
        leaves.append((a.shape, a.dtype))
    call = HostCall(func, name, template, numbers, leaves, _structure(result), where)
    call.site, call.library = site, library
    call.sized = tuple(k for k, v in enumerate(varying) if v)
    srcs = tuple(as_node(t) for t in traced)
    nodes = []
    for k, (shape, dtype) in enumerate(leaves):
        if dtype.kind == "c":  # (its parts' array: a real array of shape + (2,))
            nodes.append(Node.make(Op.HOST, _PARTS[dtype], shape + (2,), srcs, (call, k)))
            continue
        if k not in call.sized:
            nodes.append(Node.make(Op.HOST, dtype, shape, srcs, (call, k)))
            continue
        # a length the values decide: read back when it runs, as a selection's count (data_sizes.py)
        length = Node.make(Op.HOST, np.int64, (), srcs, (call, len(leaves) + call.sized.index(k)))

        def made(n: int, k=k, shape=shape, dtype=dtype) -> Node:
            call.leaves[k] = ((n, *shape[1:]), dtype)
            return Node.make(Op.HOST, dtype, (n, *shape[1:]), srcs, (call, k))

        nodes.append(data_sizes.sized_by(length, made, f"{name}'s result", where))
    results = [
        _complex().argument(Tensor(n), "array") if dtype.kind == "c" else Tensor(n)
        for n, (_, dtype) in zip(nodes, leaves)
    ]
    return _rebuild(call.structure, results)


_PARTS = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def _complex():
    from tracejit.numpy import complex_values

    return complex_values


def _stand_in_result(func, template, traced: list[Tensor], numbers: list[bool], name: str, where: str):
    """The call on stand-in data three times (an identity matrix along the last two axes, random values, then
    0, 1, 2, ... in order): the first result, where all agree on shapes and dtypes but perhaps the length of a leaf
    of at least one axis (its first: np.setdiff1d's), and per leaf whether that length varied (it is then read
    back when the kernel runs, as a selection's count)."""
    rng = np.random.default_rng(0)
    results: list = []
    for kind in ("eye", "random", "range"):
        values = [_stand_in(t.shape, t.dtype, kind, rng, n) for t, n in zip(traced, numbers)]
        args, kwargs = _fill(template, values)
        before = [np.copy(v) if isinstance(v, np.ndarray) else v for v in values]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = func(*args, **kwargs)
        except Exception as e:  # (the function's own error on this data: try the next, else say it)
            if kind == "range" and not results:
                raise UnsupportedError(
                    f"{name} is not supported by tracejit, and falling back to NumPy needs its result's "
                    f"shapes and dtypes, which calling it on stand-in data of the arguments' shapes could not "
                    f"give ({type(e).__name__}: {e}); compute it outside the kernel"
                ) from None
            continue
        changed = any(
            isinstance(b, np.ndarray) and not np.array_equal(b, v, equal_nan=True) for b, v in zip(before, values)
        )
        if changed or result is None:
            raise UnsupportedError(
                f"{name} is not supported by tracejit, and it works in place on its arguments, which a "
                "fallback to NumPy (on copies of the values) cannot do; write the update with indexing and "
                "assignment, or do it outside the kernel"
            )
        results.append(result)
    described = [[(np.shape(x), np.asarray(x).dtype) for x in _leaves(r)] for r in results]
    varying = [False] * len(described[0])
    if any(d != described[0] for d in described[1:]):
        lengths_only = all(len(d) == len(described[0]) for d in described) and all(
            da == db and (sa == sb or len(sa) == len(sb) >= 1 and sa[1:] == sb[1:])
            for d in described[1:]
            for (sa, da), (sb, db) in zip(described[0], d)
        )
        if not lengths_only:
            raise UnsupportedError(
                f"{name} is not supported by tracejit, and its result's shape or dtype depends on the values "
                "(not only on the arguments' shapes and dtypes) in a way other than its length, which a fallback to "
                "NumPy cannot follow yet; compute it outside the kernel"
            )
        varying = [any(d[k][0] != described[0][k][0] for d in described[1:]) for k in range(len(described[0]))]
    return results[0], varying


def _stand_in(shape, dtype, kind: str, rng, number: bool):
    if number:
        return {"b": True, "f": 1.0}.get(dtype.kind, 1)
    if kind == "eye" and len(shape) >= 2:
        return np.broadcast_to(np.eye(shape[-2], shape[-1], dtype=dtype), shape).copy()
    if kind == "eye":
        return np.ones(shape, dtype)
    if kind == "range":  # (distinct values in order, from 0: what a set operation or a trim sees differently)
        return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 3, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _template(value, traced: list[Tensor], use: str):
    """`value` (nested tuples, lists and dicts) with each traced value a _Slot, gathered into `traced`. A Python
    number made from the kernel's Python-number arguments alone is that number (the kernel is specialised on
    them, numpy/python_numbers.py): it may set the result's shape (np.tile(x, n))."""
    if isinstance(value, _complex().ComplexTensor):
        traced.append(value.parts_array())
        return _ComplexSlot(len(traced) - 1, value.dtype)
    if isinstance(value, Tensor):
        node = value._node
        if node.weak and node.shape == ():
            known = python_numbers.value_of(node, use)
            if known is not None:
                return np.asarray(known).reshape(()).item()
        traced.append(value)
        return _Slot(len(traced) - 1)
    if isinstance(value, (tuple, list)):
        return type(value)(_template(v, traced, use) for v in value)
    if isinstance(value, dict):
        return {k: _template(v, traced, use) for k, v in value.items()}
    return value


def _fill(template, values: list):
    """The (args, kwargs) of a template, each slot given its value. (A function of the module, not a closure that
    calls itself: that is a reference cycle, which kept the values, arrays of megabytes, until Python's garbage
    collector ran.)"""
    if isinstance(template, _ComplexSlot):
        return np.ascontiguousarray(values[template.j]).view(template.dtype)[..., 0]
    if isinstance(template, _Slot):
        return values[template.j]
    if isinstance(template, (tuple, list)):
        return type(template)(_fill(v, values) for v in template)
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    return template


def _leaves(result) -> list:
    """The arrays of a result: itself, or the items of a tuple (NumPy's named result tuples too)."""
    return list(result) if isinstance(result, tuple) else [result]


def _structure(result) -> Any:
    """How to make a result again from its leaves: None (one array), else the tuple type (a named one: its class)."""
    return type(result) if isinstance(result, tuple) else None


def _rebuild(structure, leaves: list):
    if structure is None:
        return leaves[0]
    return structure(*leaves) if structure is not tuple else tuple(leaves)


def _number(value):
    """A Python number the kernel had as one (read from 0-d memory where the kernel computed it)."""
    a = np.asarray(value)
    return a.reshape(()).item()


def warn_once(call: HostCall, seconds: float, device: str, copied: bool) -> None:
    """tj.FallbackWarning for the call's site, the first time it ran in this process (`seconds`: its cost, the
    copies of its values to the host and back included, where `copied`: a GPU-API device's). A library call
    (LINALG_ON_HOST) warns only where its values were copied."""
    if call.library and not copied:
        return
    with _LOCK:
        if call.where in _WARNED:
            return
        _WARNED.add(call.where)
    path, line = call.site
    if call.library:
        warnings.warn_explicit(
            f"{call.where}: {call.name} runs on the host (NumPy's LAPACK): on {device} its values were copied there "
            f"and its results back ({seconds * 1e3:.2f} ms the first time); generated kernels for it on GPU-API "
            "devices are not built yet",
            FallbackWarning,
            path,
            line,
        )
        return
    warnings.warn_explicit(
        f"{call.where}: {call.name} is not compiled by tracejit: it ran with NumPy on the host in the middle of the "
        f"kernel ({seconds * 1e3:.2f} ms the first time, its values' copies to the host and back included); "
        f"the compiled parts before and after it still fuse{nearest(call.name)}. @tj.kernel(fallback=False) "
        "refuses instead",
        FallbackWarning,
        path,
        line,
    )
