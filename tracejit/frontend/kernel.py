"""@tj.kernel: trace on the first call per signature, then dispatch straight to the cached plan."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, cast, overload

import numpy as np


from tracejit.errors import (
    ArgumentError,
    DeviceError,
    DtypeError,
    InternalError,
    TraceError,
    TracejitError,
    UnsupportedError,
)
from tracejit.ir import build, faulting
from tracejit.ir.simplify import simplify
from tracejit.ir.verify import verify_graph, verify_kernel
from tracejit.runtime import choices, device_info, profiler, progress, registry
from tracejit.runtime import debug
from tracejit.runtime.debug import compile_times, log, stage
from tracejit.runtime.array import Array
from tracejit.runtime.device_stats import DeviceStats, failed
from tracejit.numpy import (
    captured,
    complex_values,
    allocation,
    conditional_expressions,
    data_sizes,
    host_calls,
    linalg_solvers,
    loops,
    python_builtins,
    python_numbers,
    random_draws,
    source_rewrite,
)
from tracejit.frontend import autotune as autotuning, capture, dtype_sites, explain, hooks, interop, shipping, staged
from tracejit.frontend.dynamic import (
    axes_of,
    changed_axes,
    dynamic_axes,
    every_size_other,
    named_axes_other,
    signature_changes,
    size_free_key,
    twin_sizes,
    with_sizes,
)
from tracejit.frontend.hot_path import fast_class, key_function
from tracejit.frontend import complex_calls, narrow_float_calls
from tracejit.frontend.complex_calls import ComplexPlan
from tracejit.frontend.plan import Plan, Traced, template
from tracejit.frontend.sized import SizedPlan, probe
from tracejit.frontend.recursion_limit import guarded
from tracejit.numpy.selection import arrays
from tracejit.frontend.binding import Layout, Parameters
from tracejit.frontend.signature import (
    ArgInfo,
    arg_key,
    describe,
    is_setting,
    normalize,
    scalar_array,
    spec,
    value_key,
)
from tracejit.numpy.tensor import PythonBool, Tensor, as_node, trace_budget
from tracejit.numpy.user_frames import installed_library
from tracejit.frontend.manifest import record


# bytes a traced value holds while the trace runs, measured: 0.7 KB in a loop of arithmetic, 1.8 KB in a loop
# of element assignments (its graph, its views' bookkeeping)
_BYTES_PER_TRACED_VALUE = 2048


def _trace_values() -> int:
    """How many traced values a trace may make: half the memory free now, at least 200,000."""
    return max(200_000, (device_info.available_memory() or 0) // 2 // _BYTES_PER_TRACED_VALUE)


def _changed(given, traced) -> bool:
    """Whether the trace changed its copy of a dict or list argument (an item set to a traced value, added or
    removed)."""
    try:
        after = value_key(traced)
        hash(after)  # (a traced value or an array put into it: unhashable)
    except TypeError:
        return True
    return value_key(given) != after


class NeedsNumbers(Exception):
    """A trace used Python-number arguments as numbers (position -> the first such use): not an error, the
    kernel keys them by value and traces again (Kernel._with_numbers)."""

    def __init__(self, used: dict[int, str]):
        super().__init__(used)
        self.used = used


# what @tj.kernel(dynamic=...) takes: None, True, False, or parameter name -> its axes (an int for one)
Dynamic = bool | dict[str, int | Sequence[int]] | None


class Kernel:
    """A traced, compiled function, made by `@tj.kernel`. Call it like the original (docs/guide/arguments.md)."""

    def __init__(
        self,
        fn: Callable[..., object] | staticmethod | classmethod,
        static: str | Sequence[str] = (),
        device: str | None = None,
        dynamic: Dynamic = None,
        fallback: bool | None = None,
        autotune: bool = False,
    ) -> None:
        # in a class body: a staticmethod is not bound, a classmethod binds the class (__get__)
        self._binds = "static" if isinstance(fn, staticmethod) else "class" if isinstance(fn, classmethod) else "self"
        fn = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
        self.fn = fn
        self._dynamic = dynamic  # None, True, False, or {parameter name: axes}: see kernel()
        self._fallback = fallback  # None: as TRACEJIT_FALLBACK says (numpy/host_calls.py)
        self._autotune = autotune  # a new signature compiles with its tuned layout choice (autotune.py)
        self._tuned: dict[tuple, choices.Choice] = {}  # plan key -> the choice it compiles with (tj.tune, autotune)
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__name__"):  # a functools.partial, a callable object
            self.__name__ = self.__qualname__ = getattr(getattr(fn, "func", None), "__name__", type(fn).__name__)
        self._signature = inspect.signature(fn)
        self._params = Parameters(self.__name__, self._signature)
        names = self._names = self._params.names
        static = (static,) if isinstance(static, str) else tuple(static)
        self._static = self._params.check_static(static)
        # dynamic={"x": (0,)}: argument position -> its symbolic axes
        self._dynamic_axes = dynamic_axes(self.__name__, dynamic, names, static) if isinstance(dynamic, dict) else None
        self._nparams = len(names)
        self._out_keyword = "out" not in names  # f(..., out=arr) writes the results into arr
        self._device = device
        # least recently used last out: a server seeing ever new shapes keeps at most plan_cache_size()
        # plans per function (an evicted signature costs a trace and a disk-cache load when it returns)
        self._plans: OrderedDict = OrderedDict()
        self._lock = threading.RLock()  # one trace and compile per signature, however many threads call
        self._lowered: OrderedDict = OrderedDict()  # plans of compile-only targets (lower / warm), never run
        self._counts = {"traces": 0, "compiles": 0, "disk_hits": 0, "library": 0, "hits": 0}
        self._symbolic: dict[str, set] = {}  # device -> (argument, axis) seen with a second size (dynamic=None)
        # (device, signature but for sizes) -> kernel name -> (its loop variables, those moving): what the twin
        # found, so that a later shape lowers once, without a twin, where every kernel is one already met
        self._moving: dict[tuple, dict[str, tuple[frozenset, frozenset]]] = {}
        self._fast_key = key_function(self._nparams)
        # static arguments are keyed by value (_key); keyword-only parameters and *args/**kwargs need binding
        if not self._static and self._params.simple:
            self._fast = (self._plans, self._counts)
            self.__class__ = fast_class(Kernel, self._nparams)

    # -- the hot path --
    def __call__(self, *args: object, device: str | None = None, **kwargs: object) -> Any:
        """The function's results (arrays on the device, NumPy arrays on numba; a tuple of them, or None)
        for these arguments. (Any: what they are depends on the function.)"""
        # a kernel without static arguments is an instance of hot_path.fast_class(its parameter count), whose
        # generated __call__ looks its plan up first
        return self._call(args, device, kwargs)

    def __get__(self, obj: object, objtype: type | None = None) -> Kernel | BoundKernel:
        """Defined in a class body, a kernel binds as a function does: the instance (the class, for a
        classmethod) is its first argument, its arrays arguments and its other attributes constants
        (instances.py); a staticmethod binds nothing."""
        if self._binds == "static" or (obj is None and self._binds == "self"):
            return self
        return BoundKernel(self, objtype if self._binds == "class" else obj)

    def _call(self, args, device, kwargs):
        if allocation.tracing():  # called by a kernel being traced: its function is part of that trace
            return self._inline(args, kwargs)
        if capture.ACTIVE:
            collection = hooks.collection_of(args)
            if collection is not None:
                raise UnsupportedError(
                    f"{self.__name__}: a call with {collection.name} inside tj.capture(): {collection.in_capture}"
                )
            return capture.ACTIVE[-1].call(self, args, kwargs, device)
        plain = all(type(a) in _PLAIN_ARGUMENTS for a in args)
        if not plain and any(isinstance(a, np.generic) for a in args):
            # NumPy scalars (np.random.rand(7) unpacked, x.sum(), a[0]) are 0-d arrays to the plan (_normalize), and
            # so here, before the key: keyed as themselves, every call missed and planned again (numpy-benchmarks'
            # hasting, 7 of them: 19.8 us a call against 4.1 with floats). Static ones key by value.
            args = tuple(
                a if i in self._static or not isinstance(a, np.generic) else scalar_array(a) for i, a in enumerate(args)
            )
            plain = all(type(a) in _PLAIN_ARGUMENTS for a in args)
        if not plain or kwargs:
            library = interop.library_of(args, kwargs)
            if library is not None:  # torch tensors in, torch tensors out (interop.py)
                return interop.call(self, library, args, kwargs, device)
        out = kwargs.pop("out", None) if self._out_keyword else None
        # (binding is skipped where it changes nothing: all positional, arrays and numbers; it cost a cached call
        # with a static argument a third of its time)
        if kwargs or len(args) != self._nparams or not self._params.simple or not plain:
            args = self._bind(args, kwargs)
        dev = device or self._device or registry.default_device_name()
        key = self._fast_key(dev, *args) if not self._static and len(args) == self._nparams else self._key(dev, args)
        plans = self._plans
        try:
            plan = plans.get(key)
        except TypeError:
            zero_d = [
                self._names[i] if i < len(self._names) else str(i)
                for i in sorted(self._static)
                if type(args[i]) is np.ndarray and args[i].ndim == 0
            ]
            raise ArgumentError(
                f"{self.__name__}: static arguments must be hashable (they key the compile "
                f"cache); got {[type(args[i]).__name__ for i in sorted(self._static)]}"
                + (
                    f"; {', '.join(zero_d)} is keyed by its value (the code uses it as a number): pass int(x) or a "
                    "NumPy scalar (x[()]) for a 0-d array"
                    if zero_d
                    else ""
                )
            ) from None
        if plan is None:
            collection = hooks.collection_of(args)
            if collection is not None:  # f(dask_array): a Dask array, planned here, computed block by block
                return self._collection_call(collection, args, device, out)
            plan, normalized = self._planned(args, dev)
            try:
                if profiler.ACTIVE:
                    return plan.timed(normalized, args, out)
                return plan.call(normalized, args, out)
            except Exception as e:
                failed(plan.device, e)
                raise
        self._counts["hits"] += 1
        if len(plans) > 1:  # least recently used order: nothing to reorder for a function's only plan
            try:
                plans.move_to_end(key)
            except KeyError:  # another thread evicted it just now: the plan still runs
                pass
        try:
            if profiler.ACTIVE:  # each launch timed on its own (runtime/profiler.py)
                return plan.timed(args, args, out)
            return plan.run(args) if out is None else plan.call(args, args, out)
        except Exception as e:
            failed(plan.device, e)
            raise

    def _inline(self, args, kwargs):
        if self._out_keyword and kwargs.get("out") is not None:
            raise UnsupportedError(
                f"{self.__name__}(..., out=...) called inside another kernel: its result is part "
                "of the outer kernel's trace; assign it (out[...] = inner(x)) instead"
            )
        kwargs = {k: v for k, v in kwargs.items() if k != "out" or not self._out_keyword}
        return self.fn(*args, **kwargs)

    def _collection_call(self, collection: hooks.Collection, args, device, out):
        if out is not None:
            raise ArgumentError(
                f"{self.__name__}: out= cannot take the results of a call with {collection.name}: {collection.with_out}"
            )
        return collection.call(self, args, device or self._device)

    def _planned(self, args, dev, compile_only: bool = False) -> tuple[Plan, tuple]:
        """The plan for a call's bound arguments, and the arguments as it takes them (_normalize)."""

        def plan():
            settings = {i: "a dict of settings" for i, a in enumerate(args) if i not in self._static and is_setting(a)}
            if settings:  # (conv_param = {"stride": 1, "pad": 1}): keyed by value from now on, as static= does
                raise NeedsNumbers(settings)
            normalized = self._normalize(args, dev)
            return self._plan_for(normalized, dev, compile_only), normalized

        return self._with_numbers(plan)

    def _with_numbers(self, make):
        """make(), again after each trace that needed some Python-number arguments' values (a range bound, a
        shape, int(), an `if`): the kernel is specialised on those arguments' values from then on."""
        for _ in range(self._nparams + 1):
            try:
                return make()
            except NeedsNumbers as e:
                self._specialize(e.used)
        raise InternalError(f"{self.__name__}: its trace kept asking for more Python-number arguments")

    def _visible_function(self):
        """The function as the trace runs it: its conditional expressions select traced values, its captured
        Generators draw from tracejit's streams, and min/max of traced values select (numpy/)."""
        return python_builtins.visible(random_draws.visible(source_rewrite.visible(self.fn)))

    def _specialize(self, used: dict[int, str]) -> None:
        """Key these Python-number arguments by value and trace them as the numbers they are (as static= does)."""
        fixed = len(self._params.names)
        variadic = [self._names[i] if i < len(self._names) else str(i) for i in used if i >= fixed]
        if variadic:
            raise TraceError(
                f"{self.__name__}: {', '.join(variadic)} (among *args or **kwargs) is used as "
                f"{used[next(i for i in used if i >= fixed)]}; pass it as a named parameter, whose "
                "value the kernel is specialised on"
            )
        with self._lock:
            self._static = self._static | frozenset(used)
            if type(self) is not Kernel and self.__dict__.pop("_fast", None) is not None:
                self.__class__ = Kernel  # (the hot path keys no argument by value)
            self._plans.clear()
            self._lowered.clear()
        for i, use in sorted(used.items()):
            log(
                1,
                f"{self.__name__}: specialised on the value of {self._names[i]} (used as {use}); another "
                "value traces again",
            )

    def _plan_for(self, args, dev, compile_only: bool = False) -> Plan:
        """The cached plan for converted arguments (array-likes are keyed by what they became), or a new
        one; compile_only: for a target that compiles without its hardware too (lower, warm)."""
        key = self._key(dev, args)
        plan = self._cached_plan(key, compile_only)
        if plan is None:
            with self._lock:
                plan = self._cached_plan(key, compile_only)  # another thread may have made it meanwhile
                if plan is None:
                    choice = self._tuned.get(key)
                    if choice is None and self._autotune:  # its record's, else measured now (autotune.py)
                        choice = autotuning.choose(self, args, dev, compile_only)
                        if not compile_only:
                            self._tuned[key] = choice
                    with choices.applied(choice) if choice is not None else contextlib.nullcontext():
                        plan = self._lower(args, dev, compile_only)
                    if plan.traced.sizes is not None:  # sizes that depend on the data: a plan per count
                        if compile_only:
                            raise UnsupportedError(
                                f"{self.__name__} has sizes that depend on the data (x[mask], np.nonzero, np.unique, "
                                "...), known only when it runs: it cannot be compiled ahead of a call"
                            )
                        plan = SizedPlan(self, args, dev, plan)
                    # a plan from a target that only compiles (no hardware, or none asked for yet) is kept
                    # apart: a later call lowers for the device itself
                    plans = self._plans if plan.runnable else self._lowered
                    plans[key] = plan
                    limit = plan_cache_size()
                    while len(plans) > limit:
                        plans.popitem(last=False)
                    return plan
        self._counts["hits"] += 1
        return plan

    def _shadow(self) -> Kernel:
        """A kernel of the same function and options with plans of its own (autotuning compiles its candidates
        in one)."""
        shadow = Kernel(self.fn, (), self._device, self._dynamic, self._fallback)
        shadow._static = self._static
        if type(shadow) is not Kernel and self._static:
            shadow.__dict__.pop("_fast", None)
            shadow.__class__ = Kernel
        return shadow

    def _forget(self, key) -> None:
        """Drop the plans of a key: its next call compiles again (tj.tune's choice)."""
        with self._lock:
            self._plans.pop(key, None)
            self._lowered.pop(key, None)

    def _cached_plan(self, key, compile_only: bool):
        plans = self._plans if key in self._plans or not compile_only else self._lowered
        plan = plans.get(key)
        if plan is not None:
            try:
                plans.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
        return plan

    def _normalize(self, args, device: str | None = None) -> tuple:
        return tuple(a if i in self._static else normalize(a, device) for i, a in enumerate(args))

    def _key(self, dev, args) -> tuple:
        if self._static:
            return (
                dev,
                *[
                    ("static", value_key(a)) if i in self._static else arg_key(a)  # (1 and 1.0: two plans)
                    for i, a in enumerate(args)
                ],
            )
        return (dev, *map(arg_key, args))

    def _bind(self, args, kwargs) -> tuple:
        """The call's arguments as the flat tuple plans are keyed on (binding.Parameters)."""
        return self._params.bind(args, kwargs, self._static)

    # -- public staging API --
    def trace(self, *args: object, **kwargs: object) -> Traced:
        """The graph IR for these arguments (arrays or tj.spec; a Dask array stands for its whole shape);
        compiles nothing."""
        bound = self._bind(args, kwargs)
        collection = hooks.collection_of(bound)
        if collection is not None:
            bound = tuple(spec(a.shape, a.dtype) if collection.claims(a) else a for a in bound)
        return self._with_numbers(lambda: self._trace(self._normalize(bound)))

    def lower(self, *args: object, device: str | None = None, **kwargs: object) -> Plan:
        """The compiled plan for these arguments (arrays or tj.spec), kept for later calls. Needs no
        hardware where the target compiles without it: device="cuda" (or "cuda:sm_90") on a machine
        with no GPU gives the PTX in .kernels[i].ptx."""
        dev = device or self._device or registry.default_device_name()
        args = self._bind(args, kwargs)
        collection = hooks.collection_of(args)
        if collection is not None:
            raise ArgumentError(f"{self.__name__}.lower: a call with {collection.name}: {collection.in_lower}")
        return self._planned(args, dev, compile_only=True)[0]

    def explain(self, *args: object, device: str | None = None, **kwargs: object) -> str:
        """What a call with these arguments does, as text: its kernels in order, its loops and how they run, every
        break (a call run with NumPy on the host) and every synchronisation (a value read back to the host).
        Compiles what the call would (on a device that is not here, what it compiles without its hardware)."""
        dev = device or self._device or registry.default_device_name()
        bound = self._bind(args, kwargs)
        try:
            registry.device(dev)
        except DeviceError:  # (not here: what it compiles without its hardware)
            return explain.explain(self._planned(bound, dev, compile_only=True)[0])
        plan, normalized = self._planned(bound, dev)
        if isinstance(plan, SizedPlan):  # (the plan of these arguments' counts: run once, nothing written back)
            plan.settle(normalized)
        return explain.explain(plan)

    def cache_info(self) -> dict[str, int]:
        """Counters: traces, compiles (kernels compiled), disk_hits (kernels that needed no compile: loaded
        from the disk cache, or compiled in this process already for another size), library (kernels a
        library runs, compiled by no one here: numba's BLAS products and NumPy sorts; neither compiles nor
        disk hits) and hits (calls served from the memory cache); plans: the signatures kept in memory."""
        return dict(self._counts, plans=len(self._plans))

    @guarded("lowering")
    def _lower(self, args, device_name, compile_only: bool = False, sizes: tuple[int, ...] = ()) -> Plan:
        token = complex_calls.SCALAR_PARTS.set(None)  # (_lower_traced sets it for its device)
        linalg_tokens = linalg_solvers.ON_DEVICE.set(False), linalg_solvers.FLOAT64.set(True)  # (and these)
        try:
            plan = self._lower_traced(args, device_name, compile_only, sizes)
            traced = plan.traced
            plan = narrow_float_calls.wrapped(plan)  # bfloat16 and float8 values pass as bits (narrow_float_calls.py)
            positions = tuple(i for i, info in enumerate(traced.infos) if info.complex)
            if positions or traced.complex_outputs:  # complex values pass as their parts (complex_calls.py)
                return cast(Plan, ComplexPlan(plan, positions, traced.complex_outputs))
            return plan
        except DtypeError as e:  # a value a device cannot hold (webgpu's 64-bit, metal's float64): from which line
            raise dtype_sites.with_site(self, e, args, sizes) from None
        finally:
            complex_calls.SCALAR_PARTS.reset(token)
            linalg_solvers.ON_DEVICE.reset(linalg_tokens[0])
            linalg_solvers.FLOAT64.reset(linalg_tokens[1])

    def _lower_traced(self, args, device_name, compile_only: bool = False, sizes: tuple[int, ...] = ()) -> Plan:
        t0 = time.perf_counter()
        # TRACEJIT_DEBUG=1 or tj.profile(): where the compile's time went, stage by stage
        with (
            compile_times(bool(profiler.ACTIVE)) as times,
            progress.task(f"compiling {self.__name__} for {device_name}"),
        ):  # (a bar past 2 s on a terminal)
            with stage("device setup"):  # the first time: imports the device's compiler
                dev = registry.compiler(device_name) if compile_only else registry.device(device_name)
            complex_calls.check_device(self, args, dev)  # (complex128 where the device has no float64: said now)
            complex_calls.SCALAR_PARTS.set(complex_calls.scalar_parts(dev))
            linalg_solvers.ON_DEVICE.set(not dev.returns_numpy)  # (np.linalg: LAPACK only where arrays are on the host)
            linalg_solvers.FLOAT64.set(dev.computes_float64)
            why = self._new_signature(args, dev.name) if debug.enabled(1) else None
            named = twin_sizes(args)  # tj.spec(("n", 1024), ...): checked before tracing
            traced = self._trace(args, sizes=sizes)
            if not traced.outputs:  # a function that changes nothing and returns None: nothing to compile
                return Plan(traced, NOTHING, dev)
            if staged.has_loops(traced.outputs):  # loops compiled as loops: parts between them (staged.py)
                if debug.enabled(3):
                    log(3, str(traced))
                try:
                    with stage("schedule"):
                        executable = staged.compile_graph(traced.outputs, traced.inputs(), traced.nargs, dev)
                except TracejitError as e:  # (a body the device cannot compile: a 64-bit scalar on webgpu)
                    log(1, f"{self.__name__}: its loops traced step by step for {dev.name}: {e}")
                    try:
                        with loops.step_by_step():
                            traced = self._trace(args, count=False, sizes=sizes)
                    except TracejitError as again:
                        raise type(e)(
                            f"{e}\n(in a loop compiled as a loop; traced step by step instead, it stops: {again})"
                        ) from None
                    if staged.has_loops(traced.outputs):  # (calls run on the host remain: what failed is theirs)
                        executable = staged.compile_graph(traced.outputs, traced.inputs(), traced.nargs, dev)
                        self._counted(executable, executable.library_calls, dev)
                        return Plan(traced, executable, dev)
                else:
                    self._counted(executable, executable.library_calls, dev)
                    log(
                        1,
                        f"{self.__name__}: {len(executable.kernels)} kernel(s) (loops compiled as loops) for "
                        f"{dev.name} in {1e3 * (time.perf_counter() - t0):.0f} ms",
                    )
                    record(self, traced.infos, dev.name)
                    return Plan(traced, executable, dev)
            axes = axes_of(self._dynamic_axes, traced.infos, self._names) if self._dynamic_axes else None
            # the function at other sizes of its symbolic dimensions (only a device that makes inner sizes
            # arguments asks): which of a kernel's sizes follow the shapes, and which loop variables get
            # layouts that do not depend on their extent (ir/layout.py, `moving`)
            inner = dev.inner_sizes_as_arguments
            twin_args = None
            if named and inner:  # tj.spec(("n", 1024), ...)
                twin_args = [with_sizes(a, {k: v[1] for k, v in named.items()}) for a in args]
            elif self._dynamic is True and inner:
                twin_args = every_size_other(args, traced.infos)
            elif axes and inner:
                twin_args = named_axes_other(args, traced.infos, axes)
            elif self._dynamic is None and inner:  # dimensions seen with a second value: symbolic from now
                twin_args = self._symbolic_twin(args, traced.infos, dev)
            program = self._schedule(
                traced, twin_args, dev, dynamic=self._dynamic, ahead=compile_only, every_loop=bool(named and inner)
            )  # warming: no size of n may compile later
            with stage("verify"):
                for k in program.kernels:
                    verify_kernel(k)
            if debug.enabled(3):  # (formatting costs: not done otherwise)
                log(3, str(traced))
                for k in program.kernels:
                    log(3, k.format())
            try:
                executable = dev.compile(program)
            except Exception as e:
                failed(dev, e)
                raise
        loaded, library = self._counted(executable, len(program.library_calls), dev)
        log(
            1,
            f"{self.__name__}: {len(program.kernels)} kernel(s) for {dev.name} in "
            f"{1e3 * (time.perf_counter() - t0):.0f} ms"
            + (f" ({times.summary()})" if times else "")
            + (
                f"; {'recompiled' if loaded + library < len(program.kernels) else 'retraced (nothing compiled)'}: {why}"
                if why
                else ""
            ),
        )
        profiler.compiled(
            dev.name,
            self.__name__,
            t0,
            time.perf_counter(),
            len(program.kernels),
            loaded,
            times.summary() if times else "",
        )
        for k in executable.kernels:
            log(4, k.source)
        record(self, traced.infos, dev.name)
        return Plan(traced, executable, dev)

    def _counted(self, executable, library: int, dev) -> tuple[int, int]:
        """Count a compile's kernels: compiled here, loaded (from the disk cache, or compiled already for
        another size), run by a library; returns the loaded and library counts."""
        reused = getattr(executable, "reused", ())  # (a Staged's parts compiled earlier for the same graph)
        loaded = sum(bool(k.cached) or id(k) in reused for k in executable.kernels)
        compiled = len(executable.kernels) - loaded - library
        if isinstance(dev, DeviceStats):
            dev.compiles += compiled
        self._counts["compiles"] += compiled
        self._counts["disk_hits"] += loaded
        self._counts["library"] += library
        return loaded, library

    def _twin(self, args) -> Traced | None:
        """The trace of these arguments (other sizes), or None where it does not trace."""
        try:
            return self._trace(args, count=False)  # (a stage of its own)
        except TracejitError as e:
            log(1, f"{self.__name__}: not traced at other sizes ({e}); its sizes become arguments once they change")
            return None

    def _schedule(self, traced: Traced, twin_args, dev, **fields):
        """The program of a trace (`fields`: the Program's dynamic, every_loop and ahead). With symbolic
        dimensions (`twin_args`: the arguments at other sizes of them), its loop variables that follow them
        are moving (ir/layout.py): known from an earlier shape where every kernel is one already met (no twin
        traced), else found by lowering the twin first. The program's twin (which of a kernel's sizes follow
        the shapes) is traced when first asked for: only a kernel whose size-free key was not met before asks."""
        if twin_args is None:
            with stage("schedule"):  # fusion, layout and lowering to kernel IR
                return traced.program(choices.layout_of(dev), **fields)

        def find_twin(program):
            return self._twin_program(twin_args, dev, program)

        known = self._moving.setdefault((dev.name, size_free_key(traced.infos)), {})
        if known:
            with stage("schedule"):
                program = traced.program(
                    choices.layout_of(dev), moving={k: m for k, (_, m) in known.items()}, find_twin=find_twin, **fields
                )
            if all(known.get(k, (None,))[0] == frozenset(ext) for k, ext in program.extents.items()):
                return program
        first = self._twin_program(twin_args, dev)
        with stage("schedule"):
            program = traced.program(
                choices.layout_of(dev), first, find_twin=None if first is None else find_twin, **fields
            )
        if first is None:
            return program
        for name, ext in program.extents.items():
            other = first.extents.get(name, {})
            known[name] = (frozenset(ext), frozenset(v for v, n in ext.items() if other.get(v, n) != n))
        return program

    def _twin_program(self, args, dev, other=None):
        """The program of these arguments (other sizes), lowered with `other`'s moving variables, or None
        where it does not trace or lower at those sizes."""
        twin = self._twin(args)
        if twin is None:
            return None
        try:
            with stage("schedule"):
                return twin.program(choices.layout_of(dev), other)
        except TracejitError as e:
            log(1, f"{self.__name__}: not lowered at other sizes ({e}); its sizes become arguments once they change")
            return None

    def _symbolic_twin(self, args, infos, dev) -> list | None:
        """dynamic=None: the arguments with the dimensions seen to change on this device at another size
        (None before any has): sizes that follow them are arguments of the kernels' code, compiled once and
        reused by later sizes (symbolic_sizes remembers them per kernel), and no layout depends on them."""
        known = [p.traced.infos for k, p in (*self._plans.items(), *self._lowered.items()) if k[0] == dev.name]
        changed = changed_axes(known, infos)
        seen = self._symbolic.get(dev.name, set())
        new = {(i, d) for i, axes in changed.items() for d in axes} - seen
        if new:
            self._symbolic[dev.name] = seen = seen | new
            for key in [k for k in self._moving if k[0] == dev.name]:  # found again with the new axes
                del self._moving[key]
            names = self._names_of(infos)
            log(1, f"{self.__name__}: now symbolic: {', '.join(f'{names[i]}: shape[{d}]' for i, d in sorted(new))}")
        axes: dict[int, tuple[int, ...]] = {}
        for i, d in sorted(seen):
            if infos[i].kind == "array" and d < len(infos[i].shape):
                axes[i] = axes.get(i, ()) + (d,)
        return named_axes_other(args, infos, axes) if axes else None

    def _names_of(self, infos) -> list[str]:
        """A name for each position of a flat argument tuple (its ArgInfos), for messages."""
        layout = infos[-1].value if infos and isinstance(infos[-1].value, Layout) else None
        return self._params.leaf_names(len(infos), layout)

    def _new_signature(self, args, device: str) -> str | None:
        """TRACEJIT_DEBUG=1: what differs between these arguments and the nearest signature this function
        already has a plan for on the device, per argument (as JAX's explain_cache_misses), or None for
        the function's first signature there."""
        new = [ArgInfo("static", value=a) if i in self._static else describe(a, i) for i, a in enumerate(args)]
        known = [p.traced.infos for k, p in (*self._plans.items(), *self._lowered.items()) if k[0] == device]
        if not known:
            return None
        names = self._names_of(new)
        changes = min((signature_changes(names, old, new) for old in known), key=len)
        return "; ".join(changes) or "a signature evicted from the plan cache came back"

    @guarded("tracing")
    def _trace(self, args, count: bool = True, sizes: tuple[int, ...] | None = None) -> Traced:
        """The graph of a call with these arguments (_trace_once), traced again where the trace imported numpy.random:
        its functions draw from tracejit's generator only once imported (allocation.traced_arrays)."""
        loaded = "numpy.random" in sys.modules
        traced = self._trace_once(args, count, sizes)
        if not loaded and "numpy.random" in sys.modules:
            return self._trace_once(args, False, sizes)
        return traced

    def _trace_once(self, args, count: bool = True, sizes: tuple[int, ...] | None = None) -> Traced:
        """The graph of a call with these arguments. `sizes`: the counts of its sizes that depend on the data
        (numpy/data_sizes.py), in the order the trace meets them; where it meets one more, the graph returned is
        the probe that computes that count (Traced.probe). None: such a size is refused (tracing alone cannot know
        it)."""
        infos = [ArgInfo("static", value=a) if i in self._static else describe(a, i) for i, a in enumerate(args)]
        tensors = []
        for i, (a, info) in enumerate(zip(args, infos)):
            if info.kind == "static":  # (a dict or list: the trace's own copy, which it must not change)
                tensors.append(copy.deepcopy(a) if type(a) in (dict, list) else a)
            elif info.kind == "default":
                tensors.append(info.value)
            elif info.kind == "scalar":  # (a Python bool's arithmetic is Python's: True + True is 2)
                kind = PythonBool if type(a) is bool else Tensor
                tensors.append(kind(build.input_(i, info.dtype, info.shape, weak=True)))
            elif info.kind == "generator":  # a np.random.Generator: draws from its stream (random_draws.py)
                tensors.append(random_draws.argument(i))
            else:
                node = build.input_(i, info.dtype, info.shape)
                t = Tensor.argument(node, i, info.strides, info.writeable)
                tensors.append(complex_values.argument(t, info.complex) if info.complex else t)
        roots = [complex_values.root(t) for t in tensors]  # (a complex argument's memory: its parts' array)
        # the arguments' Tensors, a complex one's parts' array too: a loop compiled as a loop carries what it changes
        living = list({id(t): t for t in (*tensors, *roots)}.values())
        self._counts["traces"] += count
        # Python numbers, and NumPy's integer scalars (read-only 0-d arrays by now: signature.scalar_array): NumPy
        # takes either as a size, a count or an index (np.zeros(np.int64(3))), so the kernel specialises on them there.
        # (Not a writeable 0-d array: the trace would hold the caller's memory itself, whose changes it would miss.)
        numbers = {
            i: a
            for i, (a, info) in enumerate(zip(args, infos))
            if info.kind == "scalar"
            or type(a) is np.ndarray
            and a.ndim == 0
            and a.dtype.kind in "iub"
            and not a.flags.writeable
        }
        try:
            with (
                stage("trace"),
                random_draws.drawing(len(infos)) as draws,
                allocation.traced_arrays(getattr(self.fn, "__globals__", None)),
                faulting.recorded() as can_fault,
                python_numbers.known(numbers) as used,
                trace_budget(_trace_values(), living),
                host_calls.allowed(self._fallback),
                data_sizes.known(sizes or ()) as found,
                captured.holding() as held,
            ):
                try:
                    # (returning x[mask]: the selected elements, their count read when it runs)
                    result = arrays(self._params.call(self._visible_function(), tensors))
                except python_numbers.Specialise as e:  # (before a long loop traced step by step: loops.py)
                    raise NeedsNumbers(e.used) from None
                except data_sizes.NeedsSize as e:
                    if used:
                        raise NeedsNumbers(used) from None
                    if sizes is None:
                        raise UnsupportedError(
                            f"{e.where}: {self.__name__} has a size that depends on the data (x[mask], np.nonzero, "
                            "np.unique, ...): its graph is known only once a call has read that count; call it "
                            "(f.explain(*args) shows what a call does)"
                        ) from None
                    return probe(self.__name__, e, infos, draws.streams, found.used, held)
        except TraceError as e:
            hint = source_rewrite.unread_source_hint(e.__traceback__)
            raise type(e)(f"{_user_location(e.__traceback__)}{e}{hint}").with_traceback(None) from None
        for i, (a, given) in enumerate(zip(args, tensors)):
            if type(a) in (dict, list) and i in self._static and _changed(a, given):
                raise UnsupportedError(
                    f"{self.__name__} changes its argument {self._names_of(infos)[i]} (a {type(a).__name__}) while it "
                    "runs; a kernel cannot hand such a change back to the caller as NumPy code does: return the new "
                    "values instead (or copy the argument first)"
                )
        if used:  # a Python number the code needed as a number: traced again with it a constant
            raise NeedsNumbers(used)
        tuple_result = isinstance(result, (tuple, list))
        # None: a procedure, which only assigns into its arguments (or does nothing); the call returns None
        results = list(result) if tuple_result else [] if result is None else [result]
        structure = None
        if tuple_result and any(isinstance(r, (tuple, list)) for r in results):  # (out, (x, w, b, conv_param))
            flat: list = []
            structure = template(result, flat)
            results = flat
        for r in results:
            if isinstance(r, conditional_expressions.PartlyBound):
                r._refuse()  # (a TraceError that says which name and why)
        for r in _dicts(result):
            if any(isinstance(v, Tensor) for v in _leaves(r)):
                raise TraceError(
                    f"{self.__name__} returns a dict of traced values: a kernel returns arrays and numbers, in a tuple "
                    "or nested tuples and lists; return the dict's values and make the dict after the call"
                )
        complex_outputs = {k: r.dtype for k, r in enumerate(results) if isinstance(r, complex_values.ComplexTensor)}
        if structure is not None and complex_outputs:
            raise UnsupportedError(
                f"{self.__name__} returns complex arrays inside nested tuples: not supported yet; return them in one "
                "flat tuple (a, b, c) and group them after the call"
            )
        results = [r.parts_array() if k in complex_outputs else r for k, r in enumerate(results)]
        try:
            with captured.holding(held):  # (a large NumPy array returned as it is: held as one it used)
                outputs = [as_node(r) for r in results]
        except TracejitError as e:
            raise TraceError(f"{self.__name__} must return traced values or scalars: {e}") from None
        # arguments assigned into: their new values are outputs too, written back by the call
        assigned = [
            i
            for i, t in enumerate(roots)
            if isinstance(t, Tensor)
            and t._argument is not None
            and t._value is not build.input_(i, infos[i].dtype, infos[i].shape)
        ]
        sized = list(found.nodes.values())  # every count a size depends on is checked, read or not
        with stage("simplify"):  # (the checks with the rest: a node simplify rewrites is rewritten in both)
            simplified = simplify(outputs + [roots[j]._value for j in assigned] + can_fault + sized)
        n, m, f = len(outputs), len(outputs) + len(assigned), len(outputs) + len(assigned) + len(can_fault)
        outputs, new_values, can_fault, sized = simplified[:n], simplified[n:m], simplified[m:f], simplified[f:]
        changed = [(j, v) for j, v in zip(assigned, new_values) if v is not build.input_(j, v.dtype, v.shape)]
        outputs += [v for _, v in changed]
        checks = faulting.checks(outputs, can_fault)  # powers and indexing no output reads still raise
        checks += sized
        outputs += checks
        with stage("verify"):
            verify_graph(outputs)
        traced = Traced(
            self.__name__,
            outputs,
            None if result is None else tuple_result,
            infos,
            tuple(j for j, _ in changed),
            len(checks),
            draws.streams,
            held,
        )
        traced.sizes = found.used if found.nodes else None
        traced.complex_outputs = complex_outputs
        if tuple_result and hasattr(result, "_fields"):  # NumPy's named results (SVDResult, ...) keep their names
            traced.named = type(result)
        if structure is not None:
            if traced.narrow_outputs:
                raise UnsupportedError(
                    f"{self.__name__} returns bfloat16 or float8 arrays inside nested tuples: not supported yet; "
                    "return them in one flat tuple (a, b, c) and group them after the call"
                )
            traced.structure = structure
        return traced

    def __repr__(self) -> str:
        return f"<tracejit.kernel {self.__name__}>"

    def _sized_plan(self, args, dev: str, sizes: tuple[int, ...]) -> Plan:
        """The plan of a call whose sizes that depend on the data have these counts (those after them unknown: a
        probe), for frontend/sized.py."""
        with self._lock:
            return self._lower(args, dev, sizes=sizes)

    def __reduce__(self):
        # sent to another process (a Dask worker): rebuilt there once from its function and options
        return shipping.reduce(self)


