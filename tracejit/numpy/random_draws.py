"""np.random.* and np.random.Generator methods called by a kernel function: draws of tracejit's counter-based
generator (philox.py), keyed by four uint32 scalar arguments of the kernel that each call fills afresh."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

from tracejit.errors import ArgumentError, ArgumentValueError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.graph import Node, Op
from tracejit.numpy import philox
from tracejit.numpy.captured import array_node
from tracejit.numpy.tensor import Tensor, python_value

U32 = philox.U32
WORDS = 4  # per stream and call: key (2 words), counter (2 words)


# --- the global stream: tj.random.seed(n) --------------------------------------------------------------


class _GlobalStream:
    """The key of np.random.* calls in kernels and the count of calls drawn with it so far (keyed from OS
    entropy on first use until tj.random.seed is called)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.key, self.calls = None, 0

    def seed(self, n) -> None:
        key = np.random.SeedSequence(n).generate_state(2, np.uint32)
        with self.lock:
            self.key, self.calls = (int(key[0]), int(key[1])), 0

    def next_words(self) -> tuple[int, int, int, int]:
        if self.key is None:
            self.seed(None)
        with self.lock:
            calls = self.calls
            self.calls = (calls + 1) % 2**64
            key = self.key
        return (*key, calls & 0xFFFFFFFF, calls >> 32)


GLOBAL = _GlobalStream()


def seed(n: int | None = None) -> None:
    """Seed the generator of np.random.* calls in kernels (None: fresh entropy from the OS)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0):
        raise ArgumentValueError(f"tj.random.seed({n!r}): the seed is a non-negative integer (or None)")
    GLOBAL.seed(None if n is None else int(n))


# --- streams of a trace and their words per call -------------------------------------------------------


def _is_generator(value) -> bool:
    t = type(value)
    return t.__name__ == "Generator" and t.__module__.startswith("numpy.random")


@dataclass
class Stream:
    """Where a call's words come from: "global" (tj.random), "argument" (a Generator passed at `where`), or
    "captured" (a Generator the function reads from a global or a closure cell: `where` reads it)."""

    kind: str
    first: int  # input index of the first of its WORDS uint32 scalars
    where: int | Callable[[], object] | None = None  # "argument": its position; "captured": what reads it

    def words(self, args) -> tuple[int, ...]:
        if self.kind == "global":
            return GLOBAL.next_words()
        if isinstance(self.where, int):  # "argument"
            g = args[self.where]
        else:
            assert self.where is not None, self.kind  # "captured"
            g = self.where()
        if not _is_generator(g):
            raise ArgumentError(
                f"a kernel traced with a np.random.Generator got a {type(g).__name__} in its "
                "place; pass a Generator (or call the kernel through a function of its own)"
            )
        raw = int(g.bit_generator.random_raw())  # the Generator's own stream: a fresh key per call
        return (raw & 0xFFFFFFFF, raw >> 32, 0, 0)


def call_words(streams, args) -> tuple:
    """The hidden scalar arguments of one call, as 0-d uint32 arrays, after the call's own."""
    out = []
    for s in streams:
        out += [np.array(w, U32) for w in s.words(args)]
    return tuple(out)


@dataclass
class Draws:
    """The random draws of one trace: its streams, and a count that makes each draw's counters its own."""

    first_input: int
    streams: list = field(default_factory=list)
    count: int = 0
    _by_key: dict = field(default_factory=dict)

    def stream(self, kind: str, where=None, key=None) -> tuple[Node, ...]:
        """The four uint32 scalar nodes of a stream (key words, counter words), added on first use."""
        found = self._by_key.get((kind, key))
        if found is None:
            s = Stream(kind, self.first_input + WORDS * len(self.streams), where)
            self.streams.append(s)
            found = self._by_key[(kind, key)] = tuple(build.input_(s.first + j, U32, ()) for j in range(WORDS))
        return found

    def words(self, source: tuple[Node, ...], shape: tuple[int, ...]) -> tuple[Node, Node, Node, Node]:
        """Four fresh uint32 words per element of `shape`: Philox of counter (element, draw, call) under the
        stream's key."""
        size = int(np.prod(shape, dtype=np.int64))
        if size >= 2**32:
            raise UnsupportedError(
                f"a random draw of {size} elements: tracejit's generator counts elements in "
                "32 bits; draw at most 2**32 - 1 at once"
            )
        draw = self.count
        self.count += 1
        k0, k1, c2, c3 = (build.broadcast_to(n, shape) for n in source)
        counter = (philox.flat_index(shape), build.const(draw, U32, shape), c2, c3)
        return philox.philox4x32(counter, (k0, k1))


_current = threading.local()


@contextmanager
def drawing(first_input: int):
    """While a kernel function is traced: its draws, whose scalar arguments start at input `first_input`."""
    outer = getattr(_current, "draws", None)
    _current.draws = draws = Draws(first_input)
    try:
        yield draws
    finally:
        _current.draws = outer


def current_count() -> int:
    """How many draws the trace running in this thread has made so far (0 outside a trace)."""
    draws = getattr(_current, "draws", None)
    return 0 if draws is None else draws.count


