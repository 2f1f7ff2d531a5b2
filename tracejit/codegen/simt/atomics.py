"""ATOMIC (kernel_ir) on the SIMT targets: an update combined into one element of an output buffer while
other work-items update the same element. Native atomic add/max/min where the language has them for the
dtype (32-bit integers everywhere, float32 add on CUDA); everything else is a compare-and-swap loop on
the element's bit pattern (32 bits, or 64 on OpenCL with cl_khr_int64_base_atomics and on CUDA), the
new value computed as the renderer combines values elsewhere (NaN-propagating max/min, wrapping integer
arithmetic). Dtypes a target cannot update atomically (8/16-bit integers, bool, float16; 64-bit ones on
Metal and WebGPU) are refused with the dtype, the device and the alternatives named.
"""

from __future__ import annotations

import numpy as np

from tracejit.errors import DtypeError
from tracejit.ir.kernel_ir import KOp

_I32, _U32, _F32 = np.dtype("int32"), np.dtype("uint32"), np.dtype("float32")
_WIDE = frozenset(np.dtype(d) for d in ("int64", "uint64", "float64"))
# (op, dtype) -> function name, per dialect: the natively atomic updates
_NATIVE: dict[str, dict[tuple[str, np.dtype], str]] = {
    "opencl": {
        (op, dt): f"atomic_{name}"
        for op, name in (("sum", "add"), ("max", "max"), ("min", "min"))
        for dt in (_I32, _U32)
    },
    "cuda": {
        **{
            (op, dt): f"atomic{name}"
            for op, name in (("sum", "Add"), ("max", "Max"), ("min", "Min"))
            for dt in (_I32, _U32)
        },
        ("sum", _F32): "atomicAdd",
    },
    "metal": {
        (op, dt): f"atomic_fetch_{name}_explicit"
        for op, name in (("sum", "add"), ("max", "max"), ("min", "min"))
        for dt in (_I32, _U32)
    },
    "wgsl": {
        (op, dt): f"atomic{name}"
        for op, name in (("sum", "Add"), ("max", "Max"), ("min", "Min"))
        for dt in (_I32, _U32)
    },
}
_WIDE_DIALECTS = frozenset({"opencl", "cuda"})  # 64-bit compare-and-swap


def check(dialect: str, dt: np.dtype, device: str, atomics64: bool = True) -> None:
    """DtypeError unless the dialect (on a device with 64-bit atomics or not) can update dt atomically."""
    if dt in (_I32, _U32, _F32) or dt in _WIDE and dialect in _WIDE_DIALECTS and atomics64:
        return
    cast = "float32" if dt.kind == "f" else "int32" if dt.kind in "ib" else "uint32"
    what = "64-bit atomics" if dt in _WIDE else "atomics on elements narrower than 32 bits"
    raise DtypeError(
        f"a scatter (np.add.at & co., np.bincount, np.histogram, x[idx] = v with many updates) of "
        f"{dt.name} cannot run on {device or dialect}: it has no {what}. Cast to {cast} first "
        f"(x.astype(np.{cast})), or use the numba device, which updates in order without atomics"
    )


def render(r, i: int, a: list[str]) -> list[str]:
    """The statements of ATOMIC instruction i (sources named a: buffer, index, value) for renderer r."""
    x = r.ins[i]
    dialect, dt, op = r.t.atomic_dialect, r.ins[x.srcs[0]].dtype, x.arg
    check(dialect, dt, r.o.device, r.o.atomics64)
    buf, idx, v = a
    native = _NATIVE[dialect].get((op, dt))
    if native:
        return [_native(dialect, native, buf, idx, v, dt)]
    return _CAS[dialect](r, buf, idx, v, dt, op)


def _native(dialect: str, fn: str, buf: str, idx: str, v: str, dt: np.dtype) -> str:
    if dialect == "metal":
        kind = "atomic_int" if dt == _I32 else "atomic_uint"
        return f"{fn}((device {kind}*)&{buf}[{idx}], {v}, memory_order_relaxed);"
    return f"{fn}(&{buf}[{idx}], {v});"


def _bits(dt: np.dtype) -> int:
    return 8 * dt.itemsize