class _Nothing:
    """The executable of a function that computes nothing (it returns None and assigns into nothing)."""

    kernels: list = []
    program = None


NOTHING = _Nothing()


class BoundKernel:
    """A kernel read from an instance (or, for a classmethod, from its class): called with that first."""

    __slots__ = ("kernel", "bound")

    def __init__(self, kernel: Kernel, bound: object) -> None:
        self.kernel, self.bound = kernel, bound

    def __call__(self, *args: object, device: str | None = None, **kwargs: object) -> Any:
        return self.kernel(self.bound, *args, device=device, **kwargs)

    def trace(self, *args: object, **kwargs: object) -> Traced:
        return self.kernel.trace(self.bound, *args, **kwargs)

    def lower(self, *args: object, device: str | None = None, **kwargs: object) -> Plan:
        return self.kernel.lower(self.bound, *args, device=device, **kwargs)

    def __getattr__(self, name):  # cache_info, __name__, __doc__, ...
        return getattr(self.kernel, name)

    def __repr__(self) -> str:
        return f"<bound tracejit.kernel {self.kernel.__qualname__} of {self.bound!r}>"


# arguments a call can key its plan on as they are (no object to take apart, no class to make a constant)
_PLAIN_ARGUMENTS = frozenset((np.ndarray, Array, float, int, bool))

