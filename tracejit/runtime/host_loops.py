"""Loops over elements (ir/element_loops.py) of a GPU-API device's program, run on the host by the numba device's
compiled function (runtime/numba/element_loops.py): such a loop is sequential, one step after another, and one CPU
core runs it faster than one GPU thread, let alone one launch per step. The values it starts from are copied to the
host once before it, the arrays it leaves copied back to the device once after it."""

from __future__ import annotations

import numpy as np

from tracejit.errors import DeviceError
from tracejit.runtime.array import Array
from tracejit.runtime.debug import log


class OnHost:
    """A loop over elements of `device`'s program, run by `loop` (the numba device's) on the host."""

    element = True
    kernels: tuple = ()
    program = None

    def __init__(self, loop, device):
        self.loop, self.device = loop, device

    def __call__(self, heads, carried, free, donated=()) -> list:
        # (host memory given to the loop, a constant it starts from, is updated in place; a copy of a device's is not
        # assumed to be one)
        given = [bool(d) and isinstance(v, np.ndarray) for v, d in zip(carried, donated)]
        finals = self.loop(heads, [_host(v) for v in carried], [_host(v) for v in free], given)
        return [v if type(v) in (bool, int, float) else self.device.from_numpy(np.array(v, order="C")) for v in finals]


def _host(value):
    """A value as the host has it: a device's array copied there (a number or a NumPy array as it is)."""
    if isinstance(value, Array):
        return value.numpy()
    return value


def on_host(plan, device) -> OnHost | None:
    """`plan` run on the host for `device` (None where the numba device is not available here)."""
    from tracejit.runtime import registry

    try:
        host = registry.device("numba")
    except DeviceError:
        return None
    log(1, f"the loop over elements at {plan.loop.where} runs on the host: its arrays are copied there and back once")
    return OnHost(host.element_loop(plan), device)
