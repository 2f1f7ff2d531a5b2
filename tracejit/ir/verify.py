"""Verifiers for both IRs: every invariant the passes rely on, checked after tracing and lowering.

A failure is a bug in tracejit, not in the user's code; the message names the offending node.
"""

from __future__ import annotations

import math

import numpy as np

from tracejit.errors import InternalError
from tracejit.ir.dtypes import BOOL
from tracejit.ir.graph import BINARY, MOVEMENT, PREDICATES, REDUCE_OPS, UNARY, Node, Op, toposort
from tracejit.ir.kernel_ir import ALU, INDEX, STRUCTURAL, Fault, KOp, KernelIR
from tracejit.ir.table import Table


def verify_graph(outputs: list[Node]) -> None:
    for i, n in enumerate(toposort(outputs)):
        problem = _graph_problem(n)
        if problem:
            raise InternalError(f"invalid graph IR at node {i} ({n.op.value}, {n.dtype}, {n.shape}): {problem}")


def _graph_problem(n: Node) -> str | None:
    srcs = n.srcs
    if any(s < 0 for s in n.shape):
        return "negative dimension"
    if n.op in (Op.INPUT, Op.CONST):
        return "takes no sources" if srcs else None
    if n.op is Op.TABLE:
        ok = not srcs and isinstance(n.arg, Table) and n.arg.dtype == n.dtype and n.arg.size == n.size
        return None if ok else "a table's content does not match its dtype and shape"
    if n.op is Op.IOTA:
        ok = not srcs and isinstance(n.arg, int) and 0 <= n.arg < len(n.shape) and n.dtype.kind in "iuf"
        return None if ok else f"bad iota (axis {n.arg!r}, dtype {n.dtype})"
    if n.op in UNARY or n.op in BINARY or n.op is Op.WHERE:
        want = 1 if n.op in UNARY else 2 if n.op in BINARY else 3
        if len(srcs) != want:
            return f"expects {want} sources, has {len(srcs)}"
        if any(s.shape != n.shape for s in srcs):
            return f"source shapes {[s.shape for s in srcs]} differ from the result's (broadcast with expand)"
        data = srcs[1:] if n.op is Op.WHERE else srcs
        if n.op is Op.WHERE and srcs[0].dtype != BOOL:
            return "condition is not bool"
        if len({s.dtype for s in data}) != 1:
            return f"operand dtypes differ: {[s.dtype.name for s in data]} (cast first)"
        expected = BOOL if n.op in PREDICATES else data[0].dtype
        return None if n.dtype == expected else f"result dtype should be {expected}"
    if n.op is Op.GATHER:
        return _gather_problem(n)
    if n.op is Op.LOOP:  # (its body is verified where it is compiled, frontend/staged.py)
        ok = isinstance(n.arg, tuple) and len(n.arg) == 2 and 0 <= n.arg[1] < n.arg[0].carried
        return None if ok else f"bad loop value {n.arg!r}"
    if n.op is Op.HOST:  # (a call run with NumPy: numpy/host_calls.py checks its results when it runs)
        ok = isinstance(n.arg, tuple) and len(n.arg) == 2 and 0 <= n.arg[1] < n.arg[0].outputs
        return None if ok else f"bad host call value {n.arg!r}"
    if n.op is Op.SIZE:  # (numpy/data_sizes.py)
        ok = isinstance(n.arg, tuple) and len(n.arg) == 3 and len(srcs) in (1, 2) and srcs[0].shape == ()
        ok = ok and srcs[0].dtype.kind == "i" and (n.shape, n.dtype) == ((srcs[-1].shape, srcs[-1].dtype))
        return None if ok else f"bad data-dependent size {n.arg!r} of {srcs}"
    if n.op is Op.SCATTER:
        return _scatter_problem(n)
    if len(srcs) != 1:
        return f"expects 1 source, has {len(srcs)}"
    src = srcs[0]
    if n.op is Op.CAST:
        return None if n.shape == src.shape and n.arg == n.dtype else "cast changes shape or disagrees with arg"
    if n.op is Op.BITCAST:
        same = n.shape == src.shape and n.arg == n.dtype and n.dtype.itemsize == src.dtype.itemsize
        return None if same else "bitcast changes shape or size, or disagrees with arg"
    if n.op is Op.SORT:
        axis, what = n.arg
        ok = (
            0 <= axis < len(src.shape)
            and n.shape == src.shape
            and (what == "values" and n.dtype == src.dtype or what == "indices" and n.dtype == np.int32)
        )
        return None if ok else f"bad sort {n.arg} of {src.dtype}{list(src.shape)}"
    if n.dtype != src.dtype:
        return "changes dtype"
    if n.op is Op.REDUCE:
        op, axes = n.arg
        if op not in REDUCE_OPS or any(not 0 <= a < len(src.shape) for a in axes):
            return f"bad reduction {n.arg}"
        kept = tuple(1 if d in axes else s for d, s in enumerate(src.shape))
        return None if n.shape == kept else f"shape should be {kept}"
    if n.op is Op.SCAN:
        op, axis = n.arg
        ok = op in REDUCE_OPS and 0 <= axis < len(src.shape) and n.shape == src.shape
        return None if ok else f"bad scan {n.arg} of shape {src.shape}"
    assert n.op in MOVEMENT
    if n.op is Op.RESHAPE:
        return None if math.prod(n.shape) == src.size else "reshape changes the element count"
    if n.op is Op.PERMUTE:
        ok = sorted(n.arg) == list(range(len(src.shape))) and n.shape == tuple(src.shape[p] for p in n.arg)
        return None if ok else f"bad permutation {n.arg}"
    if n.op is Op.EXPAND:
        ok = len(n.shape) == len(src.shape) and all(a in (b, 1) for a, b in zip(src.shape, n.shape))
        return None if ok else f"cannot expand {src.shape}"
    if n.op is Op.SLICE:
        for (start, step, length), size, out in zip(n.arg, src.shape, n.shape):
            if length != out or (length and not (0 <= start < size and 0 <= start + (length - 1) * step < size)):
                return f"slice {n.arg} out of bounds of {src.shape}"
        return None
    pads, _ = n.arg
    ok = n.shape == tuple(s + a + b for s, (a, b) in zip(src.shape, pads)) and all(a >= 0 and b >= 0 for a, b in pads)
    return None if ok else f"bad padding {pads}"


