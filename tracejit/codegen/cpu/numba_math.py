"""The helpers the Python source of numba kernels (codegen/cpu/numba.py) calls: codegen/cpu/llvm_math.py's vectorisable
float32 exp, tanh, log and erf, float64 exp and tanh, and ldexp as Numba intrinsics; integer power and
fmod, float16 conversions, a row sort; the steps and markers that let LLVM vectorise row loops.

The math functions are Numba intrinsics whose LLVM IR is written with codegen/cpu/llvm_values.py's Values: no
separate Numba compile per function and process (which was half of softmax's first compile), and every
operation in the order written (see codegen/cpu/numba_ir.py)."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from tracejit.codegen.cpu import llvm_math as L
from tracejit.codegen.cpu.llvm_values import F32, F64, I16, I32, bitcast
from tracejit.codegen.cpu.numba_ir import scalar_function

f32 = np.float32
# ---------------------------------------------------------------------------------------------------
# Intrinsics. Inlined code is compiled with the *caller's* fast-math flags, and a caller may allow
# "reassoc" (tracejit's kernels do not: only their reduction steps, reassoc_add), which would undo
# Cody-Waite reductions and two-step scalings.
# Numba adds its flags only to instructions that carry none, so operations emitted here with
# "contract" alone keep their order (and may still fuse into FMAs).

_STRICT = ("contract",)


def _float_binary(name: str, emit):
    """An intrinsic of two operands of one float type (which also catches accidental float64 promotion),
    whose code is emit(builder, a, b)."""

    def typer(typingctx, a, b):
        if a == b and a in (types.float32, types.float64):
            return a(a, b), lambda context, builder, sig, args: emit(builder, *args)
        return None

    typer.__name__ = name
    return intrinsic(typer)


def _strict_binop(opname):
    return _float_binary(f"_strict_{opname}", lambda b, x, y: getattr(b, opname)(x, y, flags=_STRICT))


# A float sum's or product's accumulating step, the one operation of a kernel LLVM may reorder: the loop
# over a row then runs in vector lanes (layernorm 4096x1024 4x faster) while every other operation keeps
# NumPy's order ((x + 1) - 1 is not folded to x).
reassoc_add = _float_binary("reassoc_add", lambda b, x, y: b.fadd(x, y, flags=("reassoc", "contract")))
reassoc_mul = _float_binary("reassoc_mul", lambda b, x, y: b.fmul(x, y, flags=("reassoc", "contract")))


def _select_step(cmpop):
    """A float max/min reduction's step, `v if v > acc else acc`, for accumulators whose NaN is kept in
    a flag of their own (codegen.numba._nan_apart): the compare and select carry nnan and nsz, without
    which LLVM keeps the loop scalar (softmax's row max). Where v is NaN the step is poison, never read:
    every use of the accumulator selects NaN by the flag instead."""

    def emit(builder, acc, v):
        take = builder.fcmp_ordered(cmpop, v, acc, flags=("nnan", "nsz"))
        return builder.select(take, v, acc, flags=("nnan", "nsz"))

    return _float_binary(f"select_step_{'max' if cmpop == '>' else 'min'}", emit)


max_step = _select_step(">")
min_step = _select_step("<")


def _wrapping(opname):
    """int64 a op b that wraps like NumPy: Numba's own signed + - * carry LLVM's nsw flag (overflow
    cannot happen), so LLVM may fold (x + x) > 0 into x > 0 and change what a wrapped sum compares as."""

    def typer(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            x, y = (context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args))
            return getattr(builder, opname)(x, y)

        return types.int64(a, b), codegen

    typer.__name__ = f"wrap_{opname}"
    return intrinsic(typer)


wrap_add = _wrapping("add")
wrap_sub = _wrapping("sub")
wrap_mul = _wrapping("mul")


@intrinsic
def nonnegative_index(typingctx, i):
    """i, which LLVM may take as >= 0 (llvm.assume): a parallel kernel's loop runs over a chunk
    [start, stop) of its range, and without this LLVM keeps the wrap-around of negative indices on every
    load and store, which turns vector loads into gathers (GELU 3x slower)."""
    if i == types.int64:

        def codegen(context, builder, sig, args):
            assume = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "llvm.assume"
            )
            builder.call(assume, [builder.icmp_signed(">=", args[0], ir.Constant(args[0].type, 0))])
            return args[0]

        return types.int64(i), codegen
    return None


@intrinsic
def opaque_extent(typingctx, n):
    """n, which LLVM cannot see through (an empty inline asm): a loop over range(opaque_extent(1024)) is
    vectorised as a loop of unknown length instead of being unrolled whole first (see codegen.numba_rows'
    OPAQUE_EXTENTS)."""
    if n == types.int64:

        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
            return builder.asm(fnty, "", "=r,0", [args[0]], False, "opaque_extent")

        return types.int64(n), codegen
    return None


@intrinsic
def wide_vectors(typingctx):
    """Nothing at run time: marks the function it is called in "prefer-vector-width"="512", so that LLVM
    vectorises its loops with 512-bit registers where its tuning for the host says 256 (codegen.numba_rows'
    host_vector_bytes says where). A string attribute, which llvmlite's add() (a list of keywords) refuses."""

    def codegen(context, builder, sig, args):
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic(prefer_literal=True)
def stack_empty(typingctx, n, dtype):
    """np.empty(n, dtype) for a literal n, on the calling function's stack (allocated in its entry block:
    once per call, however many rows reuse it), for a kernel's small scratch rows (codegen.numba's
    STACK_SCRATCH_MAX). np.empty is a Numba overload, compiled on its own the first time a process uses it (90 ms of
    the first softmax), and a heap allocation with a reference count."""
    if not isinstance(n, types.IntegerLiteral) or not isinstance(dtype, (types.NumberClass, types.DType)):
        return None
    array = types.Array(dtype.dtype, 1, "C")
    count = n.literal_value

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import populate_array

        element = context.get_data_type(array.dtype)
        intp = context.get_value_type(types.intp)
        with builder.goto_entry_block():
            data = builder.alloca(element, size=ir.Constant(intp, count))
            data.align = 64
        out = context.make_array(array)(context, builder)
        itemsize = ir.Constant(intp, context.get_abi_sizeof(element))
        populate_array(
            out, data=data, shape=[ir.Constant(intp, count)], strides=[itemsize], itemsize=itemsize, meminfo=None
        )
        return out._getvalue()

    return array(n, dtype), codegen


ldexp_f32, ldexp_f32_called = scalar_function("ldexp_f32", L.ldexp_f32, (F32, F32), F32)
ldexp_f64, _ = scalar_function("ldexp_f64", L.ldexp_f64, (F64, F64), F64)


# `name` inlined at every call; `name_called` where LLVM's inliner judges it pays, for kernels calling
# one more than codegen.numba's MATH_INLINE_MAX times (a register-tiled kernel applies tanh to 32
# accumulators: 230 s of compile when every copy was inlined into Numba's IR).
exp_f32, exp_f32_called = scalar_function("exp_f32", L.exp_f32, (F32,), F32)
tanh_f32, tanh_f32_called = scalar_function("tanh_f32", L.tanh_f32, (F32,), F32)
exp_f64, exp_f64_called = scalar_function("exp_f64", L.exp_f64, (F64,), F64)
tanh_f64, tanh_f64_called = scalar_function("tanh_f64", L.tanh_f64, (F64,), F64)
log_f64, log_f64_called = scalar_function("log_f64", L.log_f64, (F64,), F64)
log_f32, log_f32_called = scalar_function("log_f32", L.log_f32, (F32,), F32)
erf_f32, erf_f32_called = scalar_function("erf_f32", L.erf_f32, (F32,), F32)


# ---------------------------------------------------------------------------------------------------
# Faults NumPy raises for, recorded in the kernel's error record (int64: code, value) for the runtime to
# raise after the call: a prange loop cannot raise. The result is then any valid value.


@numba.njit(inline="always")
def nonnegative_exponent(b, code, error):
    """An integer exponent; a negative one (NumPy raises) is recorded and taken as 0."""
    if b < 0:
        error[0] = code
        error[1] = b
        return b - b
    return b


@numba.njit(inline="always")
def bound_index(v, size, code, error):
    """An index read from data as an offset along an axis of `size` elements: a negative one counts from
    the end; one outside the axis (NumPy raises IndexError) is recorded and gives 0."""
    if v < 0:
        if v >= -size:
            return np.int64(v) + size
    elif v < size:  # an unsigned index is compared as it is, not as an int64 it may not fit
        return np.int64(v)
    error[0] = code
    error[1] = v
    return np.int64(0)


@numba.njit(inline="always")
def int_power(a, b):
    """a ** b for b >= 0 by squaring, wrapping like NumPy (numba's ** goes through float for some integer types),
    in int64 (the caller casts to the result's type). Numba's own `*` of signed integers lets LLVM assume it
    never overflows: (70 ** 70 != 0) then folded to 70 != 0, True, where the wrapped power is 0."""
    r = np.int64(1)
    x = wrap_add(a, 0)  # a as int64 (a uint64's bits kept)
    while b:
        if b & 1:
            r = wrap_mul(r, x)
        x = wrap_mul(x, x)
        b = b >> 1
    return r


@numba.njit(inline="always")
def int_fmod(a, b):
    """C's % (sign of the dividend), which NumPy's integer fmod is; 0 for b == 0 and b == -1."""
    if b == 0 or b == -1:
        return a - a
    r = a % b
    return r - b if r != 0 and (r < 0) != (a < 0) else r


# ---------------------------------------------------------------------------------------------------
# float16 storage. Numba has no CPU float16: kernels keep such arrays as uint16 bit patterns and
# convert on load and store (codegen/cpu/llvm_math.py's conversions), computing in float32.

f16_to_f32, _ = scalar_function("f16_to_f32", L.f16_to_f32, (I16,), F32)
f32_to_f16, _ = scalar_function("f32_to_f16", L.f32_to_f16, (F32,), I16)
round_f16, round_f16_called = scalar_function("round_f16", L.round_f16, (F32,), F32)

# the kernel IR's BITCAST (float32 <-> uint32: bfloat16 and float8, ir/narrow_floats.py); the int32 result is taken as
# uint32 by the kernel (np.uint32 of it keeps the bits)
f32_bits, _ = scalar_function("f32_bits", lambda f: bitcast(f, I32), (F32,), I32)
bits_f32, _ = scalar_function("bits_f32", lambda b: bitcast(b, F32), (I32,), F32)


# The kernel IR's sort: a stable merge sort written for kernels. Not inlined (it is called once per row)
# and plain loops only, so numba compiles it in a fraction of the time its generic np.sort/np.argsort take.
SORT_RUN = 16  # runs this long are sorted by insertion first


@numba.njit(inline="always")
def _sorts_before(a, b):
    """a goes strictly before b: the smaller number; every number before NaN (NumPy's order)."""
    return a < b or (np.isnan(b) and not np.isnan(a))


@numba.njit
def sort_row_bytes(keys, positions, n, flip):
    """sort_row for one-byte integer keys (a mask sorted as bytes: numpy/data_sizes.py): a stable counting sort,
    two passes over the row. `flip` is 0x80 for signed keys (their order is that of the byte with its top bit
    flipped), else 0."""
    counts = np.zeros(257, np.int64)
    for i in range(n):
        counts[((np.int64(keys[i]) & 0xFF) ^ flip) + 1] += 1
    for v in range(256):
        counts[v + 1] += counts[v]
    ordered = np.empty(n, keys.dtype)
    moved = np.empty(n, np.int32) if positions is None else np.empty(n, positions.dtype)
    for i in range(n):
        b = (np.int64(keys[i]) & 0xFF) ^ flip
        at = counts[b]
        counts[b] = at + 1
        ordered[at] = keys[i]
        if positions is not None:
            moved[at] = positions[i]
    keys[:n] = ordered
    if positions is not None:
        positions[:n] = moved[:n]


@numba.njit
def sort_row(keys, positions, n):
    """The first n keys in order, NaN last, equal keys keeping their order (stable); positions (None: not
    kept) move with their keys."""
    for start in range(0, n, SORT_RUN):
        for i in range(start + 1, min(start + SORT_RUN, n)):
            key = keys[i]
            j = i - 1
            if positions is not None:
                position = positions[i]
            while j >= start and _sorts_before(key, keys[j]):
                keys[j + 1] = keys[j]
                if positions is not None:
                    positions[j + 1] = positions[j]
                j -= 1
            keys[j + 1] = key
            if positions is not None:
                positions[j + 1] = position
    if n <= SORT_RUN:
        return
    src_keys, dst_keys = keys, np.empty_like(keys)
    src_pos, dst_pos = positions, (None if positions is None else np.empty_like(positions))
    width = SORT_RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j = lo, mid
            for out in range(lo, hi):
                take_right = i >= mid or (j < hi and _sorts_before(src_keys[j], src_keys[i]))
                at = j if take_right else i
                dst_keys[out] = src_keys[at]
                if positions is not None:
                    dst_pos[out] = src_pos[at]
                if take_right:
                    j += 1
                else:
                    i += 1
        src_keys, dst_keys = dst_keys, src_keys
        if positions is not None:
            src_pos, dst_pos = dst_pos, src_pos
        width *= 2
    if src_keys is not keys:
        keys[:n] = src_keys[:n]
        if positions is not None:
            positions[:n] = src_pos[:n]
