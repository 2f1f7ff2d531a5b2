"""Graph capture: record the kernel launches of a block once, replay them for almost nothing.

    with tj.capture() as g:          # calls run as usual and are recorded
        h = layer(x, w)
        g.outputs = softmax(h)
    y = g(x2, w2)                    # new data into the captured inputs, replay, the captured outputs

A graph owns copies of its inputs (the arrays its calls read and did not produce), so feeding new data
never writes to the caller's arrays. Values produced inside the block, outputs included, live in the
graph's buffers: each replay overwrites them (CUDA-graph semantics; pass copy=True for fresh arrays).
Python code in the block runs once, at capture; only kernel launches are replayed.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, Protocol, overload

import numpy as np

from tracejit.errors import ArgumentError, TracejitError, UnsupportedError
from tracejit.ir.dtypes import is_narrow_float
from tracejit.runtime import profiler, registry
from tracejit.runtime.array import Array
from tracejit.frontend.signature import Default, value_key

ACTIVE: list[Graph] = []  # the graphs being captured, innermost last; Kernel.__call__ checks it


@dataclass
class _Input:
    where: str  # "host", or the device name of a tj.Array
    shape: tuple[int, ...]
    dtype: np.dtype
    owned: list = field(default_factory=list)  # (device, the graph's copy) per device that reads it


class CaptureDevice(Protocol):
    """What a graph asks of the device its calls run on (every device of runtime/ has it): the launches of a
    call bound for good, run again and again, and the memory they use."""

    name: str
    returns_numpy: bool

    def own(self, a): ...  # the graph's copy of an input on this device
    def memory_of(self, value) -> int: ...  # the allocation a value lives in
    def share_memory(self, launches: list, scratch: set[int]) -> tuple[list, int]: ...
    def prepare_replay(self, launches: list): ...
    def replay(self, launches) -> None: ...
    def feed(self, owned, a) -> None: ...  # new data into the graph's copy of an input
    def synchronize(self) -> None: ...


def _where(a) -> str:
    return a.device.name if type(a) is Array else "host"


class Graph:
    """A captured sequence of kernel launches (`with tj.capture() as g:`): g(*inputs) feeds new data and replays,
    g.replay() replays on the buffers as they are; see the module docstring and docs/guide/capture.md."""

    def __init__(self) -> None:
        self.outputs: object = None  # what the block returns: a value, or a tuple or list of them
        self.inputs: list[_Input] = []
        self._by_id: dict[int, int] = {}  # id(external array) -> index in inputs
        self._externals: list = []  # keeps those ids unique while capturing
        self._produced: dict[int, tuple[np.ndarray | Array, CaptureDevice]] = {}  # id(value) -> (value, device)
        self._segments: list[tuple[CaptureDevice, list]] = []
        self._state = "new"
        self._shared = False
        self._scratch: dict[int, set[int]] = {}  # per device: memory the graph allocated
        self.scratch_bytes = 0  # memory the graph's intermediates share, once replayed

    # -- capturing --
    def __enter__(self) -> Graph:
        if self._state != "new":
            raise TracejitError("a graph captures once; use a new tj.capture() block")
        self._state = "capturing"
        ACTIVE.append(self)
        return self

    def __exit__(self, kind, value, tb) -> None:
        ACTIVE.remove(self)
        self._state = "failed" if kind is not None else "ready"
        self._externals.clear()

    def call(self, kernel, args, kwargs, device):
        """A kernel call inside the block: run it on the graph's buffers and record its launches."""
        if kernel._out_keyword and kwargs.get("out") is not None:
            raise UnsupportedError(
                f"{kernel.__name__}(..., out=...) inside tj.capture() (or a tj.jit function) is not "
                "supported: a captured graph keeps its results in its own buffers; use the returned "
                "values (g.outputs)"
            )
        kwargs = {k: v for k, v in kwargs.items() if k != "out" or not kernel._out_keyword}
        args = kernel._bind(args, kwargs)
        name = device or kernel._device or registry.default_device_name()
        dev = registry.device(name)

        def planned():  # (again where the trace specialised Python-number arguments: they are static then)
            bound = tuple(
                a if i in kernel._static else self._argument(a, dev) for i, a in enumerate(kernel._normalize(args))
            )
            return kernel._plan_for(bound, getattr(dev, "name", name)), bound

        plan, bound = kernel._with_numbers(planned)
        if plan.traced.complex_outputs or any(info.complex for info in plan.traced.infos):
            raise UnsupportedError(
                f"{kernel.__name__} takes or returns complex values, which a captured graph (tj.capture, tj.jit) "
                "does not hold yet; call it outside tj.capture() (or tj.jit)"
            )
        if plan.traced.narrow_outputs or any(is_narrow_float(info.dtype) for info in plan.traced.infos if info.dtype):
            raise UnsupportedError(
                f"{kernel.__name__} takes or returns bfloat16 or float8 values, which a captured graph (tj.capture, "
                "tj.jit) does not hold yet; call it outside tj.capture() (or tj.jit)"
            )
        if plan.traced.assigned:
            raise UnsupportedError(
                f"{kernel.__name__} assigns into its argument(s) {list(plan.traced.assigned)}, which "
                "a captured graph cannot write back to the caller's arrays; call it outside "
                "tj.capture() (or tj.jit), or return the new values instead"
            )
        if plan.traced.streams:
            raise UnsupportedError(
                f"{kernel.__name__} draws random numbers (np.random), which a captured graph would "
                "repeat on every replay; call it outside tj.capture() (or tj.jit)"
            )
        outputs, launches, allocated = plan.executable.bind(plan._with_words(bound))  # hidden scalars too
        self._scratch.setdefault(id(dev), set()).update(dev.memory_of(a) for a in allocated)
        dev.replay(launches)  # run now: the block sees real values
        if self._segments and self._segments[-1][0] is dev:
            self._segments[-1][1].extend(launches)
        else:
            self._segments.append((dev, list(launches)))
        results = [o if dev.returns_numpy else Array(o, dev) for o in outputs[: len(plan.traced.results)]]
        for r in results:
            self._produced[id(r)] = (r, dev)
        return plan.traced.pack(results)  # (None for a procedure)

    def _argument(self, a, dev):
        if type(a) in (bool, int, float) or isinstance(a, (np.generic, Default)):
            return a  # a scalar (or a left-out default) is a constant of the graph
        produced = self._produced.get(id(a))
        if produced is not None:
            if produced[1] is not dev:
                raise UnsupportedError(
                    f"a captured value made on {produced[1].name} is passed to a kernel on "
                    f"{dev.name}; inside tj.capture() each value stays on its device"
                )
            return a
        if not isinstance(a, (np.ndarray, Array)):
            raise ArgumentError(
                f"tj.capture() cannot take a {type(a).__name__} argument; pass numpy arrays, "
                "tj.Arrays or Python scalars"
            )
        index = self._by_id.get(id(a))
        if index is None:
            index = self._by_id[id(a)] = len(self.inputs)
            self.inputs.append(_Input(_where(a), tuple(a.shape), np.dtype(a.dtype)))
            self._externals.append(a)
        entry = self.inputs[index]
        for d, owned in entry.owned:
            if d is dev:
                return owned
        owned = dev.own(a)
        entry.owned.append((dev, owned))
        return owned

    # -- replaying --
    def replay(self) -> None:
        """Run every recorded launch again, on the same buffers."""
        self._check_ready()
        for dev, launches in self._segments:
            if profiler.ACTIVE:  # a replay is one event: its launches run back to back (one CUDA graph)
                t0 = time.perf_counter()
                dev.replay(launches)
                dev.synchronize()
                profiler.launched(dev.name, f"graph replay ({len(launches)} launches)", t0, time.perf_counter(), 0)
            else:
                dev.replay(launches)

    def __call__(self, *inputs: object, copy: bool = False) -> Any:
        """Copy `inputs` (in the order the block first read them) into the captured input buffers,
        replay, and return the captured outputs (fresh copies with copy=True)."""
        self._check_ready()
        if len(inputs) != len(self.inputs):
            raise ArgumentError(
                f"this graph reads {len(self.inputs)} input array(s) (in the order the block "
                f"first read them); got {len(inputs)}"
            )
        for i, a in enumerate(inputs):
            self.feed(i, a)
        self.replay()
        return self.results(copy)

    def feed(self, index: int, a) -> None:
        entry = self.inputs[index]
        if not isinstance(a, (np.ndarray, Array)):
            a = np.asarray(a)
        if _where(a) != entry.where or tuple(a.shape) != entry.shape or np.dtype(a.dtype) != entry.dtype:
            raise ArgumentError(
                f"input {index} was captured as {entry.dtype.name}{list(entry.shape)} on "
                f"{entry.where}; got {np.dtype(a.dtype).name}{list(a.shape)} on {_where(a)}. "
                "Capture a new graph for other shapes, dtypes or devices"
            )
        for dev, owned in entry.owned:
            dev.feed(owned, a)

    def results(self, copy: bool = False) -> Any:
        outputs = self.outputs
        single = not isinstance(outputs, (tuple, list))
        values = []
        for v in list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]:
            if id(v) not in self._produced:
                raise ArgumentError(
                    "g.outputs must be values that kernel calls inside the tj.capture() block "
                    f"returned; got {type(v).__name__}"
                )
            values.append(self._produced[id(v)][0])  # v itself
        if copy:
            values = [
                v.copy() if isinstance(v, np.ndarray) else Array(v.device.clone(v._data), v.device) for v in values
            ]
        return values[0] if single else tuple(values)

    def _share_memory(self) -> None:
        """Before the first replay: what the graph allocated, less its outputs, moves to shared blocks.
        Values the block produced and the caller still holds keep their capture-time contents."""
        outputs = self.outputs if isinstance(self.outputs, (tuple, list)) else [self.outputs]
        by_device: dict[int, list] = {}
        for dev, launches in self._segments:
            by_device.setdefault(id(dev), []).extend(launches)
        shared = {}
        for dev, _ in self._segments:
            if id(dev) not in shared:
                kept = {dev.memory_of(v) for v in outputs if self._produced.get(id(v), (None, None))[1] is dev}
                launches, nbytes = dev.share_memory(by_device[id(dev)], self._scratch[id(dev)] - kept)
                shared[id(dev)] = iter(launches)
                self.scratch_bytes += nbytes
        self._segments = [
            (dev, _prepared(dev, [next(shared[id(dev)]) for _ in launches])) for dev, launches in self._segments
        ]

    def _check_ready(self) -> None:
        if self._state == "ready" and not self._shared:
            self._shared = True
            self._share_memory()
        if self._state != "ready":
            raise TracejitError(
                {
                    "new": "this graph has captured nothing yet",
                    "capturing": "a graph cannot replay inside its own tj.capture() block",
                    "failed": "the tj.capture() block raised, so the graph is incomplete",
                }[self._state]
            )

    def __repr__(self) -> str:
        launches = sum(len(x) for _, x in self._segments)
        return f"<tj.Graph: {launches} launch(es), {len(self.inputs)} input(s), {self._state}>"


