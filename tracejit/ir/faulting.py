"""Nodes that can raise when their kernel runs: an integer power (a negative exponent) and integer-array
indexing (an index outside its axis). NumPy raises for them even where their value is never used, as in
np.isnan(a ** b) of integers (False whatever the power) or a power computed and dropped; the trace
records each one made (recorded) and keeps those no output reads as checks (frontend/kernel.py), so a
call raises where NumPy raises."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from tracejit.ir.graph import Node, Op

if TYPE_CHECKING:
    from tracejit.ir.kernel_ir import Fault

_local = threading.local()
_CHECKS: dict[int, Fault] = {}  # check()'s faults by code: its reads are known by their table alone


def check(ok: Node, fault: Fault, dtype: str = "int64") -> Node:
    """A 0-d int zero (weak, as a Python 0) whose computation raises `fault` when the kernel runs where the
    0-d bool `ok` is False (int() of NaN: Python's errors that a kernel finds only when it runs): a read of a
    one-element table at 0 where ok holds, at 1 (outside it) where not, its IndexError replaced by `fault`.
    Added to a value, the check runs wherever the value is computed. The table holds the fault's code (and
    the read minus the code is the zero), so the read is known for what it is after any rewrite of the graph
    (fault_of). `dtype`: int32 where the device may compute no int64 (webgpu); the fault's code fits in it."""
    from tracejit.ir import build

    assert ok.shape == () and ok.dtype == bool, ok
    _CHECKS[fault.code] = fault
    index = build.where(ok, build.const(0, dtype, ()), build.const(1, dtype, ()))
    code = build.const(fault.code, dtype, (), weak=True)
    read = build.gather(build.const(fault.code, dtype, (1,), weak=True), (index,), (None,))
    return build.binary(Op.SUB, read, code)


def fault_of(n: Node) -> Fault | None:
    """The error a GATHER made by check() raises in place of its IndexError, else None."""
    if n.op is not Op.GATHER:
        return None
    table = n.srcs[0]
    if table.op is not Op.CONST or table.shape != (1,) or not table.weak or table.dtype not in ("int64", "int32"):
        return None
    return _CHECKS.get(table.arg)


def can_fault(n: Node) -> bool:
    if n.op is Op.GATHER:
        return True
    if n.op is Op.POW and n.dtype.kind == "i":
        exponent = n.srcs[1]
        return not (exponent.op is Op.CONST and exponent.arg >= 0)
    return False


def narrows_python_int(n: Node) -> bool:
    """Whether n casts a Python-int argument (a weak 0-d int64 input) to a narrower or unsigned int dtype: NumPy
    (NEP 50) raises OverflowError where the int does not fit, which the plan checks on each call (fuse's
    int_scalars), so such a cast must stay in the graph even where nothing reads it."""
    if n.op is not Op.CAST or n.dtype.kind not in "iu" or not (n.dtype.itemsize < 8 or n.dtype.kind == "u"):
        return False
    src = n.srcs[0]
    return src.op is Op.INPUT and src.weak and src.shape == () and src.dtype.kind == "i"


def note(n: Node) -> Node:
    """n, recorded when it can fault (or narrows a Python int) and a trace is recording (build.binary,
    build.gather and build.cast call this)."""
    nodes = getattr(_local, "nodes", None)
    if nodes is not None and (can_fault(n) or narrows_python_int(n)):
        nodes.append(n)
    return n


@contextlib.contextmanager
def recorded():
    """The nodes that can fault made inside the block (in this thread), as a list filled while it runs."""
    previous = getattr(_local, "nodes", None)
    _local.nodes = []
    try:
        yield _local.nodes
    finally:
        _local.nodes = previous


def checks(outputs: list[Node], candidates: list[Node]) -> list[Node]:
    """For each candidate that can fault (or narrows a Python int) and that no output reads: a value a kernel
    must compute it for (its maximum: one element), so that its faults are recorded and raised (and the Python
    int checked)."""
    from tracejit.ir import build

    seen: set[Node] = set()
    stack = list(outputs)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.srcs)
    out = []
    for n in dict.fromkeys(candidates):
        if n not in seen and (can_fault(n) or narrows_python_int(n)) and _of_arguments(n):
            out.append(build.reduce(n, "max", tuple(range(len(n.shape)))) if n.shape else n)
    return out


def _of_arguments(n: Node) -> bool:
    """Whether every input n reads is an argument of the traced function (the frontend also runs functions on
    stand-in inputs, numpy/views.py's probes, to learn what they do, and drops what they make)."""
    seen, stack = set(), [n]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op is Op.INPUT and not isinstance(x.arg, (int, tuple)):  # (tuples: hidden scalars of a call)
            return False
        stack.extend(x.srcs)
    return True
