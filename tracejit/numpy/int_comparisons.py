"""An integer array compared with a Python-int argument, exactly as NumPy 2 compares them (u8 < 300 is True
everywhere, i64 == 2**70 False): the int reaches the kernel as two hidden scalars each call computes, its value
clamped to the array's dtype and the side it was clamped from, so any int of any call compares right."""

from __future__ import annotations

import weakref

import numpy as np

from tracejit.ir import build
from tracejit.ir.graph import Node, Op, toposort
from tracejit.numpy import python_numbers

KIND = "int compared"  # INPUT args (KIND, argument position, dtype, "value" | "side"): the hidden scalars
SIDE = np.dtype(np.int32)  # -1: the int is below the dtype's range, 1: above, 0: inside (the value is the int)


_SPANS: weakref.WeakKeyDictionary[Node, tuple[int, int]] = weakref.WeakKeyDictionary()


def known_span(node: Node, lo: int, hi: int) -> None:
    """Record that the Python int `node` only takes values in [lo, hi] (a loop's index, its bounds known while
    tracing): compared with an array of a dtype that holds them, it is cast to that dtype (no int64 in the kernel,
    which webgpu and metal lack)."""
    _SPANS[node] = (lo, hi)


def span_of(node: Node, depth: int = 0) -> tuple[int, int] | None:
    """[lo, hi] of a 0-d integer value made from spans known_span recorded (a loop's index) and constants by +, -
    and *, as far as interval arithmetic proves it; else None."""
    if node.shape != () or node.dtype.kind not in "iu" or depth > 16:
        return None
    if node in _SPANS:
        return _SPANS[node]
    if node.op is Op.CONST:
        return int(node.arg), int(node.arg)
    if _is_int_argument(node):  # (a Python-int argument: its value, the plan specialised on it)
        value = python_numbers.value_of(node, "a bound of a slice whose start a loop's index makes")
        return None if value is None else (int(value), int(value))
    if node.op is Op.CAST:
        inner = span_of(node.srcs[0], depth + 1)
        info = np.iinfo(node.dtype)
        return inner if inner is not None and info.min <= inner[0] and inner[1] <= info.max else None
    if node.op in (Op.ADD, Op.SUB, Op.MUL):
        a, b = (span_of(s, depth + 1) for s in node.srcs)
        if a is None or b is None:
            return None
        if node.op is Op.ADD:
            return a[0] + b[0], a[1] + b[1]
        if node.op is Op.SUB:
            return a[0] - b[1], a[1] - b[0]
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    return None


def _is_int_argument(n: Node) -> bool:
    return n.op is Op.INPUT and n.weak and n.dtype.kind == "i" and isinstance(n.arg, int) and n.shape == ()


def compare(op: Op, a: Node, b: Node) -> Node | None:
    """a OP b (OP one of LT, LE, EQ, NE) where one side is a Python int computed at run time (an argument, or
    arithmetic of arguments) and the other an integer array: exact for every value of the int; None for
    other operands."""
    for scalar, array, left in ((b, a, False), (a, b, True)):  # noqa: B007 (the ones that broke, below)
        if (
            scalar.weak
            and scalar.dtype.kind == "i"
            and scalar.op is not Op.CONST
            and array.dtype.kind in "iu"
            and not array.weak
        ):
            break
    else:
        return None
    dt, shape = array.dtype, build.broadcast_shapes(a.shape, b.shape)
    array = build.broadcast_to(array, shape)
    span = _SPANS.get(scalar)
    if span is not None and np.iinfo(dt).min <= span[0] and span[1] <= np.iinfo(dt).max:
        cast = build.broadcast_to(build.cast(scalar, dt), shape)  # (exact: every value it takes fits)
        return build.binary(op, cast, array) if left else build.binary(op, array, cast)
    if not _is_int_argument(scalar):
        return _in_int64(op, array, build.broadcast_to(scalar, shape), left)
    value = build.broadcast_to(build.input_((KIND, scalar.arg, dt.str, "value"), dt, ()), shape)
    side = build.broadcast_to(build.input_((KIND, scalar.arg, dt.str, "side"), SIDE, ()), shape)
    zero = build.const(0, SIDE, shape)
    inside = build.binary(op, value, array) if left else build.binary(op, array, value)
    # where the int is beyond the dtype, the value is the dtype's bound on that side: right for every element
    # but the bound itself, which the side settles
    if op is Op.EQ:
        return build.binary(Op.AND, inside, build.binary(Op.EQ, side, zero))
    if op is Op.NE:
        return build.binary(Op.OR, inside, build.binary(Op.NE, side, zero))
    below, above = (side, zero), (zero, side)
    if op is Op.LT:  # x < int: also where the int is above; int < x: also where it is below
        return build.binary(Op.OR, inside, build.binary(Op.LT, *(below if left else above)))
    # x <= int: not where the int is below (side >= 0); int <= x: not where it is above (side <= 0)
    return build.binary(Op.AND, inside, build.binary(Op.LE, *(above if not left else below)))


def _in_int64(op: Op, array: Node, scalar: Node, left: bool) -> Node:
    """Arithmetic of Python-int arguments (x < n + 1), an int64 in the kernel: compared in int64, where every
    integer dtype but uint64 fits; against uint64, a negative int is below every element."""

    def cmp(x, s):
        return build.binary(op, s, x) if left else build.binary(op, x, s)

    i64 = np.dtype(np.int64)
    scalar = build.cast(scalar, i64)
    if array.dtype != np.uint64:
        return cmp(build.cast(array, i64), scalar)
    negative = build.binary(Op.LT, scalar, build.const(0, i64, scalar.shape))
    inside = cmp(array, build.cast(scalar, np.uint64))
    if op is Op.NE or op is Op.LT and left or op is Op.LE and left:  # true wherever the int is below
        return build.binary(Op.OR, inside, negative)
    return build.binary(Op.AND, inside, build.binary(Op.LE, build.const(0, i64, scalar.shape), scalar))


def hidden(outputs: list[Node]) -> tuple[tuple[tuple, np.dtype], ...]:
    """The hidden scalars a graph reads, in a fixed order: (INPUT arg, dtype) each."""
    found = {
        n.arg: n.dtype
        for n in toposort(outputs)
        if n.op is Op.INPUT and isinstance(n.arg, tuple) and n.arg[:1] == (KIND,)
    }
    return tuple(sorted(found.items(), key=lambda item: item[0]))


def values_of(compared):
    """A function of a call's arguments to its hidden scalars (`compared`: hidden()'s): each int clamped to its
    dtype's range, and the side it was clamped from."""
    rows = []
    for (_, position, dtype, what), _ in compared:
        info = np.iinfo(np.dtype(dtype))
        rows.append((position, int(info.min), int(info.max), what == "value"))

    def values(args) -> tuple:
        out = []
        for position, low, high, value in rows:
            s = args[position]
            if value:
                out.append(low if s < low else high if s > high else s)
            else:
                out.append(-1 if s < low else 1 if s > high else 0)
        return tuple(out)

    return values