def _opencl_cas(r, buf, idx, v, dt, op) -> list[str]:
    word = r.t.unsigned[dt.itemsize]
    cmpxchg = "atom_cmpxchg" if dt.itemsize == 8 else "atomic_cmpxchg"
    to_value = {4: "as_float({})", 8: "as_double({})"}[dt.itemsize] if dt.kind == "f" else f"(({r.ctype(dt)}){{}})"
    to_bits = {4: "as_uint({})", 8: "as_ulong({})"}[dt.itemsize] if dt.kind == "f" else f"(({word}){{}})"
    pointer = f"volatile {r.t.global_qualifier} {word}*"
    return _cas_loop(
        r,
        word,
        pointer,
        f"({pointer})&{buf}[{idx}]",
        "*tj_p",
        cmpxchg + "(tj_p, tj_seen, {desired})",
        to_value,
        to_bits,
        v,
        dt,
        op,
    )


def _cuda_cas(r, buf, idx, v, dt, op) -> list[str]:
    word = r.t.unsigned[dt.itemsize]
    floats = {
        4: ("__uint_as_float({})", "__float_as_uint({})"),
        8: ("__longlong_as_double((long long){})", "(unsigned long long)__double_as_longlong({})"),
    }
    to_value, to_bits = floats[dt.itemsize] if dt.kind == "f" else (f"(({r.ctype(dt)}){{}})", f"(({word}){{}})")
    return _cas_loop(
        r,
        word,
        f"{word}*",
        f"({word}*)&{buf}[{idx}]",
        f"*(volatile {word}*)tj_p",
        "atomicCAS(tj_p, tj_seen, {desired})",
        to_value,
        to_bits,
        v,
        dt,
        op,
    )


def _cas_loop(r, word, pointer, ptr, first, cas, to_value, to_bits, v, dt, op) -> list[str]:
    """C: read the element, combine, swap it in if unchanged meanwhile; otherwise again with what was seen."""
    desired = to_bits.format(r.combine(op, dt, to_value.format("tj_seen"), v))
    return [
        "{",
        f"    {pointer} tj_p = {ptr};",
        f"    {word} tj_old = {first};",
        f"    {word} tj_seen;",
        "    do {",
        "        tj_seen = tj_old;",
        f"        tj_old = {cas.format(desired=desired)};",
        "    } while (tj_old != tj_seen);",
        "}",
    ]


_RELAXED = "memory_order_relaxed"


def _metal_cas(r, buf, idx, v, dt, op) -> list[str]:
    kind, word = ("atomic_int", "int") if dt == _I32 else ("atomic_uint", "uint")
    to_value = "as_type<float>({})" if dt.kind == "f" else "{}"
    to_bits = "as_type<uint>({})" if dt.kind == "f" else "{}"
    new = to_bits.format(r.combine(op, dt, to_value.format("tj_seen"), v))
    return [
        "{",
        f"    device {kind}* tj_p = (device {kind}*)&{buf}[{idx}];",
        f"    {word} tj_seen = atomic_load_explicit(tj_p, memory_order_relaxed);",
        f"    while (!atomic_compare_exchange_weak_explicit(tj_p, &tj_seen, {new}, {_RELAXED}, {_RELAXED})) {{}}",
        "}",
    ]


def _wgsl_cas(r, buf, idx, v, dt, op) -> list[str]:
    to_value = "bitcast<f32>({})" if dt.kind == "f" else "{}"
    to_bits = "bitcast<u32>({})" if dt.kind == "f" else "{}"
    new = to_bits.format(r.combine(op, dt, to_value.format("tj_seen"), v))
    return [
        "{",
        f"    var tj_seen = atomicLoad(&{buf}[{idx}]);",
        "    loop {",
        f"        let tj_r = atomicCompareExchangeWeak(&{buf}[{idx}], tj_seen, {new});",
        "        if (tj_r.exchanged) { break; }",
        "        tj_seen = tj_r.old_value;",
        "    }",
        "}",
    ]


_CAS = {"opencl": _opencl_cas, "cuda": _cuda_cas, "metal": _metal_cas, "wgsl": _wgsl_cas}


def wgsl_element(dt: np.dtype) -> str:
    """The element type of a WGSL buffer that atomics update: atomic<i32>, or atomic<u32> (float32 bits too)."""
    return "atomic<i32>" if dt == _I32 else "atomic<u32>"


def updated_params(kernel) -> set[int]:
    """The params an ATOMIC updates (WGSL declares their elements atomic)."""
    return {kernel.instrs[x.srcs[0]].arg for x in kernel.instrs if x.op == KOp.ATOMIC}
