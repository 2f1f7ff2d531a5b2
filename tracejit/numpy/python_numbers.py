"""The kernel's Python-number arguments while it is traced: where the code needs one as a Python number (a range
bound, a shape, a count, an index, int(), float(), an `if`), the value the kernel was called with, and which
arguments were so used: the kernel's plan is then specialised on their values (frontend/kernel.py)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np

from tracejit.ir.evaluate import value_given
from tracejit.ir.graph import Node

# (argument position -> its value, argument position -> the first use that needed it) of the trace running here
_CURRENT: contextvars.ContextVar[tuple[Mapping[int, object], dict[int, str]] | None] = contextvars.ContextVar(
    "tracejit_python_numbers", default=None
)


@contextmanager
def known(values: Mapping[int, object]) -> Iterator[dict[int, str]]:
    """Trace with these Python-number arguments' values at hand; yields the positions used as numbers."""
    used: dict[int, str] = {}
    token = _CURRENT.set((values, used))
    try:
        yield used
    finally:
        _CURRENT.reset(token)


def value_of(node: Node, use: str, note: bool = True) -> np.ndarray | None:
    """The value of `node` where it is computed from Python-number arguments (and constants) alone, noting
    those arguments as used for `use` (unless not `note`: a look that does not specialise the kernel); None
    where it depends on an array or nothing is known."""
    state = _CURRENT.get()
    if state is None:
        return None
    values, used = state
    found = value_given(node, values)
    if found is None:
        return None
    value, positions = found
    for i in positions if note else ():
        used.setdefault(i, use)
    return value


class Specialise(Exception):
    """Raised where tracing on would be slow for nothing: Python-number arguments were already used as numbers, so
    the kernel will be traced again with them as constants (frontend/kernel.py), and what comes next may then take
    a faster path (a long loop traced step by step because its bounds or slices were not known yet: numpy-benchmarks'
    cma_pt, whose `N = (L // os // ntaps - 1) * ntaps` uses `os` before its 1,470-step loop)."""

    def __init__(self, used: dict[int, str]):
        super().__init__(used)
        self.used = used


def retrace_pending() -> None:
    """Specialise now where this trace has used Python-number arguments as numbers (see Specialise)."""
    state = _CURRENT.get()
    if state is not None and state[1]:
        raise Specialise(dict(state[1]))
