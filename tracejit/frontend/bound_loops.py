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
    n = len(carried)
    cell = np.zeros((), dtype)
    bind = getattr(executable, "bind_steps", executable.bind)
    first, launches0, _ = bind((cell, *carried, *free))
    odd, launches1, _ = bind((cell, *first[:n], *free))
    stored: frozenset[int] = getattr(executable, "in_place", frozenset())
    into = {k: m for j, (k, m) in enumerate(zip(program.outputs[:n], first[:n])) if j not in stored}
    even, launches2, _ = bind((cell, *odd[:n], *free), into)
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
