"""Loops in a kernel function compiled as loops: the body is traced once, its index and the values it carries
from one step to the next standing in as inputs, and the kernels of that one trace run once per step when the
kernel is called (frontend/staged.py runs them). A `for i in range(n)` of 10 or 10,000 steps compiles the same
kernels, in the same time.

The function is compiled again from its source (source_rewrite.py does the rewriting): each
`for <name> in range(...)` (or numba's `prange`) and each `while <test>` whose body neither breaks, continues,
returns nor yields becomes a function of the names its body binds, and a call of `for_range` or `while_true`.
What the body changes is found as it is traced:
- the names it binds (`u = u + dt * f`, `err = np.abs(d).max()`): carried, each step's value the next one's;
- the arrays it assigns into, through any name or view (`u[1:-1] = ...`, a helper that updates its argument):
  every array alive when the loop starts stands in as an input while the body is traced, and those that took
  a new value are carried too (their values after the loop are the loop's, as NumPy's arrays would be);
- everything else the body reads and does not change (arguments, arrays computed before the loop, values
  computed from them in the body) is computed once, before the loop.

A loop is traced step by step instead (as Python runs it, what tracejit did before) where that is the only way:
its steps are known and few (at most UNROLL: they fuse) and its body holds no loop compiled as a loop (found by
tracing it once), or its body uses the index as a Python number (a slice bound `A[i, :i]`, a shape), changes the
dtype or shape of what it carries from one step to the next after the first, draws random numbers, or carries
Python lists, dicts or objects. TRACEJIT_DEBUG=1 says why, per loop.
A loop whose bounds (or `while` test) are read from arrays has no such fallback: it is compiled, or refused with
the reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracejit.errors import AssignmentError, TracejitError, UnsupportedError
from tracejit.ir import build, element_loops
from tracejit.ir.evaluate import constant_value
from tracejit.ir.faulting import recorded
from tracejit.ir.graph import Node, Op, replace, toposort
from tracejit.ir.simplify import simplify
from tracejit.numpy import complex_values, int_comparisons, loop_promotion, python_numbers, random_draws
from tracejit.numpy.allocation import NDIndex
from tracejit.numpy.complex_values import ComplexTensor
from tracejit.numpy.conditional_expressions import UNDEFINED, PartlyBound
from tracejit.numpy.tensor import MayAlias, Tensor, as_node, living, loop_body, may_alias, python_value, tracing

_LOG = logging.getLogger("tracejit.compile")  # TRACEJIT_DEBUG=1 (runtime/debug.py; this layer does not import it)


def log(level: int, message: str) -> None:
    if _LOG.isEnabledFor(logging.DEBUG):
        _LOG.debug(message, stacklevel=2)


UNROLL = 4  # a loop of at most this many steps, known while tracing, is traced step by step (its steps fuse), unless
# a loop in its body is compiled as a loop
INDEX = np.dtype(np.int64)  # a `range` index is a Python int: weak int64, as the kernel's int arguments

_serial = itertools.count()
# False while a function is traced again with its loops step by step (a device could not compile their bodies)
_COMPILING: contextvars.ContextVar[bool] = contextvars.ContextVar("tracejit_loops_compiled", default=True)


@contextlib.contextmanager
def step_by_step() -> Iterator[None]:
    """Trace every loop step by step in this block, as tracejit did before it compiled loops."""
    token = _COMPILING.set(False)
    try:
        yield
    finally:
        _COMPILING.reset(token)


@dataclass(frozen=True, eq=False)
class LoopInput:
    """The INPUT arg of a value a loop body reads: position `position` of loop `loop`'s inputs."""

    loop: int
    position: int

    def __repr__(self) -> str:
        return f"loop{self.loop}.in{self.position}"


class Loop:
    """A loop compiled as a loop: the graph of its body, and how it runs (frontend/staged.py).

    A LOOP node's sources are: for a `for`, the bounds not known while tracing (`bounds` has None in their
    places); for a `while`, its first test; then the first value of each carried value; then each value the body
    reads and does not change. `inputs` are the body's INPUT nodes in that order (a `for` has its index first,
    where the bounds are): the index, each carried value, each unchanged one. `outputs` are each carried
    value's next value, then (a `while`) the test of those."""

    def __init__(self, kind: str, bounds, inputs: list[Node], outputs: list[Node], carried: int, where: str):
        self.kind, self.bounds, self.inputs, self.outputs = kind, bounds, inputs, outputs
        self.carried, self.where = carried, where
        self.until: int | None = None  # a carried bool that stops the loop once set (a `break`)

    @property
    def heads(self) -> int:
        """How many of a LOOP node's sources come before the carried values' first values."""
        return 1 if self.kind == "while" else sum(b is None for b in self.bounds)

    def __repr__(self) -> str:
        return f"{self.kind}@{self.where}"


class _Unroll(Exception):
    """This loop cannot be compiled as a loop (the message says why); it is traced step by step."""


class _Rebound(Exception):
    """Names the body rebinds that were passed as they are: traced again with stand-ins for them."""

    def __init__(self, positions: set[int]):
        self.positions = positions