PLAN_CACHE_SIZE = 128
ENV_PLAN_CACHE_SIZE = "TRACEJIT_PLAN_CACHE_SIZE"


def plan_cache_size() -> int:
    """Plans kept in memory per function and device kind (TRACEJIT_PLAN_CACHE_SIZE, default 128)."""
    value = os.environ.get(ENV_PLAN_CACHE_SIZE)
    try:
        return max(1, int(value)) if value else PLAN_CACHE_SIZE
    except ValueError:
        raise ArgumentError(f"{ENV_PLAN_CACHE_SIZE}={value!r} is not a whole number of plans") from None


def _dicts(value) -> list:
    """The dicts in a result, itself one or among its nested tuples and lists."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, (tuple, list)):
        return [d for v in value for d in _dicts(v)]
    return []


def _leaves(value) -> list:
    """The values of nested tuples, lists and dicts."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _user_location(tb) -> str:
    """'file:line: ' of the innermost frame outside tracejit and NumPy (told by the frame's module, not its
    path: a user's kernels/heat_numpy.py is the user's), and outside installed libraries where the user's code
    called one (scipy.special.logsumexp failing inside SciPy: the user's line that called it): where the user's
    code went wrong."""
    where, library = "", ""
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__") or ""
        if module.partition(".")[0] not in ("tracejit", "numpy"):
            found = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}: "
            if installed_library(tb.tb_frame.f_code.co_filename):
                library = library or found
            else:
                where = found
        tb = tb.tb_next
    return where or library