def capture() -> Graph:
    """with tj.capture() as g: ... records the kernel launches of the block; see Graph."""
    return Graph()


class JitFunction:
    """A whole Python function of kernel calls: the first call per signature captures a graph, later
    calls with that signature feed their arrays to it and replay. Python scalars are part of the
    signature (a new value captures anew); arrays it reads other than its arguments are captured once."""

    __name__: str  # the function's, as functools.update_wrapper sets it (with its __doc__, __wrapped__, ...)

    def __init__(self, fn: Callable[..., object], copy: bool = False) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.copy = fn, copy
        self._graphs: dict = {}

    def __call__(self, *args: object) -> Any:
        key = tuple(map(_jit_key, args))
        entry = self._graphs.get(key)
        if entry is None:
            # each array argument captured as an object of its own: one passed twice (f(x, x)), or also read
            # from a global, would be one input, and a later call's feeds would overwrite each other there
            args = tuple(_stand_in(a) for a in args)
            with capture() as g:
                g.outputs = self.fn(*args)
            feeds = [(i, g._by_id[id(a)]) for i, a in enumerate(args) if id(a) in g._by_id]
            self._graphs[key] = (g, feeds)
            return g.results(self.copy)
        g, feeds = entry
        for arg, index in feeds:
            g.feed(index, args[arg])
        g.replay()
        return g.results(self.copy)

    def __repr__(self) -> str:
        return f"<tracejit.jit {self.__name__}: {len(self._graphs)} graph(s)>"


