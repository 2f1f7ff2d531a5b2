"""CUDA C renderer: the C-style base with CUDA's qualifiers, thread indices, warp-shuffle reductions
and cuda_fp16.h conversions for float16 (stored as __half, computed in float like NumPy's loops).

Elementwise kernels whose float32 buffers are all read and written at the thread's own index also get
a float4 variant: each thread moves 16 bytes per buffer. The runtime launches it when every such
buffer's address is 16-byte aligned (tracejit's own allocations always are), else the scalar kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracejit.ir.kernel_ir import KOp, KernelIR
from tracejit.codegen.simt.c_values import FLOAT_OPS
from tracejit.codegen.simt.c_target import CStyle, Rendered
from tracejit.codegen.simt.mapping import Launch, RenderOptions

WARP = 32
VECTOR = 4  # float4
SHARED_MEMORY = 48 * 1024  # static shared memory every architecture from sm_50 on allows


class CUDA(CStyle):
    kernel_qualifier = 'extern "C" __global__ void'
    helper_qualifier = "static __device__ __forceinline__"
    global_qualifier = ""
    local_qualifier = "__shared__"
    restrict = "__restrict__"
    barrier = "__syncthreads();"
    group_id = "blockIdx.x"
    local_id = "threadIdx.x"
    global_id = "((long long)blockIdx.x * blockDim.x + threadIdx.x)"
    types = {
        np.dtype(k): v
        for k, v in {
            "bool": "bool",
            "int8": "signed char",
            "uint8": "unsigned char",
            "int16": "short",
            "uint16": "unsigned short",
            "int32": "int",
            "uint32": "unsigned int",
            "int64": "long long",
            "uint64": "unsigned long long",
            "float16": "__half",
            "float32": "float",
            "float64": "double",
        }.items()
    }
    unsigned = {4: "unsigned int", 8: "unsigned long long"}
    long_suffix = "LL"
    infinity, nan = "__int_as_float(0x7f800000)", "__int_as_float(0x7fc00000)"
    nan64 = "__longlong_as_double(0x7ff8000000000000LL)"
    as_float, as_int = "__int_as_float({})", "__float_as_int({})"
    as_double, as_long = "__longlong_as_double({})", "__double_as_longlong({})"
    table_qualifier = "__constant__"
    fault_count = "atomicAdd(&{0}[3], 1)"
    # CUDA's hypot(5e-324, 1.8e308) is inf (seen on an H200, CUDA 13.0): an operand below 2**-60 of the other
    # leaves the larger one's magnitude (the square root of 1 + 2**-120 rounds to 1), the rest is CUDA's
    float_ops = {
        **FLOAT_OPS,
        "hypot": "(fabs({0}) > fabs({1}) "
        "? (fabs({1}) <= fabs({0}) * 0x1p-60 ? fabs({0}) : hypot({0}, {1})) "
        ": (fabs({0}) <= fabs({1}) * 0x1p-60 ? fabs({1}) : hypot({0}, {1})))",
    }
    load4, align16 = "*(const float4*)(&{0}[{1}])", "__align__(16)"
    fma = "fma({0}, {1}, {2})"  # NVRTC runs with --fmad=false (nvrtc.py); a matrix product asks for FMA
    atomic_dialect = "cuda"

    def preamble(self, source: str, options: RenderOptions) -> str:
        # the source is the body without the signature: a kernel that only stores float16 shows
        # __float2half_rn, not __half
        return "#include <cuda_fp16.h>" if "half" in source else ""

    def signature(self, name: str, params: list[str], launch: Launch) -> str:
        return f'extern "C" __global__ void __launch_bounds__({launch.group_limit}) {name}({", ".join(params)})'

    def load_half(self, ptr: str, idx: str) -> str:
        return f"__half2float({ptr}[{idx}])"

    def store_half(self, ptr: str, idx: str, value: str) -> str:
        return f"{ptr}[{idx}] = __float2half_rn({value})"

    def round_half_helpers(self) -> str:
        q = self.helper_qualifier
        return (
            f"{q} float tj_round_half(float x) {{ return __half2float(__float2half_rn(x)); }}\n"
            f"{q} float tj_round_half_d(double x) {{ return __half2float(__double2half(x)); }}"
        )

    def assume_aligned(self, name: str, ctype: str, nbytes: int) -> str:
        return f"{name} = ({ctype}*)__builtin_assume_aligned({name}, {nbytes});"

    def group_reduce(self, r, acc: str, buf: str, op: str, dt: np.dtype, identity) -> list[str]:
        """Warp shuffles inside each warp, the warps' totals through shared memory, a last warp shuffle:
        two barriers where the shared-memory tree takes one per level."""
        n = r.local_size
        if n < WARP or n % WARP:
            return super().group_reduce(r, acc, buf, op, dt, identity)
        # shuffles move 32- and 64-bit values: narrower types travel as int
        wire = "int" if dt.itemsize < 4 or dt == np.bool_ else self.types[dt]
        back = (lambda v: f"(({r.ctype(dt)}){v})") if wire == "int" else (lambda v: v)
        # every lane of the warp shuffles, unconditionally; only then is the value combined
        shuffle = [
            f"for (int o = {WARP // 2}; o > 0; o >>= 1) {{",
            f"    const {r.ctype(dt)} tj_moved = {back(f'__shfl_down_sync(0xffffffffu, ({wire}){acc}, o)')};",
            f"    {acc} = {r.combine(op, dt, acc, 'tj_moved')};",
            "}",
        ]
        warps = n // WARP
        lines = list(shuffle)
        if warps > 1:
            lines += [
                f"if ((lid & {WARP - 1}) == 0) {buf}[lid / {WARP}] = {acc};",
                self.barrier,
                f"if (lid < {WARP}) {{",
                f"    {acc} = lid < {warps} ? {buf}[lid] : {r.literal(identity, dt)};",
                *("    " + s for s in shuffle),
                "}",
            ]
        lines += [f"if (lid == 0) {buf}[0] = {acc};", self.barrier, f"{acc} = {buf}[0];", self.barrier]
        return lines


RENDERER = CUDA()


@dataclass(frozen=True)
class CudaRendered(Rendered):
    vector: Rendered | None = None  # the float4 variant, where the kernel has one
    vector_params: tuple[int, ...] = ()  # params whose addresses must be 16-byte aligned for it


def render(kernel: KernelIR, options: RenderOptions, by_value=frozenset(), symbolic=None) -> CudaRendered:
    r = RENDERER.render(kernel, options, by_value, symbolic=symbolic)
    vec = vector_params(kernel, by_value)
    if vec is None:
        return CudaRendered(r.name, r.source, r.launch)
    # four consecutive elements per thread, loads and stores of 16-byte aligned float32 buffers: after
    # unrolling, the compiler merges each buffer's four accesses into one ld/st .v4.f32
    v = RENDERER.render(
        kernel, options, by_value, lanes=VECTOR, aligned=vec, name=f"{kernel.name}_v4", symbolic=symbolic
    )
    if v.launch.symbolic != r.launch.symbolic:  # the two take one argument list (cuda_launch.BoundLaunch)
        return CudaRendered(r.name, r.source, r.launch)
    return CudaRendered(r.name, r.source, r.launch, v, vec)


def vector_params(kernel: KernelIR, by_value=frozenset()) -> tuple[int, ...] | None:
    """The params a float4 variant of `kernel` would move 16 bytes at a time, or None where it has none:
    an elementwise kernel (no loops) whose every load and store goes to the thread's own element, over
    a size that is a multiple of 4, with at least one float32 buffer."""
    ins = kernel.instrs
    if kernel.global_size % VECTOR or kernel.global_size < VECTOR * WARP:
        return None
    g = next((i for i, x in enumerate(ins) if x.op == KOp.GLOBAL), None)
    if g is None or any(
        x.op in (KOp.RANGE, KOp.LOCAL, KOp.ACC) or x.op == KOp.POW and x.value_dtype.kind == "i" for x in ins
    ):
        return None
    used = set()
    for x in ins:
        if x.op in (KOp.LOAD, KOp.STORE):
            p = ins[x.srcs[0]]
            if p.op != KOp.PARAM or p.arg in by_value:
                continue
            if x.srcs[1] != g or kernel.params[p.arg].size != kernel.global_size:
                return None
            used.add(p.arg)
    vec = tuple(sorted(i for i in used if kernel.params[i].dtype == np.float32))
    return vec or None