class _Changing(Exception):
    """Carried values whose dtype or shape the body changes: {position: (first value, the body's)}; `stand_ins`:
    their stand-ins in the body traced, `reached`: every value that trace computed (None: not all are nodes)."""

    def __init__(
        self,
        changes: dict[int, tuple[Any, Any]],
        names: tuple[str, ...],
        stand_ins: dict[int, Node] | None = None,
        reached: list[Node] | None = None,
    ):
        self.changes, self.stand_ins, self.reached = changes, stand_ins or {}, reached
        described = ", ".join(f"`{names[j]}` ({_describe(a)} -> {_describe(b)})" for j, (a, b) in changes.items())
        super().__init__(f"the loop changes the dtype or shape of {described} from one step to the next")


def _describe(value) -> str:
    if type(value) in (bool, int, float):
        return f"a Python {type(value).__name__}"
    node = as_node(value)
    return f"{node.dtype}{list(node.shape)}"


# -- the calls the rewritten source makes ---------------------------------------------------------------------


def for_range(
    args: tuple,
    body: Callable,
    init: tuple,
    names: tuple[str, ...],
    target,
    stored: tuple,
    where: str,
    until: str | None = None,
):
    """`for i in range(*args): names = body(i, *names)`; returns the names' values after the loop, then the
    index's. `target`: the index's value before the loop (UNDEFINED if none; None: nothing reads it after the
    loop, so it need not be computed); `stored`: functions giving the
    objects the body assigns into by subscript (`x[...] = `), `where`: "file:line" of the `for`; `until`: the
    name of a flag the body sets to stop the loop after that step (a `break`, source_rewrite.py)."""
    bounds = [_peek(a) for a in args]  # (a bound from the kernel's Python numbers stays a runtime value ...)
    for b in bounds:
        if isinstance(b, Tensor) and (b.shape != () or b.dtype.kind not in "iub"):
            raise TypeError(f"range() bounds must be integers, got {_describe(b)} (at {where})")
    known = [int(b) if not isinstance(b, Tensor) else _number(b) for b in bounds]
    if len(known) == 3 and known[2] == 0:
        raise ValueError("range() arg 3 must not be zero")
    steps = range(*known) if None not in known else None  # type: ignore[arg-type]
    values = list(init)
    stop = names.index(until) if until is not None else None
    # few steps: traced step by step (they fuse), unless a loop in the body is compiled as a loop (tried below)
    few = steps is not None and len(steps) <= UNROLL
    tried = few and steps is not None and len(steps) > 1 and _has_loops(body)
    if few and not tried or not _COMPILING.get() or not tracing():  # (... unless step by step)
        return _unrolled(range(*_numbers(args)), body, values, target, stop)
    values = [_python_complex(v) for v in values]
    reason = _refused(values, names, stored)
    if reason is None:
        start, stop_, step = _three(bounds)
        try:
            if any(isinstance(v, ComplexTensor) for v in values):  # (carried as their parts)
                return _complex_names(
                    lambda b, v, n=names: _compiled_for(start, stop_, step, b, v, n, target, where, args, stop, few),
                    body,
                    values,
                    names,
                )
            return _compiled_for(start, stop_, step, body, values, names, target, where, args, stop, few)
        except AssignmentError as e:
            if not few:
                raise  # (the code's own error, whatever the index: step by step it raises it too)
            reason = f"its body, traced once with the index unknown, stops: {e}"  # (a loop inside on the index)
        except _Unroll as e:
            reason = str(e)
        except TracejitError as e:
            reason = f"its body, traced once with the index unknown, stops: {e}"
        except (TypeError, ValueError, IndexError, AttributeError, KeyError, NameError) as e:
            reason = f"its body, traced once with the index unknown, raises {type(e).__name__}: {e}"
    if steps is not None:
        bounds_now = range(*_numbers(args))  # (the bounds' Python numbers: the plan is specialised on them)
        if len(steps) > UNROLL:  # (a trace with numbers to specialise on goes again first: the loop may compile)
            python_numbers.retrace_pending()
        log(1, f"{where}: loop traced step by step ({len(steps)} steps): {reason}")
        return _unrolled(bounds_now, body, values, target, stop)
    raise UnsupportedError(
        f"{where}: this loop's bounds are read from arrays, so it must run as a compiled loop, and it cannot: {reason}"
    )


def for_each(iterable, body: Callable, init: tuple, names: tuple[str, ...], stored: tuple, where: str):
    """`for item in iterable: names = body(position, *names)`, the body reading its item with item_at; returns
    the names' values after the loop. Over a traced array's first axis (`for row in A`), enumerate or zip of
    such arrays and ranges (as enumerate_ and zip_ give them), the positions are `range(len)`, compiled as
    for_range compiles it; any other iterable Python iterates, its steps traced one by one."""
    seq = positional(iterable)
    if seq is None:
        values = list(init)
        for item in iterable:
            values = list(body(_Given(item), *values))
        return (*values, None)
    return for_range((seq[0],), body, init, names, None, stored, where)


@dataclass(frozen=True)
class _Given:
    """An item Python's iteration gave (for_each's loops over other iterables)."""

    item: Any


def item_at(iterable, position):
    """A `for` over an iterable: the item at `position` (of for_each's range), read from the iterable as it is
    at this step (NumPy's iterator reads the array's current values), or the item Python's iteration gave."""
    if isinstance(position, _Given):
        return position.item
    seq = positional(iterable)
    assert seq is not None, iterable  # (for_each gave a position: the iterable is one)
    return seq[1](position)


