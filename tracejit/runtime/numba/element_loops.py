"""Running a loop over elements (ir/element_loops.py) on the numba device: its function (codegen/cpu/element_loops.py)
compiled by Numba into the disk cache like the kernels' modules, called once for the whole loop nest.

The arrays the loop carries are copied once before it (the first values may be the caller's arrays or values
other parts of the program still read), then updated in place by the function."""

from __future__ import annotations

import itertools

import numpy as np

from tracejit.codegen.cpu import element_loops as render_loops
from tracejit.ir.element_loops import Plan
from tracejit.runtime.debug import log, stage
from tracejit.runtime.numba import compiler


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
        with stage("render"):
            rendered = render_loops.render(plan)
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
        signature = numba.types.void(*[head] * self.heads, *flat, *free, numba.types.Array(numba.types.int64, 1, "C"))
        key = device._key(self.source, render_loops.NAME)
        with compiler._LOAD_LOCK:
            (self._entry, _), self.cached = device._load_function(
                self.source, key, render_loops.NAME, signature, parallel=False, nogil=False, contract=False
            )

    def __call__(self, heads, carried, free, donated=()) -> list:
        """`donated`: per carried value, whether its first value is memory this loop may update in place (one
        another loop over elements made, that nothing else reads)."""
        loop = self.plan.loop
        if loop.kind == "for":
            heads = [int(h) for h in heads]
            read = iter(heads)
            if [next(read) if b is None else b for b in loop.bounds][2] == 0:
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
        error = np.zeros(2, np.int64)
        self._entry(*heads, *memory, *reads, error)
        if error[0]:
            raise self.faults[int(error[0])].exception(int(error[1]))
        return [
            m.reshape(x.shape) if x.shape else (m[0].item() if x.weak else m.reshape(()))
            for x, m in zip(self.carried, memory)
        ]