def _gather_problem(n: Node) -> str | None:
    data, indices, axes = n.srcs[0], n.srcs[1:], n.arg
    if n.dtype != data.dtype:
        return "changes dtype"
    if not isinstance(axes, tuple) or len(axes) != len(data.shape) or sum(a is None for a in axes) != len(indices):
        return f"bad gathered axes {axes!r} for {len(indices)} index arrays and data of shape {data.shape}"
    if not indices or any(i.shape != n.shape or i.dtype.kind not in "iu" for i in indices):
        return "index arrays must be integers of the result's shape"
    if any(a is not None and not (0 <= a < len(n.shape) and n.shape[a] == s) for a, s in zip(axes, data.shape)):
        return f"axes {axes!r} do not match the data's shape {data.shape}"
    return None


def _scatter_problem(n: Node) -> str | None:
    if len(n.srcs) != 3 or n.arg not in REDUCE_OPS:
        return f"a scatter takes (target, positions, values) and a combine op, not {len(n.srcs)} sources and {n.arg!r}"
    target, positions, values = n.srcs
    if n.shape != target.shape or n.dtype != target.dtype or values.dtype != n.dtype or not n.shape:
        return "a scatter's result, target and values have one dtype; the result has the target's shape"
    if positions.dtype.kind not in "iu" or len(positions.shape) != 1 or values.shape != positions.shape + n.shape[1:]:
        return f"positions {positions.shape} and values {values.shape} do not fit the target {n.shape}"
    return None


def verify_kernel(kernel: KernelIR) -> None:
    defined: set[int] = set()
    open_ranges: list[int] = []
    for i, x in enumerate(kernel.instrs):
        problem = _instr_problem(kernel, i, x, defined, open_ranges)
        if problem:
            raise InternalError(f"invalid kernel IR in {kernel.name} at %{i} ({x.op}): {problem}\n{kernel.format()}")
        defined.add(i)
    if open_ranges:
        raise InternalError(f"invalid kernel IR in {kernel.name}: range %{open_ranges[-1]} is never closed")


