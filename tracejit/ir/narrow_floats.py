"""ml_dtypes' narrow floats (bfloat16, float8_e5m2, float8_e4m3fn) taken out of a traced graph before it is scheduled:
stored as their bits (uint16, uint8), computed in float32, each op's result rounded to the narrow type as ml_dtypes'
loops round it, so no pass after this one nor any renderer sees them."""

from __future__ import annotations

import copy

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build
from tracejit.ir.dtypes import NarrowFloat, narrow_float
from tracejit.ir.graph import BINARY, MOVEMENT, UNARY, Node, Op, toposort
from tracejit.ir.ops import BY_NAME

F32, U32 = np.dtype(np.float32), np.dtype(np.uint32)

# ops whose float32 result from narrow operands is a value of their type already (ops.py's `rounds`)
_EXACT = frozenset(op for op in UNARY | BINARY if not BY_NAME[op.value].rounds) | {Op.WHERE} | MOVEMENT
_ACCUMULATING = ("sum", "prod")  # reductions, scans and scatters whose float32 total is rounded once


def storage(dt: np.dtype) -> np.dtype:
    """The dtype a buffer of dt holds: the bits (uint16, uint8) of a narrow float, dt itself otherwise."""
    layout = narrow_float(dt)
    return dt if layout is None else np.dtype(f"uint{layout.bits}")


def uses_narrow_floats(outputs) -> bool:
    """Whether the graph of `outputs` holds a narrow float value, in the bodies of its loops too."""
    for n in toposort(outputs):
        if narrow_float(n.dtype) is not None or n.op is Op.LOOP and _loop_uses_narrow_floats(n.arg[0]):
            return True
    return False


def _loop_uses_narrow_floats(loop) -> bool:
    return any(narrow_float(i.dtype) is not None for i in loop.inputs) or uses_narrow_floats(loop.outputs)


def _u32(v: int, like: Node) -> Node:
    return build.const(v, U32, like.shape)


def _f32(v: float, like: Node) -> Node:
    return build.const(v, F32, like.shape)


def _op(op: Op, a: Node, b: Node) -> Node:
    return build.binary(op, a, b)


def rounded(x: Node, layout: NarrowFloat) -> Node:
    """float32 x rounded to the nearest value of the narrow type (ties to even, as ml_dtypes converts float32), as
    float32. In the normal range the low bits of x's pattern are rounded away in integer arithmetic; below it (a type
    with fewer exponent bits than float32) x is rounded to a multiple of the smallest subnormal; a value past the
    largest becomes inf (NaN for float8_e4m3fn, which has no inf); NaN stays a NaN."""
    drop = 23 - layout.mantissa
    bits = build.bitcast(x, U32)
    nan = _op(Op.LT, _u32(0x7F800000, x), _op(Op.AND, bits, _u32(0x7FFFFFFF, x)))
    lsb = _op(Op.AND, _op(Op.SHR, bits, _u32(drop, x)), _u32(1, x))
    near = _op(Op.ADD, _op(Op.ADD, bits, _u32((1 << (drop - 1)) - 1, x)), lsb)
    quiet = _op(Op.OR, bits, _u32(0x00400000, x))
    kept = _op(Op.AND, build.where(nan, quiet, near), _u32((0xFFFFFFFF << drop) & 0xFFFFFFFF, x))
    out = build.bitcast(kept, F32)
    if layout.exponent == 8:  # bfloat16: float32's exponent range, subnormals and overflow to inf included
        return out
    tiniest = 1 - layout.bias - layout.mantissa  # the smallest subnormal is 2**tiniest
    magnitude = build.unary(Op.ABS, x)
    steps = build.unary(Op.RINT, _op(Op.MUL, x, _f32(2.0**-tiniest, x)))  # (exact scalings by powers of two)
    out = build.where(
        _op(Op.LT, magnitude, _f32(2.0 ** (1 - layout.bias), x)), _op(Op.MUL, steps, _f32(2.0**tiniest, x)), out
    )
    beyond = _op(Op.LT, _f32(_largest(layout), x), build.unary(Op.ABS, out))
    if layout.infinity:
        inf = build.binary(Op.COPYSIGN, _f32(np.inf, x), x)
        return build.where(beyond, inf, out)
    return build.where(beyond, _f32(np.nan, x), out)


def _to_integer(x: Node, dtype: np.dtype, weak: bool) -> Node:
    """float32 x (a narrow float's value) as integer `dtype` as ml_dtypes (0.7 and later) converts: truncated toward
    zero, and 0 where the truncation is not a value of the type (NaN, infinities, -1.5 -> uint8, 300 -> int8)."""
    t = build.unary(Op.TRUNC, x)
    bits = dtype.itemsize * 8 - (dtype.kind == "i")  # the type holds [-2**bits, 2**bits) or [0, 2**bits): exact bounds
    low = _f32(-(2.0**bits) if dtype.kind == "i" else 0.0, x)
    inside = _op(Op.AND, _op(Op.LE, low, t), _op(Op.LT, t, _f32(2.0**bits, x)))
    return build.where(inside, build.cast(x, dtype, weak), build.const(0, dtype, x.shape, weak))


