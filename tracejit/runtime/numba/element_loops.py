"""Running a loop over elements (ir/element_loops.py) on the numba device: its function (codegen/cpu/element_loops.py)
compiled by Numba into the disk cache like the kernels' modules, called once for the whole loop nest.

The arrays the loop carries are copied once before it (the first values may be the caller's arrays or values
other parts of the program still read), then updated in place by the function."""

from __future__ import annotations

import itertools

import numpy as np

from tracejit.codegen.cpu import element_loops as render_loops
from tracejit.ir import loop_dependence
from tracejit.ir.element_loops import Plan
from tracejit.runtime import choices
from tracejit.runtime.debug import log, stage
from tracejit.runtime.numba import compiler
from tracejit.runtime.numba import threads as numba_threads

PARALLEL_MIN_WORK = 1 << 16  # element operations below which one thread runs the loop sooner than several
PARTS_PER_THREAD = 4  # the parts a loop's independent steps are cut into, per thread (see _in_parts)


class ElementLoop:
    """A loop over elements, compiled: called with the LOOP node's sources' values (its bounds read from arrays or
    first test, the carried values' first values, the values the body reads), it returns the carried values'
    values after the loop."""

    element = True
    kernels: tuple = ()  # (it is no kernel of the IR: f.lower() lists the loop's source under its kernels' parts)
    program = None

    def __init__(self, plan: Plan, device):
        import numba

        self.plan = plan
        loop = plan.loop
        # steps that are independent run in parts on threads, where the work pays for waking them
        self.independent = loop_dependence.independent(plan)
        self.step_work = loop_dependence.work(plan)
        self.parallel_min_work = choices.parallel_min_work(PARALLEL_MIN_WORK)  # (autotune's choice, where applied)
        with stage("render"):
            rendered = render_loops.render(plan, parts=self.independent is not None)
        self.source, self.faults = rendered.source, {f.code: f for f in rendered.faults}
        log(4, self.source)  # (TRACEJIT_DEBUG=4 prints every generated source)
        first = 1 if loop.kind == "for" else 0
        self.carried = loop.inputs[first : first + loop.carried]
        self.free = loop.inputs[first + loop.carried :]
        self.heads = loop.heads
        head = numba.types.boolean if loop.kind == "while" else numba.types.int64
        flat = [numba.types.Array(numba.from_dtype(x.dtype), 1, "C") for x in self.carried]
        free = [
            numba.types.Array(numba.from_dtype(x.dtype), 1, "C") if x.shape else numba.from_dtype(x.dtype)
            for x in self.free
        ]
        parts = [numba.types.int64] * 2 if self.independent is not None else []
        error = numba.types.Array(numba.types.int64, 1, "C")
        signature = numba.types.void(*parts, *[head] * self.heads, *flat, *free, error)
        key = device._key(self.source, render_loops.NAME)
        with compiler._LOAD_LOCK:
            (self._entry, _), self.cached = device._load_function(
                self.source,
                key,
                render_loops.NAME,
                signature,
                parallel=False,
                nogil=self.independent is not None,
                contract=False,
            )
        if self.independent is not None:
            log(1, f"the steps of the loop at {loop.where} are independent: they run in parts on threads")

    def __call__(self, heads, carried, free, donated=()) -> list:
        """`donated`: per carried value, whether its first value is memory this loop may update in place (one
        another loop over elements made, that nothing else reads)."""
        loop = self.plan.loop
        steps = None
        if loop.kind == "for":
            heads = [int(h) for h in heads]
            read = iter(heads)
            steps = [next(read) if b is None else b for b in loop.bounds]
            if steps[2] == 0:
                raise ValueError("range() arg 3 must not be zero")
        else:
            heads = [bool(h) for h in heads]
        memory = []
        for x, value, given in itertools.zip_longest(self.carried, carried, donated):
            if given and x.shape and isinstance(value, np.ndarray) and value.dtype == x.dtype:
                memory.append(value.reshape(-1))
            else:
                memory.append(np.array(value, x.dtype, order="C", ndmin=1).reshape(-1))  # (a copy, updated in place)
        reads = [
            np.ascontiguousarray(value, x.dtype).reshape(-1) if x.shape else x.dtype.type(value)
            for x, value in zip(self.free, free)
        ]
        if self.independent is None:
            error = np.zeros(2, np.int64)
            self._entry(*heads, *memory, *reads, error)
        else:
            assert steps is not None
            error = self._in_parts(steps[0], steps[1], (*heads, *memory, *reads))
        if error[0]:
            raise self.faults[int(error[0])].exception(int(error[1]))
        return [
            m.reshape(x.shape) if x.shape else (m[0].item() if x.weak else m.reshape(()))
            for x, m in zip(self.carried, memory)
        ]

    def bind(self, heads, carried, free) -> tuple[list, list, list]:
        """For graph capture (frontend/staged.py): the loop as one launch bound for good, as the device's replay()
        takes it, its carried values in memory of its own, and that memory; runs nothing. Each run fills that memory
        with the first values, reads the bounds and the values the body reads where they are then, and runs the loop
        nest in place. (The capture may move graph memory into shared blocks, flat: each array is given its shape
        again.)"""
        memory = [np.empty(x.shape, x.dtype) for x in self.carried]
        shapes = [x.shape for x in (*self.carried, *self.free)]
        nh, nc = len(heads), len(carried)

        def run(*args):
            given = [a.reshape(-1)[0] if isinstance(a, np.ndarray) else a for a in args[:nh]]
            firsts, reads, outs = args[nh : nh + nc], args[nh + nc : len(args) - nc], args[len(args) - nc :]
            shaped = [a.reshape(shape) if isinstance(a, np.ndarray) else a for a, shape in zip((*outs, *reads), shapes)]
            outs, reads = shaped[:nc], shaped[nc:]
            for out, first in zip(outs, firsts):
                np.copyto(out, first.reshape(out.shape) if isinstance(first, np.ndarray) else first)
            for out, final in zip(outs, self(given, outs, reads, [True] * nc)):
                if not (isinstance(final, np.ndarray) and np.shares_memory(out, final)):
                    np.copyto(out, final)  # (a 0-d value is copied by the call)

        return memory, [(run, (*heads, *carried, *free, *memory))], list(memory)

    def _in_parts(self, start: int, stop: int, args: tuple) -> np.ndarray:
        """Run the independent steps [start, stop): in parts on threads where the index stays inside the axes it
        picks (a negative one would count from the end) and the work pays for the threads, else in one call. The
        error the first step to fail in the loop's order recorded (each part records its own)."""
        assert self.independent is not None
        count = min(numba_threads.thread_count(), stop - start)
        inside = 0 <= start and stop <= min(self.independent.sizes, default=stop)
        work = (stop - start) * self.step_work
        if count < 2 or not inside or work < self.parallel_min_work:
            error = np.zeros(2, np.int64)
            self._entry(start, stop, *args, error)
            return error
        # PARTS_PER_THREAD parts a thread (each at least parallel_min_work / 4 of work), taken by whichever thread
        # is free: one woken late takes fewer (numba_threads.run_shared)
        chunks = min(count * PARTS_PER_THREAD, stop - start, max(count, 4 * work // max(self.parallel_min_work, 1)))
        errors = np.zeros((chunks, 2), np.int64)
        bounds = [start + (stop - start) * c // chunks for c in range(chunks + 1)]
        parts = [(bounds[c], bounds[c + 1], (*args, errors[c])) for c in range(chunks)]
        numba_threads.run_shared(self._entry, parts, count)
        return next((e for e in errors if e[0]), errors[0])