def _stand_in(a):
    """An array argument as a new object over the same data (a view, or a tj.Array of the same buffer)."""
    if isinstance(a, np.ndarray):
        return a.view()
    if type(a) is Array:
        return Array(a._data, a.device)
    return a


def _jit_key(a):
    if isinstance(a, np.ndarray):
        return ("array", a.dtype, a.shape, a.strides)
    if type(a) is Array:
        return ("array", a.dtype, a.shape, a.device.name)
    if type(a) in (bool, int, float) or isinstance(a, np.generic):  # the type too: np.float32(0.5) == 0.5
        return ("scalar", value_key(a))  # and the sign of a zero: 1 / -0.0 is -inf
    try:
        hash(a)
    except TypeError:
        raise ArgumentError(
            f"a tj.jit function's arguments must be arrays, scalars or hashable settings; got {type(a).__name__}"
        ) from None
    return ("static", a)


@overload
def jit(fn: Callable[..., object], *, copy: bool = False) -> JitFunction: ...
@overload
def jit(fn: None = None, *, copy: bool = False) -> Callable[[Callable[..., object]], JitFunction]: ...


def jit(
    fn: Callable[..., object] | None = None, *, copy: bool = False
) -> JitFunction | Callable[[Callable[..., object]], JitFunction]:
    """@tj.jit or @tj.jit(copy=True): capture on the first call per signature, replay afterwards."""
    if fn is None:
        return lambda f: JitFunction(f, copy)
    return JitFunction(fn, copy)


def _prepared(dev, launches: list):
    """A device may turn a final launch list into something faster to replay (a CUDA graph)."""
    return dev.prepare_replay(launches)