def _instr_problem(kernel, i, x, defined, open_ranges) -> str | None:
    instrs = kernel.instrs
    if x.op not in ALU and x.op not in STRUCTURAL:
        return "unknown instruction"
    missing = [s for s in x.srcs if s not in defined]
    if missing:
        return f"uses %{missing[0]} before it is defined"
    src = [instrs[s] for s in x.srcs]
    if x.op == KOp.PARAM:
        return None if 0 <= x.arg < len(kernel.params) and kernel.params[x.arg].dtype == x.dtype else "bad param"
    if x.op == KOp.TABLE:
        return None if not x.srcs and isinstance(x.arg, Table) and x.arg.dtype == x.dtype else "bad table"
    if x.op == KOp.BOUND:
        ok = (
            len(src) == 1
            and src[0].dtype.kind in "iu"
            and x.dtype == INDEX
            and isinstance(x.arg, tuple)
            and isinstance(x.arg[0], int)
            and x.arg[0] >= 0
            and isinstance(x.arg[1], Fault)
        )
        return None if ok else "needs one integer value, an int64 result and (axis size, Fault)"
    if x.op in (KOp.LOAD, KOp.STORE):
        if src[0].op not in (KOp.PARAM, KOp.LOCAL, KOp.TABLE) or src[1].dtype != INDEX:
            return "needs a param, local or table and an int64 index"
        if x.op == KOp.STORE and src[0].op == KOp.TABLE:
            return "stores to a constant table"
        if x.op == KOp.LOAD and x.dtype != src[0].dtype or x.op == KOp.STORE and src[2].dtype != src[0].dtype:
            return "element dtype differs from the buffer's"
        if x.op == KOp.STORE and src[0].op == KOp.PARAM and not kernel.params[src[0].arg].output:
            return "stores to an input buffer"
    elif x.op == KOp.ATOMIC:
        if len(src) != 3 or src[0].op != KOp.PARAM or not kernel.params[src[0].arg].output or src[1].dtype != INDEX:
            return "an atomic update needs an output param, an int64 index and a value"
        if src[2].dtype != src[0].dtype or x.arg not in REDUCE_OPS or x.dtype is not None:
            return "an atomic update combines (sum, prod, max, min) a value of the buffer's dtype, and has no value"
    elif x.op == KOp.SORT:
        if (
            len(src) not in (1, 2)
            or any(s.op != KOp.LOCAL for s in src)
            or len(src) == 2
            and (src[1].dtype != np.int32 or src[0].arg[0] != src[1].arg[0])
            or not 0 < x.arg <= src[0].arg[0]
        ):
            return "sorts a local array of keys (and one of int32 positions, as long) over at most its length"
    elif x.op == KOp.RANGE:
        open_ranges.append(i)
    elif x.op == KOp.ENDRANGE:
        if not open_ranges or open_ranges[-1] != x.srcs[0]:
            return "closes a range that is not the innermost open one"
        open_ranges.pop()
    elif x.op == KOp.UPDATE:
        if src[0].op == KOp.LOCAL and (len(src) != 3 or src[1].dtype != INDEX or src[0].arg[1] is None):
            return "a local update needs (local accumulator, int64 index, value)"
        if src[0].op not in (KOp.ACC, KOp.LOCAL) or src[-1].dtype != src[0].dtype:
            return "updates something that is not an accumulator of this dtype"
        if x.dtype is not None and (src[0].op != KOp.ACC or x.dtype != src[0].dtype):
            return "only an accumulator's update has a value, of the accumulator's dtype"
    elif x.op in ALU and x.op not in (KOp.WHERE,) and len({s.dtype for s in src}) > 1:
        return f"operand dtypes differ: {[s.dtype.name for s in src]}"
    elif x.op == KOp.WHERE and (src[0].dtype != np.bool_ or src[1].dtype != src[2].dtype):
        return "where needs a bool condition and operands of one dtype"
    return None
