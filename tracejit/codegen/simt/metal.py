"""Metal Shading Language renderer: the C-style base with MSL's address spaces, `[[buffer(i)]]` and
thread-position attributes, threadgroup memory, SIMD-group reductions and `half` storage.

Every buffer is a `device` pointer at `[[buffer(i)]]`, i its position among the kernel's parameters;
a by-value scalar is a `constant T&` at its own index (the runtime sets it with setBytes). Metal has no
double: float64 is refused with the dtype and the device named, and a float64 scalar argument arrives
as float, as on an OpenCL device without cl_khr_fp64. float16 is stored as `half` and computed in float,
like NumPy's loops (Metal converts float to half rounding to nearest even). MSL has no erf, expm1,
log1p, cbrt or hypot: math_f32's float32 ones are used.

A work-group's reduction runs first inside each SIMD group (simd_sum for sums, simd_max/simd_min for
integers, simd_shuffle_down trees where NumPy's NaN rules must hold), then across the SIMD groups
through threadgroup memory. The SIMD width is read at run time ([[threads_per_simdgroup]]): 32 on
Apple GPUs, 8 to 64 on the AMD and Intel GPUs of older Macs.
"""

from __future__ import annotations

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir.kernel_ir import KOp, KernelIR
from tracejit.codegen.simt.c_target import CStyle, Rendered
from tracejit.codegen.simt.mapping import Launch, RenderOptions

MAX_BUFFERS = 31  # buffer argument table entries per kernel
THREADGROUP_MEMORY = 32 * 1024  # every Metal GPU allows this much threadgroup memory
DEFAULT_OPTIONS = RenderOptions(
    device="metal", fp64=False, fp16=False, max_local_size=256, always_check=True
)  # one source for every global size


class Metal(CStyle):
    kernel_qualifier = "kernel void"
    helper_qualifier = "inline"
    global_qualifier = "device"
    local_qualifier = "threadgroup"
    restrict = ""
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    group_id = "tj_group"
    local_id = "tj_lid"
    global_id = "tj_gid"
    types = {
        np.dtype(k): v
        for k, v in {
            "bool": "bool",
            "int8": "char",
            "uint8": "uchar",
            "int16": "short",
            "uint16": "ushort",
            "int32": "int",
            "uint32": "uint",
            "int64": "long",
            "uint64": "ulong",
            "float16": "half",
            "float32": "float",
        }.items()
    }
    unsigned = {4: "uint", 8: "ulong"}
    long_suffix = "L"
    infinity, nan = "as_type<float>(0x7f800000u)", "as_type<float>(0x7fc00000u)"
    as_float, as_int = "as_type<float>({})", "as_type<int>({})"
    table_qualifier = "constant"
    fault_count = "atomic_fetch_add_explicit((device atomic_int*)&{0}[3], 1, memory_order_relaxed)"
    atomic_dialect = "metal"
    no_fp64 = "the Metal Shading Language has no 64-bit floating point"
    own_functions = frozenset({KOp.ERF, KOp.EXPM1, KOp.LOG1P, KOp.CBRT, KOp.HYPOT})  # not in MSL
    max_params = MAX_BUFFERS

    def preamble(self, source: str, options: RenderOptions) -> str:
        return "#include <metal_stdlib>\nusing namespace metal;"

    def buffer_param(self, position: int, ctype: str, name: str) -> str:
        return f"device {ctype}* {name} [[buffer({position})]]"

    def value_param(self, position: int, ctype: str, name: str) -> str:
        return f"constant {ctype}& {name} [[buffer({position})]]"

    def signature(self, name: str, params: list[str], launch: Launch) -> str:
        if len(params) > self.max_params:
            raise UnsupportedError(
                f"kernel {name} takes {len(params)} buffers and scalars, and Metal binds at most "
                f"{MAX_BUFFERS} per kernel; split the computation into several @tj.kernel calls"
            )
        if launch.mode == "thread":
            builtins = ["uint tj_gid [[thread_position_in_grid]]"]
        else:
            builtins = [
                "uint tj_group [[threadgroup_position_in_grid]]",
                "uint tj_lid [[thread_position_in_threadgroup]]",
                "uint tj_lane [[thread_index_in_simdgroup]]",
                "uint tj_sg [[simdgroup_index_in_threadgroup]]",
                "uint tj_nsg [[simdgroups_per_threadgroup]]",
                "uint tj_simd [[threads_per_simdgroup]]",
            ]
        joined = ",\n        ".join(params + builtins)
        return f"kernel void {name}(\n        {joined})"

    def load_half(self, ptr: str, idx: str) -> str:
        return f"float({ptr}[{idx}])"

    def store_half(self, ptr: str, idx: str, value: str) -> str:
        return f"{ptr}[{idx}] = half({value})"

    def round_half_helpers(self) -> str:
        return "inline float tj_round_half(float x) { return float(half(x)); }"

    def group_reduce(self, r, acc: str, buf: str, op: str, dt: np.dtype, identity) -> list[str]:
        """Each SIMD group reduces its lanes; lane 0 of each leaves its total in threadgroup memory;
        work-item 0 combines those (at most local_size / SIMD width) and every work-item reads the result."""
        if dt.itemsize == 8:  # SIMD-group functions take 32-bit and narrower values only
            return super().group_reduce(r, acc, buf, op, dt, identity)
        ctype = r.ctype(dt)
        narrow = dt.itemsize < 4 or dt == np.bool_
        if dt.kind in "iub" and op in ("sum", "max", "min"):
            # integer sums wrap: added as uint, whose overflow is defined, then narrowed like NumPy
            wire = "uint" if op == "sum" else "int" if narrow else ctype
            simd = f"simd_{op}(({wire}){acc})"
            lines = [f"{acc} = ({ctype}){simd};" if dt != np.bool_ else f"{acc} = {simd} != 0;"]
        elif dt.kind == "f" and op == "sum":
            lines = [f"{acc} = simd_sum({acc});"]
        else:  # float max/min (NaN wins, as in NumPy) and products: a shuffle tree
            wire = "int" if narrow else ctype
            back = (lambda v: f"(({ctype}){v})") if wire != ctype else (lambda v: v)
            # every lane shuffles, unconditionally; only then is the value combined
            lines = [
                "for (uint o = tj_simd / 2; o > 0; o >>= 1) {",
                f"    const {ctype} tj_moved = {back(f'simd_shuffle_down(({wire}){acc}, (ushort)o)')};",
                f"    {acc} = {r.combine(op, dt, acc, 'tj_moved')};",
                "}",
            ]
        b = self.barrier
        return lines + [
            f"if (tj_lane == 0) {buf}[tj_sg] = {acc};",
            b,
            "if (lid == 0) {",
            f"    for (uint s = 1; s < tj_nsg; s++) {acc} = {r.combine(op, dt, acc, f'{buf}[s]')};",
            f"    {buf}[0] = {acc};",
            "}",
            b,
            f"{acc} = {buf}[0];",
            b,
        ]


RENDERER = Metal()


def render(kernel: KernelIR, options: RenderOptions = DEFAULT_OPTIONS, by_value=frozenset(), symbolic=None) -> Rendered:
    return RENDERER.render(kernel, options, by_value, symbolic=symbolic)