def _largest(layout: NarrowFloat) -> float:
    """The largest finite value: IEEE's below an all-ones exponent; float8_e4m3fn's all-ones exponent holds numbers
    too, all but its all-ones significand (NaN)."""
    if layout.infinity:
        return (2 - 2.0**-layout.mantissa) * 2.0 ** ((1 << layout.exponent) - 2 - layout.bias)
    return (2 - 2.0 ** (1 - layout.mantissa)) * 2.0 ** ((1 << layout.exponent) - 1 - layout.bias)


def widened(bits: Node, layout: NarrowFloat) -> Node:
    """The bits of a narrow float (uint16, uint8) as the float32 value they hold (exact)."""
    c = build.cast(bits, U32)
    if layout.exponent == 8:  # bfloat16: float32's high half
        return build.bitcast(_op(Op.SHL, c, _u32(16, c)), F32)
    m, top = layout.mantissa, (1 << layout.exponent) - 1
    sign = _op(Op.SHL, _op(Op.SHR, c, _u32(layout.bits - 1, c)), _u32(31, c))
    exponent = _op(Op.AND, _op(Op.SHR, c, _u32(m, c)), _u32(top, c))
    significand = _op(Op.AND, c, _u32((1 << m) - 1, c))
    field = _op(Op.SHL, _op(Op.ADD, exponent, _u32(127 - layout.bias, c)), _u32(23, c))
    normal = _op(Op.OR, _op(Op.OR, sign, field), _op(Op.SHL, significand, _u32(23 - m, c)))
    value = build.bitcast(normal, F32)
    tiny = _op(Op.MUL, build.cast(significand, F32), _f32(2.0 ** (1 - layout.bias - m), c))
    tiny = build.where(_op(Op.NE, sign, _u32(0, c)), build.unary(Op.NEG, tiny), tiny)
    value = build.where(_op(Op.EQ, exponent, _u32(0, c)), tiny, value)
    if layout.infinity:  # the all-ones exponent: inf, or NaN with a significand
        special = _op(Op.OR, _op(Op.OR, sign, _u32(0x7F800000, c)), _op(Op.SHL, significand, _u32(23 - m, c)))
        return build.where(_op(Op.EQ, exponent, _u32(top, c)), build.bitcast(special, F32), value)
    low = (1 << (layout.bits - 1)) - 1  # S.1111.111: the only NaN
    return build.where(_op(Op.EQ, _op(Op.AND, c, _u32(low, c)), _u32(low, c)), _f32(np.nan, c), value)


def narrowed(x: Node, layout: NarrowFloat) -> Node:
    """float32 x, a value of the narrow type (rounded()), as the bits an array of it stores."""
    out_dt = np.dtype(f"uint{layout.bits}")
    bits = build.bitcast(x, U32)
    if layout.exponent == 8:  # bfloat16: float32's high half
        return build.cast(_op(Op.SHR, bits, _u32(16, x)), out_dt)
    m, top = layout.mantissa, (1 << layout.exponent) - 1
    sign = _op(Op.SHL, _op(Op.SHR, bits, _u32(31, x)), _u32(layout.bits - 1, x))
    magnitude = _op(Op.AND, bits, _u32(0x7FFFFFFF, x))
    exponent = _op(Op.SUB, _op(Op.SHR, magnitude, _u32(23, x)), _u32(127 - layout.bias, x))  # (wraps below: unused)
    normal = _op(
        Op.OR, _op(Op.SHL, exponent, _u32(m, x)), _op(Op.SHR, _op(Op.AND, bits, _u32(0x7FFFFF, x)), _u32(23 - m, x))
    )
    scaled = _op(Op.MUL, build.unary(Op.ABS, x), _f32(2.0 ** (layout.bias - 1 + m), x))
    code = build.where(
        _op(Op.LT, build.unary(Op.ABS, x), _f32(2.0 ** (1 - layout.bias), x)), build.cast(scaled, U32), normal
    )
    nan = _op(Op.LT, _u32(0x7F800000, x), magnitude)
    if layout.infinity:
        code = build.where(_op(Op.EQ, magnitude, _u32(0x7F800000, x)), _u32(top << m, x), code)
        code = build.where(nan, _u32((top << m) | (1 << (m - 1)), x), code)
    else:
        code = build.where(nan, _u32((1 << (layout.bits - 1)) - 1, x), code)
    return build.cast(_op(Op.OR, code, sign), out_dt)


def lower(outputs: list[Node]) -> tuple[list[Node], dict[int, np.dtype]]:
    """The graph of `outputs` without narrow floats, and the dtypes of the outputs that were narrow floats, by
    position (now their bits, as are the INPUT nodes of narrow float arguments)."""
    narrow = {k: o.dtype for k, o in enumerate(outputs) if narrow_float(o.dtype) is not None}
    return _Lowering().stored(outputs), narrow