def _draws() -> Draws:
    draws = getattr(_current, "draws", None)
    if draws is None:
        raise UnsupportedError("np.random inside a traced function outside a @tj.kernel call is not supported")
    return draws


# --- distributions ------------------------------------------------------------------------------------


def _shape(size) -> tuple[int, ...]:
    if size is None:
        return ()
    size = python_value(size, "a random draw's size")
    if isinstance(size, Tensor):
        raise UnsupportedError("a random draw's size is a traced value; sizes must be known while tracing")
    if isinstance(size, (int, np.integer)):
        return (int(size),)
    return tuple(int(s) for s in size)


def _float_dtype(dtype, name: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise UnsupportedError(f"{name}(dtype={dt}): NumPy's Generator draws float32 or float64 only")
    return dt


class _Source:
    """Draws of one stream: the Generator's methods, built on its four scalar nodes (or constants)."""

    def __init__(self, nodes):
        self._nodes = nodes  # the four nodes, or a function that adds the stream to the running trace

    def _words(self, shape):
        nodes = self._nodes() if callable(self._nodes) else self._nodes
        return _draws().words(nodes, shape)

    def random(self, size=None, dtype=np.float64, out=None):
        _no_out(out, "random")
        shape = _shape(size)
        return Tensor(philox.uniform(self._words(shape), _float_dtype(dtype, "random")))

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        _no_out(out, "standard_normal")
        shape, dt = _shape(size), _float_dtype(dtype, "standard_normal")
        w = self._words(shape)
        u1, u2 = (
            (philox.uniform(w[:2], dt), philox.uniform(w[2:], dt))
            if dt == np.float64
            else (philox.uniform(w[:1], dt), philox.uniform(w[1:2], dt))
        )
        c = lambda v: build.const(v, dt, shape)  # noqa: E731
        # Box-Muller: r = sqrt(-2 log(1 - u1)) (1 - u1 is in (0, 1]), angle 2 pi u2
        r = build.unary(Op.SQRT, build.binary(Op.MUL, c(-2.0), build.unary(Op.LOG, build.binary(Op.SUB, c(1.0), u1))))
        return Tensor(build.binary(Op.MUL, r, build.unary(Op.COS, build.binary(Op.MUL, c(2 * np.pi), u2))))

    def standard_exponential(self, size=None, dtype=np.float64, method="zig", out=None):
        _no_out(out, "standard_exponential")
        shape, dt = _shape(size), _float_dtype(dtype, "standard_exponential")
        u = philox.uniform(self._words(shape), dt)
        return Tensor(build.unary(Op.NEG, build.unary(Op.LOG1P, build.unary(Op.NEG, u))))  # -log(1 - u)

    def uniform(self, low=0.0, high=1.0, size=None):
        shape = _result_shape(size, low, high)
        return low + (high - low) * self.random(shape)

    def normal(self, loc=0.0, scale=1.0, size=None):
        shape = _result_shape(size, loc, scale)
        return loc + scale * self.standard_normal(shape)

    def exponential(self, scale=1.0, size=None):
        shape = _result_shape(size, scale)
        return scale * self.standard_exponential(shape)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        if high is None:
            low, high = 0, low
        if any(isinstance(v, Tensor) or np.ndim(v) for v in (low, high)):
            raise UnsupportedError(
                "random integers: `low` and `high` must be Python integers known while "
                "tracing (array bounds are not supported)"
            )
        low, high = int(low), int(high) + bool(endpoint)
        dt = np.dtype(dtype)
        if dt.kind not in "iu":
            raise UnsupportedError(f"random integers of dtype {dt}: use an integer dtype")
        info = np.iinfo(dt)
        if high <= low or low < info.min or high - 1 > info.max:
            raise ArgumentValueError(
                f"random integers in [{low}, {high}) of dtype {dt}: "
                + ("low >= high" if high <= low else f"out of bounds for {dt}")
            )
        if high - low > 2**32:
            raise UnsupportedError(
                f"random integers in a range of {high - low} values: tracejit's generator draws "
                "ranges of at most 2**32 values"
            )
        shape = _shape(size)
        k = philox.below(self._words(shape)[0], high - low)
        value = build.cast(k, dt)  # (wraps for narrow dtypes; adding low wraps back into [low, high))
        if low:
            value = build.binary(Op.ADD, value, build.const(low, dt, shape))
        return Tensor(value)

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        if not replace or p is not None or axis != 0:
            raise UnsupportedError(
                "random choice: only choice(a, size) with replacement and equal probabilities "
                "(no replace=False, p= or axis=) is supported in a kernel"
            )
        if isinstance(a, (int, np.integer)):
            return self.integers(0, int(a), size)
        values = a if isinstance(a, Tensor) else Tensor(array_node(np.asarray(a)))
        if values.ndim != 1 or values.shape[0] == 0:
            raise ArgumentValueError(f"random choice of an array of shape {values.shape}: pass a non-empty 1-d array")
        return values[self.integers(0, values.shape[0], size, dtype=np.int32)]


def _no_out(out, name: str) -> None:
    if out is not None:
        raise UnsupportedError(f"{name}(out=...): assign the draw instead (out[...] = rng.{name}(...))")


def _result_shape(size, *params) -> tuple[int, ...] | None:
    if size is not None:
        return _shape(size)
    return tuple(build.broadcast_shapes(*(tuple(getattr(p, "shape", np.shape(p))) for p in params)))


class TracedGenerator(_Source):
    """A np.random.Generator inside a traced function (passed, captured or made there)."""

    def __getattr__(self, name: str):
        raise UnsupportedError(
            f"Generator.{name} is not supported inside a kernel; supported: " + ", ".join(GENERATOR_METHODS)
        )


GENERATOR_METHODS = (
    "random",
    "uniform",
    "standard_normal",
    "normal",
    "standard_exponential",
    "exponential",
    "integers",
    "choice",
)


def argument(position: int) -> TracedGenerator:
    """The Generator passed as argument `position`: its stream, advanced by every call."""
    return TracedGenerator(lambda: _draws().stream("argument", position, key=position))


def captured(read, key) -> TracedGenerator:
    """A Generator the function captured (`read()` gives it at call time): its stream, advanced by every call."""
    return TracedGenerator(lambda: _draws().stream("captured", read, key=key))


# --- the np.random functions ---------------------------------------------------------------------------


def _global() -> _Source:
    return _Source(_draws().stream("global"))


def _dims(name):
    def f(*dims):
        return getattr(_global(), name)(dims)

    return f


def _seeded(seed=None):
    """np.random.default_rng(seed) inside the kernel: with a seed, the same draws on every call (as NumPy
    gives: the generator starts over); without one, the global stream's."""
    if seed is None:
        return TracedGenerator(_draws().stream("global"))
    seed = python_value(seed, "a seed")
    if isinstance(seed, Tensor):
        raise UnsupportedError("np.random.default_rng(seed) with a traced seed: seeds must be known while tracing")
    if _is_generator(seed):
        raise UnsupportedError("np.random.default_rng(generator) inside a kernel: pass the Generator itself")
    k0, k1 = (int(w) for w in np.random.SeedSequence(seed).generate_state(2, np.uint32))
    return TracedGenerator(tuple(build.const(w, U32, ()) for w in (k0, k1, 0, 0)))


def _randint(low, high=None, size=None, dtype=int):
    return _global().integers(low, high, size, dtype)


FUNCTIONS = {
    "rand": _dims("random"),
    "randn": _dims("standard_normal"),
    "random": lambda size=None: _global().random(size),
    "random_sample": lambda size=None: _global().random(size),
    "ranf": lambda size=None: _global().random(size),
    "sample": lambda size=None: _global().random(size),
    "uniform": lambda low=0.0, high=1.0, size=None: _global().uniform(low, high, size),
    "standard_normal": lambda size=None: _global().standard_normal(size),
    "normal": lambda loc=0.0, scale=1.0, size=None: _global().normal(loc, scale, size),
    "standard_exponential": lambda size=None: _global().standard_exponential(size),
    "exponential": lambda scale=1.0, size=None: _global().exponential(scale, size),
    "randint": _randint,
    "random_integers": None,  # deprecated in NumPy: refused like the rest
    "choice": lambda a, size=None, replace=True, p=None: _global().choice(a, size, replace, p),
    "default_rng": _seeded,
}
SUPPORTED = tuple(n for n, f in FUNCTIONS.items() if f is not None)


def while_tracing(name: str, original, args, kwargs):
    """np.random.<name>(*args, **kwargs) called by the kernel function while it is traced."""
    impl = FUNCTIONS.get(name)
    if impl is None:
        raise UnsupportedError(
            f"np.random.{name} is not supported inside a kernel; supported: "
            + ", ".join(f"np.random.{n}" for n in SUPPORTED)
            + "; and the Generator methods "
            + ", ".join(GENERATOR_METHODS)
        )
    try:
        return impl(*args, **kwargs)
    except TypeError as e:
        if "argument" in str(e):
            raise UnsupportedError(f"np.random.{name}: {e}") from None
        raise


# --- generators the kernel function captures ------------------------------------------------------------


def visible(fn):
    """fn, or a copy of it whose captured Generators (in its globals or closure cells) are traced ones."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    names = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    g = fn.__globals__
    found = {n: g[n] for n in names if n in g and _is_generator(g[n])}
    cells = fn.__closure__ or ()
    held = [i for i, cell in enumerate(cells) if _holds_generator(cell)]
    if not found and not held:
        return fn
    import types

    new_globals = dict(g)
    for n in found:
        new_globals[n] = captured(lambda n=n, g=g: g.get(n), key=("global", n))
    new_cells = list(cells)
    for i in held:
        cell = cells[i]
        new_cells[i] = types.CellType(captured(lambda cell=cell: cell.cell_contents, key=("cell", i)))
    copy = types.FunctionType(code, new_globals, fn.__name__, fn.__defaults__, tuple(new_cells) or None)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _holds_generator(cell) -> bool:
    try:
        return _is_generator(cell.cell_contents)
    except ValueError:  # an empty cell
        return False