def positional(iterable) -> tuple[int, Callable] | None:
    """(length, item(i)) where `iterable`'s items can be read by a position the loop computes, else None."""
    if isinstance(iterable, Tensor) and iterable.ndim >= 1:
        return iterable.shape[0], iterable.__getitem__
    if isinstance(iterable, _Positional):
        return iterable.length, iterable.item
    if isinstance(iterable, NDIndex) and not iterable.started:  # `for pos in np.ndindex(shape)`: C order
        return int(np.prod(iterable.shape, dtype=np.int64)), _c_order(iterable.shape)
    return None


def _c_order(shape: tuple[int, ...]) -> Callable:
    """The index tuple of position i of an array of `shape` in C order."""
    strides = [int(np.prod(shape[a + 1 :], dtype=np.int64)) for a in range(len(shape))]
    return lambda i: tuple(i // stride % n if a else i // stride for a, (stride, n) in enumerate(zip(strides, shape)))


def ndenumerate_(arr) -> _Positional | None:
    """np.ndenumerate(arr) as a `for` over it sees it, where arr is a traced array: (index, element) by position in
    C order, each element read at its step (NumPy's iterator reads the array's current values); else None."""
    if not isinstance(arr, (Tensor, ComplexTensor)):
        return None
    index = _c_order(arr.shape)
    return _Positional(int(np.prod(arr.shape, dtype=np.int64)), lambda i: (index(i), arr[index(i)]))


def length(iterable) -> int:
    """The number of positions of an iterable `positional` reads by position."""
    seq = positional(iterable)
    assert seq is not None, iterable  # (source_rewrite.py asks only where it is one)
    return seq[0]


@dataclass(frozen=True)
class _Positional:
    """enumerate(x) or zip(x, y, ...) of traced arrays (and ranges), as for_each reads them by position."""

    length: int
    item: Callable

    def __iter__(self):  # (a loop Python runs itself: its items in order, each read when it is reached)
        return (self.item(i) for i in range(self.length))


def enumerate_(iterable, start=0):
    """enumerate() as a `for` over it in a kernel sees it (source_rewrite.py): by position where `iterable` is a
    traced array, else Python's."""
    seq = positional(iterable)
    if seq is None or not isinstance(start, int):
        return enumerate(iterable, start)
    length, item = seq
    return _Positional(length, lambda i: (i + start, item(i)))


def zip_(*iterables, **options):
    """zip() as a `for` over it in a kernel sees it: by position where one of its iterables is a traced array and
    the others are such arrays or ranges, else Python's."""
    parts = [positional(x) or _range_positional(x) for x in iterables]
    if options or not parts or None in parts or not any(isinstance(x, (Tensor, _Positional)) for x in iterables):
        return zip(*iterables, **options)
    found = [p for p in parts if p is not None]
    return _Positional(min(n for n, _ in found), lambda i: tuple(item(i) for _, item in found))


def _range_positional(r) -> tuple[int, Callable] | None:
    if not isinstance(r, range):
        return None
    return len(r), lambda i: r.start + i * r.step


def while_true(test: Callable, body: Callable, init: tuple, names: tuple[str, ...], stored: tuple, where: str):
    """`while test(*names): names = body(*names)`; returns the names' values after the loop. Steps whose test is
    a Python value run as Python runs them; from the first test read from arrays, the rest is one compiled loop
    that reads its test back after each step."""
    values = list(init)
    while True:
        decided = test(*values)
        if isinstance(decided, Tensor):
            # (traced step by step, a test read from arrays is the error it was before loops were compiled)
            compiling = _COMPILING.get() and tracing()
            decided = python_value(decided, "a `while` test") if compiling else bool(decided)
        if isinstance(decided, Tensor):
            break
        if not decided:
            return tuple(values)
        values = list(body(*values))
    if decided.shape != ():
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous (a `while` test must be a "
            "single value)"
        )
    reason = _refused(values, names, stored)
    if reason is None:
        try:
            return _compiled_while(decided, test, body, values, names, where)
        except AssignmentError:
            raise
        except _Unroll as e:
            reason = str(e)
        except TracejitError as e:
            reason = f"its body, traced once, stops: {e}"
        except (TypeError, ValueError, IndexError, AttributeError, KeyError) as e:
            reason = f"its body, traced once, raises {type(e).__name__}: {e}"
    raise UnsupportedError(
        f"{where}: this `while` tests a value read from arrays, so it must run as a compiled loop, and it "
        f"cannot: {reason}"
    )


def _unrolled(steps: range, body: Callable, values: list, target, stop: int | None = None) -> tuple:
    for i in steps:
        if stop is not None and _stopped(values[stop]):
            break
        values = list(body(i, *values))
        target = i
    return (*values, target)


_LOOP_CALLS = frozenset({"__tracejit_for", "__tracejit_for_each", "__tracejit_while"})  # (source_rewrite.py's)


def _has_loops(body: Callable) -> bool:
    """Whether a loop body's own code (as source_rewrite.py wrote it) holds a loop it may compile as a loop."""
    code = getattr(body, "__code__", None)
    return code is not None and not _LOOP_CALLS.isdisjoint(code.co_names)


def _holds_compiled_loop(trace: _Trace) -> bool:
    """Whether the body traced once holds a loop compiled as a loop whatever the index: a `while`, or a `for`
    whose bounds do not come from the index (one that does might have few steps, traced step by step, once the
    index is known)."""
    outputs = [c[3] for c in trace.carried] + ([trace.test] if trace.test is not None else [])
    index = trace.inputs[0]
    for n in toposort(outputs):
        if n.op is Op.LOOP:
            loop = n.arg[0]
            if loop.kind == "while" or index not in toposort(list(n.srcs[: loop.heads])):
                return True
    return False


def _stopped(flag) -> bool:
    """Whether a loop's stop flag is set, where that is known while tracing (else the steps run, guarded)."""
    if isinstance(flag, Tensor):
        flag = python_value(flag, "a loop's break")
    return not isinstance(flag, Tensor) and bool(flag)


def _peek(value):
    """A range() bound as the loop takes it: a Python int, or a 0-d traced value (one made from the kernel's
    Python numbers included: the compiled loop reads it when it runs, and the kernel is not specialised on it)."""
    if isinstance(value, Tensor):
        known = constant_value(value._node) if value.shape == () else None
        return value if known is None else int(known)
    return operator.index(value) if not isinstance(value, (bool, int)) else int(value)


def _number(value: Tensor) -> int | None:
    """The value of a bound made from the kernel's Python numbers, without specialising the kernel on them."""
    known = python_numbers.value_of(value._node, "a range bound", note=False) if value.shape == () else None
    return None if known is None else int(known)


def _numbers(args: tuple) -> list[int]:
    """The bounds as numbers: the kernel is specialised on the Python numbers they are made from."""
    out = []
    for a in args:
        v = python_value(a, "a range bound") if isinstance(a, Tensor) else a
        if isinstance(v, Tensor):
            raise UnsupportedError("a range() bound read from arrays, in a loop traced step by step")
        out.append(operator.index(v))
    return out


def _span(start, stop, step) -> tuple[int, int] | None:
    """The least and greatest values a `for`'s index takes, where its bounds are known while tracing."""
    if any(isinstance(b, Tensor) for b in (start, stop, step)):
        return None
    return index_span(int(start), int(stop), int(step))


def index_span(start: int, stop: int, step: int) -> tuple[int, int] | None:
    """The least and greatest values of range(start, stop, step), None where it is empty (or step is 0)."""
    steps = range(start, stop, step) if step else range(0)
    return (min(steps[0], steps[-1]), max(steps[0], steps[-1])) if steps else None


def _three(bounds: list) -> tuple:
    if len(bounds) == 1:
        return 0, bounds[0], 1
    if len(bounds) == 2:
        return bounds[0], bounds[1], 1
    return tuple(bounds)


def _python_complex(value):
    """A Python complex a loop carries (`z = 0j` before `z = z * z + c`) as a traced weak complex128 value, whose
    parts are carried as any complex name's (_complex_names); anything else as it is."""
    if type(value) is not complex:
        return value
    re, im = (Tensor(build.const(part, np.float64, (), weak=True)) for part in (value.real, value.imag))
    return ComplexTensor(re, im)


def _refused(values: list, names: tuple[str, ...], stored: tuple) -> str | None:
    """Why a loop carrying these values (and assigning into the objects `stored` gives) must be traced step by
    step, or None."""
    for name, v in zip(names, values):
        if isinstance(v, PartlyBound):
            return f"`{name}` is bound in only one branch of an `if` before it"
        if not (v is UNDEFINED or isinstance(v, (Tensor, ComplexTensor, bool, int, float, np.ndarray, np.generic))):
            return f"it binds `{name}`, a {type(v).__name__} (only arrays and numbers are carried by a compiled loop)"
    for get in stored:
        try:
            target = get()
        except NameError:
            continue
        if not isinstance(target, (Tensor, ComplexTensor)):
            return f"it assigns into a {type(target).__name__} (only arrays are carried by a compiled loop)"
    return None


def _complex_names(run: Callable, body: Callable, values: list, names: tuple[str, ...]):
    """run(body, values, names) (a compiled loop) for names bound to complex values (complex_values.py): a 0-d
    one (Mandelbrot's `z`) carried as two real names, its real part in its place and its imaginary part after
    the loop's names, so that a loop of numbers stays a loop over elements; the others as their parts' arrays
    (shape + (2,)). The body sees ComplexTensors again, and so does the code after the loop. A name that becomes
    complex in a step is carried as its parts' array from then on (the loop peels that step first). Assigning
    into a complex name inside the loop stops this compile (the stand-in changes): the loop is then traced step
    by step on the values themselves."""
    scalars = [j for j, v in enumerate(values) if isinstance(v, ComplexTensor) and v.shape == ()]
    if scalars:
        try:
            return _complex_scalars(run, body, values, names, scalars)
        except _NewComplex:
            pass  # (a real name became complex in a step: carried as its parts' array below)
    positions = {j for j, v in enumerate(values) if isinstance(v, ComplexTensor)}

    def flat(vals) -> list:
        out = []
        for j, v in enumerate(vals):
            if isinstance(v, ComplexTensor):
                positions.add(j)
                v = v.parts_array()
            out.append(v)
        return out

    def complex_again(vals) -> list:
        return [
            complex_values.argument(v, "array") if j in positions and isinstance(v, Tensor) else v
            for j, v in enumerate(vals)
        ]

    def parts_body(index, *vals):
        return tuple(flat(body(index, *complex_again(vals))))

    result = run(parts_body, flat(values), names)
    return (*complex_again(result[:-1]), result[-1])


class _NewComplex(Exception):
    """A loop body made a complex value of a name that was real before it (_complex_scalars cannot carry it)."""


def _complex_scalars(run: Callable, body: Callable, values: list, names: tuple[str, ...], scalars: list[int]):
    """_complex_names for the 0-d complex names at `scalars`: each carried as its real part in its place and its
    imaginary part after the other names."""
    n = len(values)
    arrays = {j for j, v in enumerate(values) if isinstance(v, ComplexTensor) and j not in scalars}

    def flat(vals) -> list:
        out, imaginary = [], []
        for j, v in enumerate(vals):
            if j in scalars:
                if not isinstance(v, ComplexTensor) or v.shape != ():
                    raise _Unroll(f"`{names[j]}` is complex before the loop and {_describe(v)} after a step")
                out.append(v.re)
                imaginary.append(v.im)
            elif isinstance(v, ComplexTensor):
                if j not in arrays:
                    raise _NewComplex
                out.append(v.parts_array())
            else:
                out.append(v)
        return out + imaginary

    def complex_again(vals) -> list:
        out = []
        for j, v in enumerate(vals[:n]):
            if j in scalars:
                v = ComplexTensor(v, vals[n + scalars.index(j)])
            elif j in arrays and isinstance(v, Tensor):
                v = complex_values.argument(v, "array")
            out.append(v)
        return out

    def parts_body(index, *vals):
        return tuple(flat(body(index, *complex_again(vals))))

    result = run(parts_body, flat(values), names + tuple(f"{names[j]}.imag" for j in scalars))
    return (*complex_again(result[:-1]), result[-1])


# -- tracing the body once ---------------------------------------------------------------------------------------


class _Trace:
    """The body traced once: the stand-ins, and what it changed."""

    def __init__(self, serial: int):
        self.serial = serial
        self.inputs: list[Node] = []  # the body's INPUT nodes so far (index, then carried, then ...)
        # (kind, what, its stand-in (None: first bound in the body), next value)
        self.carried: list[tuple[str, Any, Node | None, Node]] = []
        self.test: Node | None = None
        self.values: list = []  # the names' values before the loop
        self.names: tuple[str, ...] = ()
        self.aliased: set[int] = set()  # names a step may leave the array they were (an `if` on array values)
        self.before: dict[int, Node] = {}  # id of each array alive -> its value before the loop
        self.unchanged: dict[Node, Node] = {}  # stand-ins of the arrays the body left as they were -> their values
        self.partly: list[int] = []  # names first bound in the body, in one branch of an `if` on array values

    def stand_in(self, like: Node) -> Node:
        # (weak: a Python number, which only a 0-d value is; an array made from one by broadcasting is not)
        weak = like.weak and like.shape == ()
        node = build.input_(LoopInput(self.serial, len(self.inputs)), like.dtype, like.shape, weak=weak)  # type: ignore[arg-type]
        self.inputs.append(node)
        return node


def _trace_body(
    call: Callable, index: bool, values: list, names: tuple[str, ...], fresh: set[int], test=None, span=None
):
    """Run the body once on stand-ins: `call(*args)` with the index's stand-in first where `index`, then each
    name's value (a stand-in Tensor for the positions in `fresh` and for every non-array, else the object itself,
    so that assigning into it reaches every alias). Every array alive stands in for its value meanwhile."""
    trace = _Trace(next(_serial))
    trace.values, trace.names = values, names
    args: list[Any] = []
    if index:
        node = trace.stand_in(build.const(0, INDEX, (), weak=True))
        if span is not None:  # (bounds known while tracing: the values the index takes)
            int_comparisons.known_span(node, *span)
        args.append(Tensor(node))
    offset = len(args)
    name_inputs: dict[int, Node] = {}
    for j, v in enumerate(values):
        if v is UNDEFINED or (j not in fresh and isinstance(v, Tensor)):
            args.append(v)
            continue
        name_inputs[j] = trace.stand_in(as_node(v))
        args.append(Tensor(name_inputs[j]))
    made = {id(a) for j, a in enumerate(args) if j < offset or j - offset in name_inputs}  # (the stand-ins)
    alive = [t for t in living() if t._base is None and id(t) not in made]
    before = {id(t): t._value for t in alive}
    roots = [t for t in alive if not _known_scalar(t._value)]
    for t in roots:
        t._value = trace.stand_in(t._value)
    stand_ins = {id(t): t._value for t in roots}
    draws = random_draws.current_count()
    try:
        with recorded(), loop_body():  # (faults of the body are its kernels' own: not checks of the function)
            out = tuple(call(*args))
            if test is not None:
                trace.test = _test_node(test(*out))
        if random_draws.current_count() != draws:
            raise _Unroll("its body draws random numbers (each step would draw the same numbers)")
        after = {id(t): t._value for t in alive}
    finally:
        for t in alive:
            t._value = before[id(t)]
    if any(after[id(t)] is not before[id(t)] for t in alive if id(t) not in stand_ins):
        raise _Unroll("it assigns into a value made from the kernel's Python numbers")
    # names rebound to another object than the one passed: traced again with a stand-in for them
    rebound = {
        j for j, (v, o) in enumerate(zip(values, out)) if j not in name_inputs and v is not UNDEFINED and o is not v
    }
    if rebound:
        raise _Rebound(rebound)
    changes = {}
    for j, v in enumerate(values):
        o = out[j]
        if j not in name_inputs and v is not UNDEFINED:
            continue  # the object passed, perhaps assigned into: carried as an array below if it changed
        if v is UNDEFINED and o is UNDEFINED:
            continue
        if isinstance(o, PartlyBound):
            if v is not UNDEFINED:
                raise _Unroll(f"`{names[j]}` is bound in only one branch of an `if` on a value read from arrays")
            trace.partly.append(j)  # (`if a[i] > a[i + 1]: tmp = a[i]; ...`: each step's own, then only sometimes)
            continue
        if not isinstance(o, (Tensor, bool, int, float, np.ndarray, np.generic)):
            raise _Unroll(f"it binds `{names[j]}` to a {type(o).__name__} (only arrays and numbers are carried)")
        if v is UNDEFINED:  # first bound in the body: never read before it is bound in a step
            trace.carried.append(("name", j, None, as_node(o)))
            continue
        stand_in = name_inputs[j]
        if isinstance(v, Tensor) and args[offset + j]._value is not stand_in:
            raise _Unroll(
                f"it assigns into `{names[j]}` and binds it again: which array that changes differs between steps"
            )
        nxt = as_node(o)
        if (nxt.dtype, nxt.shape, nxt.weak) != (stand_in.dtype, stand_in.shape, stand_in.weak):
            changes[j] = (v, o)
        if isinstance(o, Tensor) and isinstance(o._read_only, MayAlias):  # (a step may leave it as it was)
            trace.aliased.add(j)
        trace.carried.append(("name", j, stand_in, nxt))
    if changes:
        partly = any(isinstance(o, PartlyBound) for o in out)
        reached = [o._node for o in out if isinstance(o, Tensor)] + list(after.values())
        reached += [trace.test] if trace.test is not None else []
        raise _Changing(changes, names, {j: name_inputs[j] for j in changes}, None if partly else reached)
    rooted = {id(t) for t in roots}
    views = {id(t) for t in roots if _read_through(t, rooted)}
    for t in roots:
        if after[id(t)] is not stand_ins[id(t)] and id(t) not in views:
            trace.carried.append(("array", t, stand_ins[id(t)], after[id(t)]))
    trace.unchanged = {
        stand_ins[id(t)]: before[id(t)] for t in roots if after[id(t)] is stand_ins[id(t)] or id(t) in views
    }
    trace.before = before
    return trace


def _read_through(t: Tensor, rooted: set[int]) -> bool:
    """Whether t is row = x[i] (i traced) of an array x the loop carries if it changes: NumPy's row is a view,
    this one a copy read again from x wherever x changed (MayAlias.refresh), and each write into it is a write
    into x (assign.setitem): it is x's, not a value of its own to carry. (Carried, each step of an inner loop
    over row[j] would copy row.)"""
    alias = t._read_only
    return isinstance(alias, MayAlias) and alias.through is not None and id(alias.through[0]._root()) in rooted


def _known_scalar(node: Node) -> bool:
    """A 0-d value made from constants and the kernel's Python-number arguments: left as it is while the body is
    traced (code may need its number, python_numbers.py)."""
    if node.shape != ():
        return False
    for n in toposort([node]):
        if n.op is Op.LOOP or n.op is Op.INPUT and not (isinstance(n.arg, int) and n.weak and n.shape == ()):
            return False
    return True


def _test_node(value) -> Node:
    node = as_node(value)
    if node.shape != ():
        raise ValueError("The truth value of an array with more than one element is ambiguous (a `while` test)")
    return node if node.dtype == np.bool_ else build.cast(node, np.dtype(np.bool_))


def _trace_fixed(call: Callable, index: bool, values: list, names: tuple[str, ...], test=None, span=None):
    """_trace_body, again with stand-ins for the names it rebinds until none is left."""
    fresh: set[int] = set()
    for _ in range(len(values) + 1):
        try:
            return _trace_body(call, index, values, names, fresh, test, span)
        except _Rebound as e:
            fresh |= e.positions
    raise _Unroll("its names kept changing between traces of its body")


# -- building the LOOP node ---------------------------------------------------------------------------------------


def _specialiser(args: tuple):
    """For a loop whose bounds are made from the kernel's Python numbers: a function that specialises the kernel
    on them (True), else True (the bounds are read from arrays: nothing to specialise on)."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    if all(_number(a) is not None for a in tensors):

        def specialise() -> bool:
            _numbers(args)
            return True

        return specialise
    return True


def _compiled_for(start, stop, step, body, values, names, target, where, args, until: int | None = None, few=False):
    """`few`: the loop has few steps, compiled only where its body holds a loop compiled as a loop."""
    steps: range | None = None  # known once the bounds are numbers
    peeled = False
    for _ in range(3):
        try:
            trace = _trace_fixed(body, True, values, names, span=_span(start, stop, step))
            break
        except _Changing as e:
            if all(_number(b) is not None for b in (start, stop, step) if isinstance(b, Tensor)):
                steps = range(*_numbers(args)) if steps is None else steps
                # (`s = 0.0`, then `s += A[i, j]`: float64 from the start)
                if steps and loop_promotion.exact(e.changes, e.stand_ins, e.reached, same_dtype=True):
                    values = _widened(values, e.changes)
                    continue
                if not peeled:  # the first step as Python runs it; the rest a loop
                    peeled = True
                    if len(steps) <= UNROLL:
                        return _unrolled(steps, body, values, target, until)
                    values = list(body(steps[0], *values))
                    target, steps = steps[0], steps[1:]
                    if until is not None and _stopped(values[until]):
                        return (*values, target)
                    start, stop, step = steps.start, steps.stop, steps.step
                    continue
            if all(_weak(values[j]) for j in e.changes):  # `s = 0`, then `s = s + x[i]`
                if loop_promotion.exact(e.changes, e.stand_ins, e.reached) is False:  # (not known: as NEP 50's cast)
                    raise _Unroll(_inexact(e)) from None
                values = _widened(values, e.changes)
                continue
            raise _Unroll(str(e)) from None
    else:
        raise _Unroll("the dtypes or shapes of its carried values do not settle")
    if few and not _holds_compiled_loop(trace):
        raise _Unroll(f"its steps are few (at most {UNROLL}) and no loop in its body is compiled as a loop: they fuse")
    bounds = tuple(None if isinstance(b, Tensor) else int(b) for b in (start, stop, step))
    heads = [as_node(b) for b in (start, stop, step) if isinstance(b, Tensor)]
    results = _loop_nodes("for", bounds, heads, trace, where, until)
    # (a loop that may run no step leaves a rebound name the array it was: a break can stop it at its first)
    maybe_none = True if until is not None else _specialiser(args) if heads else False
    outs = _finish(trace, values, results, where, maybe_none=maybe_none)
    if target is None:  # (nothing reads the index after the loop)
        last = None
    elif not any(isinstance(b, Tensor) for b in (start, stop, step)):
        steps = range(start, stop, step)
        last = steps[-1] if len(steps) else target
    else:
        last = _last_index(start, stop, step, target)
    return (*outs, last)


def _compiled_while(first_test: Tensor, test, body, values, names, where):
    for _ in range(3):
        try:
            trace = _trace_fixed(body, False, values, names, test)
            break
        except _Changing as e:
            if all(_weak(values[j]) for j in e.changes):
                if loop_promotion.exact(e.changes, e.stand_ins, e.reached) is False:  # (not known: as NEP 50's cast)
                    raise _Unroll(_inexact(e)) from None
                values = _widened(values, e.changes)
                continue
            raise _Unroll(
                f"{e}: give them their final dtype and shape before the loop (np.zeros(...), .astype(...))"
            ) from None
    else:
        raise _Unroll("the dtypes or shapes of its carried values do not settle")
    heads = [_test_node(first_test)]
    results = _loop_nodes("while", None, heads, trace, where)
    return _finish(trace, values, results, where, maybe_none=True)


def _inexact(e: _Changing) -> str:
    it = "them" if len(e.changes) > 1 else "it"
    return (
        f"{e}, and its first step computes with the Python number{'s' if len(e.changes) > 1 else ''} before "
        f"NumPy's promotion (NEP 50) gives {it} that dtype, which a loop whose step count is known only when it runs "
        f"cannot compile apart: give {it} that dtype before the loop (`s = np.float32(1e40)`)"
    )


def _weak(value) -> bool:
    """A Python number, or a value made from Python numbers alone (NEP 50's weak scalars): its first step's
    arithmetic takes the other operand's dtype, so it may start as the body's dtype."""
    return type(value) in (bool, int, float) or isinstance(value, Tensor) and value._node.weak and value.shape == ()


def _widened(values: list, changes: dict) -> list:
    """The Python numbers among the carried values as the body's dtype and shape (0 + x[i] is x[i]'s dtype)."""
    out = list(values)
    for j, (first, nxt) in changes.items():
        node = as_node(nxt)
        start = build.cast(as_node(first), node.dtype)
        out[j] = Tensor(build.broadcast_to(start, node.shape))
    return out


def _loop_nodes(
    kind: str, bounds, heads: list[Node], trace: _Trace, where: str, until: int | None = None
) -> list[Node | None]:
    """The LOOP nodes of a traced body, one per carried value (None for one the body left as it was): its graph
    closed over inputs of its own."""
    serial = trace.serial
    carried = list(trace.carried)
    left = {k for k, (_, _, stand_in, nxt) in enumerate(carried) if nxt is stand_in}
    mapping = dict(trace.unchanged)
    firsts: list[Node] = []
    for k, (kind_, what, stand_in, nxt) in enumerate(carried):
        if kind_ == "array":
            firsts.append(trace.before[id(what)])
        elif stand_in is None:  # first bound in the body: its value before the first step is never read
            firsts.append(build.const(0, nxt.dtype, nxt.shape, weak=nxt.weak))
        else:
            firsts.append(_first_of(trace.values[what], stand_in))
        if k in left and stand_in is not None:
            mapping[stand_in] = firsts[k]
    keep = [k for k in range(len(carried)) if k not in left]
    graph = [carried[k][3] for k in keep] + ([trace.test] if trace.test is not None else [])
    graph = replace(graph, mapping) if mapping else graph
    # simplified before the values it reads from outside become inputs of its own, whose facts it no longer sees:
    # (x, 0) * k's imaginary part is +-0 before the loop as inside it (ir/float_facts.py)
    span = index_span(*bounds) if kind == "for" and bounds is not None and None not in bounds else None
    ranges = {trace.inputs[0]: span} if span is not None else None  # (the index, whose values the bounds give)
    graph = simplify(graph, ranges)
    inputs = [trace.inputs[0]] if kind == "for" else []
    for k in keep:
        stand_in = carried[k][2]
        if stand_in is None:
            nxt = carried[k][3]
            stand_in = trace.stand_in(nxt)
        inputs.append(stand_in)
    # values the body reads and does not change are computed before the loop: the largest parts of its graph that
    # read no input of this loop and read something from outside it (what reads only constants stays inside)
    own = set(inputs)
    order = toposort(graph)
    varies: dict[Node, bool] = {}
    outside: dict[Node, bool] = {}
    for n in order:
        varies[n] = n in own or any(varies[s] for s in n.srcs)
        outside[n] = (
            n.op is Op.LOOP
            or n.op is Op.INPUT
            and not (isinstance(n.arg, LoopInput) and n.arg.loop == serial)
            or any(outside[s] for s in n.srcs)
        )
    free: dict[Node, Node] = {}

    def hoist(s: Node) -> None:
        mask = element_loops.store_mask(s)
        if mask is not None:  # where a store of one element goes (x[i, j] = v, i from outside): kept whole, so that
            for index in mask:  # a loop over elements reads it back as the store it is; its indices come from outside
                if outside[index] and not varies[index]:
                    hoist(index)
            return
        # a reshape, broadcast or transpose costs nothing where it is read: what it moves is computed before
        # the loop instead (not the broadcast array); so does a slice of an array in memory (an argument, or an
        # input of the loop around): a convolution's shifted windows x[:, :, i:i + n, j:j + m] are read in x,
        # not copied before the loop (a slice of a computed value stays: computing it all could cost more)
        while s.op in (Op.RESHAPE, Op.EXPAND, Op.PERMUTE) and outside[s.srcs[0]] or _slice_in_memory(s):
            s = s.srcs[0]
        if s not in free:
            free[s] = trace.stand_in(s)

    for n in order:
        for s in n.srcs if varies[n] else ():
            if not varies[s] and outside[s]:
                hoist(s)
    for n in graph:
        if not varies[n] and outside[n]:
            hoist(n)
    closed = simplify(replace(graph, free) if free else graph, ranges)
    loop = Loop(kind, bounds, inputs + list(free.values()), closed, len(keep), where)
    loop.until = next(  # the carried stop flag of a loop with a break: the runner stops once it is set
        (i for i, k in enumerate(keep) if until is not None and carried[k][:2] == ("name", until)), None
    )
    srcs = (*heads, *(firsts[k] for k in keep), *free)
    nodes: list[Node | None] = [None] * len(carried)
    for i, k in enumerate(keep):
        o = closed[i]
        nodes[k] = Node.make(Op.LOOP, o.dtype, o.shape, srcs, (loop, i), o.weak)
    log(1, f"{where}: `{kind}` compiled as a loop: {len(keep)} value(s) carried, {len(free)} read unchanged")
    return nodes


def _slice_in_memory(s: Node) -> bool:
    """Whether s is a slice of an array in memory, through reshapes and transposes (a loop's input or an
    argument: an INPUT node)."""
    if s.op is not Op.SLICE:
        return False
    while s.op in (Op.SLICE, Op.RESHAPE, Op.PERMUTE):
        s = s.srcs[0]
    return s.op is Op.INPUT


def _first_of(value, stand_in: Node) -> Node:
    """A carried name's value before the loop, as its stand-in's dtype and shape (a widened Python number)."""
    node = as_node(value)
    if (node.dtype, node.weak) != (stand_in.dtype, stand_in.weak):
        node = build.cast(node, stand_in.dtype, stand_in.weak)
    return node if node.shape == stand_in.shape else build.broadcast_to(node, stand_in.shape)


def _finish(trace: _Trace, values: list, results: list, where: str = "", maybe_none=False) -> tuple:
    """Give the arrays the loop assigned into their values after it; the names' values after it. `maybe_none`:
    the loop may run no step (a name bound to an array before it may then still be that very array); a
    function that specialises the kernel on the Python numbers its step count comes from, where it does."""
    out = list(values)
    for j in trace.partly:  # (a value only sometimes after the loop: an error where it is used)
        out[j] = PartlyBound(trace.names[j])
    for c, node in zip(trace.carried, results):
        kind, what, _, _ = c
        if node is None:
            continue
        if kind == "array":
            what._value = node
            continue
        out[what] = Tensor(node)
        if isinstance(values[what], Tensor) and what in trace.aliased:
            name = trace.names[what]
            may_alias(
                out[what],
                f"`{name}` after the loop at {where} may still be the array it was before the loop (a step "
                f"binds it again only where an `if` on values read from arrays says so, or a `continue` skips "
                f"it); NumPy would assign into the first only sometimes, which a compiled kernel cannot follow. "
                f"Assign into a copy (`{name} = {name}.copy()`) or compute a new array instead",
            )
        elif maybe_none and isinstance(values[what], Tensor):
            name = trace.names[what]
            may_alias(
                out[what],
                f"`{name}` after the loop at {where} is the array it was before the loop where the loop ran no "
                f"step, a new one otherwise, and how many steps it runs is read from arrays; NumPy would assign "
                f"into the first only sometimes, which a compiled kernel cannot follow. Assign into a copy "
                f"(`{name} = {name}.copy()`) or compute a new array instead",
                maybe_none if callable(maybe_none) else None,
            )
    return tuple(out)


def _last_index(start, stop, step, before):
    """The index's value after a loop whose bounds are read from arrays: its last step's (before if none)."""
    from tracejit.numpy import functions as F

    count = F.maximum((stop - start + step - F.sign(step)) // step, 0)
    last = Tensor(build.cast(as_node(start + (count - 1) * step), INDEX, weak=True))  # (a Python int, as the index)
    if before is UNDEFINED:
        return last
    return Tensor(build.where(as_node(count > 0), as_node(last), build.cast(as_node(before), INDEX, weak=True)))