class _Lowering:
    """One graph's lowering; a loop compiled as a loop (numpy/loops.py's Loop, Op.LOOP's arg) is lowered once, its
    body as a graph of its own: its narrow float inputs and carried values pass between the steps as bits."""

    def __init__(self) -> None:
        self._loops: dict[int, tuple[object, object]] = {}  # id(loop) -> (loop, its lowered copy)

    def stored(self, outputs: list[Node]) -> list[Node]:
        """The lowered values of `outputs`, narrow float ones as the bits they are stored as."""
        return [_stored(o, v) for o, v in zip(outputs, self.values(outputs))]

    def values(self, outputs: list[Node]) -> list[Node]:
        new: dict[Node, Node] = {}
        for n in toposort(outputs):
            srcs = tuple(new[s] for s in n.srcs)
            if n.op is Op.LOOP:
                new[n] = self._loop_value(n, srcs)
            else:
                layout = narrow_float(n.dtype)
                new[n] = _consumer(n, srcs) if layout is None else _lowered(n, srcs, layout)
        return [new[o] for o in outputs]

    def _loop_value(self, n: Node, srcs: tuple[Node, ...]) -> Node:
        loop, k = n.arg
        lowered = self._loop(loop)
        srcs = tuple(_stored(o, s) for s, o in zip(srcs, n.srcs))
        if lowered is loop and srcs == n.srcs:
            return n
        value = Node.make(Op.LOOP, storage(n.dtype), n.shape, srcs, (lowered, k), n.weak)
        layout = narrow_float(n.dtype)
        return value if layout is None else widened(value, layout)

    def _loop(self, loop):
        known = self._loops.get(id(loop))
        if known is not None:
            return known[1]
        lowered = loop
        if _loop_uses_narrow_floats(loop):
            lowered = copy.copy(loop)
            lowered.inputs = [build.input_(i.arg, storage(i.dtype), i.shape, i.weak) for i in loop.inputs]
            lowered.outputs = self.stored(loop.outputs)
        self._loops[id(loop)] = (loop, lowered)  # (the loop kept alive: its id is not reused meanwhile)
        return lowered


def _stored(original: Node, value: Node) -> Node:
    layout = narrow_float(original.dtype)
    return value if layout is None else narrowed(value, layout)


def _refused(n: Node) -> UnsupportedError:
    what = {Op.HOST: "a call run with NumPy on the host (np.linalg on the numba device)"}.get(
        n.op, f"the graph op {n.op.value}"
    )
    return UnsupportedError(
        f"bfloat16 and float8 values in {what} are not supported: compute in float32 there (x.astype(np.float32)) "
        "and convert the result back with .astype(...)"
    )


def _consumer(n: Node, srcs: tuple[Node, ...]) -> Node:
    """A node of another dtype, with its narrow float sources lowered to float32."""
    if srcs == n.srcs:
        return n
    if n.op is Op.HOST:
        raise _refused(n)
    if n.op is Op.CAST:  # from a narrow float: its float32 value converted (to an integer as ml_dtypes converts)
        if n.dtype.kind in "iu" and narrow_float(n.srcs[0].dtype) is not None:
            return _to_integer(srcs[0], n.dtype, n.weak)
        return build.cast(srcs[0], n.dtype, n.weak)
    return Node.make(n.op, n.dtype, n.shape, srcs, n.arg, n.weak)


def _lowered(n: Node, srcs: tuple[Node, ...], layout: NarrowFloat) -> Node:
    """A narrow float node as the float32 node of its value."""
    op = n.op
    if op is Op.INPUT:
        return widened(build.input_(n.arg, storage(n.dtype), n.shape, n.weak), layout)
    if op is Op.CONST:  # (its value was rounded to the type when it was made: build.const)
        return build.const(float(n.arg), F32, n.shape, n.weak)
    if op is Op.TABLE:
        return build.table(n.arg.values.astype(F32).reshape(n.shape))
    if op is Op.IOTA:
        return rounded(build.iota(n.shape, n.arg, F32), layout)
    if op is Op.CAST:  # rounded once, from float64 and 32- and 64-bit integers too (build.float32_rounded_to_odd)
        src = n.srcs[0]
        return srcs[0] if src.dtype == n.dtype else rounded(build.float32_rounded_to_odd(srcs[0]), layout)
    if op is Op.HOST:
        raise _refused(n)
    if op in (Op.REDUCE, Op.SCAN, Op.SCATTER, Op.SORT, Op.GATHER, Op.PAD, Op.SIZE) or op in _EXACT:
        out = Node.make(op, F32, n.shape, srcs, n.arg, n.weak)
        combine = n.arg if op is Op.SCATTER else n.arg[0] if op in (Op.REDUCE, Op.SCAN) else None
        return rounded(out, layout) if combine in _ACCUMULATING else out
    if op in UNARY or op in BINARY:
        return rounded(Node.make(op, F32, n.shape, srcs, n.arg, n.weak), layout)
    raise _refused(n)
