"""OpenCL C renderer: the C-style base with OpenCL's qualifiers, work-item functions and half rules.

Without cl_khr_fp16, float16 is only a storage format: loaded with vload_half, computed in float,
stored with vstore_half_rte (round to nearest even, like NumPy).
"""

from __future__ import annotations

from tracejit.ir.kernel_ir import KernelIR
from tracejit.codegen.simt.c_target import CStyle, Rendered
from tracejit.codegen.simt.mapping import Launch, RenderOptions

# IEEE-exact division and square root, as NumPy computes them; no flag that changes NaN/Inf behaviour
BUILD_OPTIONS = "-cl-fp32-correctly-rounded-divide-sqrt"


class OpenCL(CStyle):
    def preamble(self, source: str, options: RenderOptions) -> str:
        lines = []
        if "double" in source:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if "atom_cmpxchg(" in source:  # 64-bit atomics (atomics.py)
            lines.append("#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable")
        if options.fp16 and "half" in source:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        return "\n".join(lines)

    def reassociable(self, statement: str) -> list[str]:
        """A float reduction's step in a block of its own that lets clang (PoCL) reorder it, as the numba
        device does (numba_math.reassoc_add): a sum over one work-item's row then vectorises (PoCL: sum 16M
        3.7 -> 0.5 ms). Only this step: every other operation keeps NumPy's order."""
        return ["{", "#ifdef __clang__", "#pragma clang fp reassociate(on)", "#endif", "    " + statement, "}"]

    def interleaved(self) -> list[str]:
        """Four vectors of the loop at once (clang: PoCL): a run's steps, an exp's polynomial above all, are
        a chain of dependent operations each, and one vector at a time leaves the core waiting on them."""
        return ["#ifdef __clang__", "#pragma clang loop interleave_count(4)", "#endif"]

    def signature(self, name: str, params: list[str], launch: Launch) -> str:
        attr = f"__attribute__((reqd_work_group_size({launch.local_size}, 1, 1))) " if launch.mode == "group" else ""
        return f"{attr}{self.kernel_qualifier} {name}({', '.join(params)})"

    def load_half(self, ptr: str, idx: str) -> str:
        return f"vload_half({idx}, {ptr})"

    def store_half(self, ptr: str, idx: str, value: str) -> str:
        return f"vstore_half_rte({value}, {idx}, {ptr})"

    def round_half_helpers(self) -> str:
        return (
            "inline float tj_round_half(float x) {\n"
            "    ushort h; vstore_half_rte(x, 0, (half*)&h); return vload_half(0, (const half*)&h);\n}\n"
            "#ifdef cl_khr_fp64\n"
            "inline float tj_round_half_d(double x) {\n"
            "    ushort h; vstore_half_rte(x, 0, (half*)&h); return vload_half(0, (const half*)&h);\n}\n"
            "#endif"
        )


RENDERER = OpenCL()


def render(kernel: KernelIR, options: RenderOptions, by_value=frozenset(), symbolic=None) -> Rendered:
    return RENDERER.render(kernel, options, by_value, symbolic=symbolic)