@overload
def kernel(
    fn: Callable[..., object] | staticmethod | classmethod,
    *,
    static: str | Sequence[str] = (),
    device: str | None = None,
    dynamic: Dynamic = None,
    fallback: bool | None = None,
    autotune: bool = False,
) -> Kernel: ...
@overload
def kernel(
    fn: None = None,
    *,
    static: str | Sequence[str] = (),
    device: str | None = None,
    dynamic: Dynamic = None,
    fallback: bool | None = None,
    autotune: bool = False,
) -> Callable[[Callable[..., object] | staticmethod | classmethod], Kernel]: ...


def kernel(
    fn: Callable[..., object] | staticmethod | classmethod | None = None,
    *,
    static: str | Sequence[str] = (),
    device: str | None = None,
    dynamic: Dynamic = None,
    fallback: bool | None = None,
    autotune: bool = False,
) -> Kernel | Callable[[Callable[..., object] | staticmethod | classmethod], Kernel]:
    """Decorator: @tj.kernel or @tj.kernel(static=("axis",), device="numba").

    dynamic: None (the default): every new shape is traced again; a dimension seen with a second value
    becomes symbolic: the kernel sizes that follow it are arguments of one more compile, which later
    sizes reuse, and no layout depends on them (ir/layout.py, `moving`). True: every dimension symbolic
    from the first compile (found by tracing once more with every dimension one off). {"x": (0,)}: the
    same for the named axes of the named parameters only (an int for one axis; negative axes count
    from the end); the other dimensions behave as with None. False: the sizes inside a kernel stay
    constants of its code, so each new one compiles. On every device the global size (a numba kernel's
    loop bound, a SIMT
    kernel's bounds check) is an argument either way.

    fallback: a call tracejit does not compile (np.linalg.eig, scipy.special.gamma) runs with NumPy on the host
    in the middle of the kernel, with a tj.FallbackWarning once per call site (True; None, the default: as
    TRACEJIT_FALLBACK says, on unless it is 0), or is refused with a tj.UnsupportedError at its line (False).

    autotune: True: the first call of each new signature (shapes, dtypes, device) times the device's layout choices
    (tiles, work-group sizes, threads) on copies of its arguments and keeps the fastest in the disk cache, which
    every later process reads instead of timing again (frontend/autotune.py; tj.tune(f, *args) does it on
    demand and reports what it measured)."""
    if dynamic not in (None, False, True) and not isinstance(dynamic, dict):
        raise UnsupportedError(
            f"@tj.kernel(dynamic={dynamic!r}): pass dynamic=True (every size of a kernel an argument from the "
            "first call), a dict of parameter name -> axes ({'x': (0,)}: those axes symbolic from the first "
            "call), leave `dynamic` out (sizes become arguments once a second value is seen) or pass "
            "dynamic=False to compile every size on its own"
        )
    if fallback not in (None, True, False):
        raise UnsupportedError(f"@tj.kernel(fallback={fallback!r}): pass True or False")
    if autotune not in (True, False):
        raise UnsupportedError(f"@tj.kernel(autotune={autotune!r}): pass True or False")
    if fn is None:
        return lambda f: Kernel(f, static, device, dynamic, fallback, autotune)
    return Kernel(fn, static, device, dynamic, fallback, autotune)
