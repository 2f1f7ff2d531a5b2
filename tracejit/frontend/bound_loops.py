"""A `for` loop's steps run from launches bound once, on the numba device: the per-step cost of a loop whose body
is small (the cavity flow's 35,000 pressure sweeps of a 41 x 41 grid, an n-body step of 100 particles).

Run step by step (frontend/staged.py), each step calls the body's program, which takes its arguments apart,
allocates or looks up its outputs and calls its kernels: several microseconds of Python a step, more than the
kernels of a small grid take. Here the program is bound three times, as graph capture binds it (Program.bind: each
kernel with its arrays, nothing run): the first step reading the loop's first values, a second step reading the
first's results, a third reading the second's and writing into the first's memory, so that the second and third
bindings alternate from then on, each reading what the other wrote. The loop's index is a 0-d array the kernels
read, set before each step. A step is then its kernels' calls and nothing else.

Only where every carried value's next value is memory of the step's own (an output no other output shares, not an
argument passed through), the index is an int the kernels take as int64 or a narrower int that holds every step's
index, the loop runs at least MIN_STEPS steps, and no profile is being taken (tj.profile times each kernel through
the program's timed runner). A kernel that faults raises its error from the step where it faults, as the program
would.
"""

from __future__ import annotations

import weakref

import numpy as np

from tracejit.runtime import profiler

MIN_STEPS = 8  # below this, binding three steps costs more than running them


def bindable(executable, carried: int) -> bool:
    """Whether the body's executable can run bound (known while compiling; the module docstring says why)."""
    program = getattr(executable, "program", None)
    if program is None or not hasattr(executable, "bind") or getattr(executable, "staged", False):
        return False
    # (loop_stores.py: what a body stores in place is no output of its program)
    stored: frozenset[int] = getattr(executable, "in_place", frozenset())
    keys = [k for j, k in enumerate(program.outputs[:carried]) if j not in stored]
    index = [b for k, b in program.buffers.items() if k.argument and k.index == 0]
    if index and (index[0].shape != () or index[0].dtype.kind not in "iu"):
        return False
    return len(set(keys)) == len(keys) and not any(k.argument for k in keys)


def run(executable, steps: range, carried: list, free: tuple, device) -> list | None:
    """The carried values after the loop's steps, or None where the steps must run one by one (too few, a profile
    taken, an index the kernels' int type does not hold, bindings that do not alternate)."""
    if len(steps) < MIN_STEPS or profiler.ACTIVE:
        return None
    program = executable.program
    index = [b for k, b in program.buffers.items() if k.argument and k.index == 0]
    dtype = index[0].dtype if index else np.dtype(np.int64)
    info = np.iinfo(dtype)
    if not (info.min <= min(steps[0], steps[-1]) and max(steps[0], steps[-1]) <= info.max):
        return None
    small = sum(np.asarray(v).nbytes for v in (*carried, *free)) <= KEPT_BYTES
    if small and not program.int_scalars:  # (a Python int the kernels take narrower is checked by each binding)
        pool = _KEPT.setdefault(executable, [])
        kept = pool.pop() if pool else _Kept.bind(executable, dtype, carried, free)
        if kept is not None:
            try:
                return kept.run(steps, carried, free, device)
            finally:
                pool.append(kept)
    n = len(carried)
    cell = np.zeros((), dtype)
    bind = getattr(executable, "bind_steps", executable.bind)
    first, launches0, _ = bind((cell, *carried, *free))
    odd, launches1, _ = bind((cell, *first[:n], *free))
    even, launches2, _ = bind((cell, *odd[:n], *free), _into(executable, first[:n]))
    if any(a is not b and not np.shares_memory(a, b) for a, b in zip(even[:n], first[:n])):
        return None  # (the third step's results are not in the first's memory: nothing to alternate)
    last = first
    for count, i in enumerate(steps):
        cell[()] = i
        if count == 0:
            launches, last = launches0, first
        elif count % 2:
            launches, last = launches1, odd
        else:
            launches, last = launches2, even
        for fn, args in launches:
            fn(*args)
    device.launches += len(launches0) + (len(steps) - 1) * len(launches1)
    return list(last[:n])


# A loop whose values are small (the cavity flow's pressure sweeps: a 41 x 41 grid, run 700 times a call, 50 steps
# each time) keeps two bindings between its runs, in memory of their own, alternating from the first step: a run
# copies the loop's first values and the values it reads into that memory and its results out of it, where binding
# three steps anew costs more (about 50 us a binding) than the steps themselves. A pool per body: a run on another
# thread meanwhile takes bindings of its own.
KEPT_BYTES = 1 << 20
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _into(executable, memory: list) -> dict:
    """The carried values' outputs (but those a body stores in place: loop_stores.py) written into `memory`."""
    stored: frozenset[int] = getattr(executable, "in_place", frozenset())
    keys = executable.program.outputs[: len(memory)]
    return {k: m for j, (k, m) in enumerate(zip(keys, memory)) if j not in stored}


class _Kept:
    """Two bindings of a loop body: `a` reads the carried values from `inputs` and writes into `outputs`, `b` reads
    those and writes into `inputs`; both read the loop's other values from `free` and its index from `cell`."""

    def __init__(self, cell, inputs, free, a, b, outputs):
        self.cell, self.inputs, self.free, self.a, self.b, self.outputs = cell, inputs, free, a, b, outputs

    @staticmethod
    def bind(executable, dtype: np.dtype, carried: list, free: tuple) -> _Kept | None:
        n = len(carried)
        cell = np.zeros((), dtype)
        program = executable.program
        dtypes = {k.index: b.dtype for k, b in program.buffers.items() if k.argument}

        def own(value, position: int):  # (a Python number: 0-d memory of the dtype the kernels read it in)
            return np.array(value, dtypes.get(position) if np.ndim(value) == 0 else None, copy=True)

        inputs = [own(v, 1 + j) for j, v in enumerate(carried)]
        memory = [own(v, 1 + n + j) for j, v in enumerate(free)]
        bind = getattr(executable, "bind_steps", executable.bind)
        outputs, a, _ = bind((cell, *inputs, *memory))
        back, b, _ = bind((cell, *outputs[:n], *memory), _into(executable, inputs))
        if any(x is not y and not np.shares_memory(x, y) for x, y in zip(back[:n], inputs)):
            return None
        return _Kept(cell, inputs, memory, a, b, outputs[:n])

    def run(self, steps: range, carried: list, free: tuple, device) -> list:
        for memory, value in zip(self.inputs, carried):
            np.copyto(memory, value)
        for memory, value in zip(self.free, free):
            np.copyto(memory, value)
        cell, a, b = self.cell, self.a, self.b
        for count, i in enumerate(steps):
            cell[()] = i
            for fn, args in b if count % 2 else a:
                fn(*args)
        device.launches += len(steps) * len(a)
        last = self.outputs if len(steps) % 2 else self.inputs
        return [np.array(v, copy=True) for v in last]
