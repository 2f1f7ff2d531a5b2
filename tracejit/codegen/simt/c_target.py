"""The spelling of a C-family target (OpenCL C here; CUDA C, MSL and WGSL override it): qualifiers, thread
ids, barriers, type names, statements, and the hooks cstyle.py's instruction walk calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.sizes import Slot
from tracejit.codegen.simt.c_values import FLOAT_OPS
from tracejit.codegen.simt.mapping import Launch, RenderOptions

if TYPE_CHECKING:
    from tracejit.codegen.simt import cstyle


@dataclass(frozen=True)
class Rendered:
    name: str
    source: str
    launch: Launch
    # the source's top-level parts, joined by blank lines: its preamble and helper functions, then the kernel (a
    # C-style target's: what runtime/opencl/compiler.py's build_together puts in a program of several kernels)
    pieces: tuple[str, ...] = field(default=(), kw_only=True)


class CStyle:
    """The strings of a C-family target (OpenCL's here). A target also defines how half values move
    between memory and float registers where it has no half arithmetic: load_half(ptr, idx),
    store_half(ptr, idx, value) and round_half_helpers() (C functions tj_round_half(float) and
    tj_round_half_d(double))."""

    # declared, not defined: each C target's own (WGSL, without half storage, never calls them)
    load_half: Callable[[str, str], str]
    store_half: Callable[[str, str, str], str]
    round_half_helpers: Callable[[], str]

    # ---- what a target sets ----
    kernel_qualifier = "__kernel void"
    helper_qualifier = "inline"
    global_qualifier = "__global"
    local_qualifier = "__local"
    restrict = "restrict"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    group_id = "get_group_id(0)"
    local_id = "get_local_id(0)"
    global_id = "get_global_id(0)"
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
            "float64": "double",
        }.items()
    }
    unsigned = {4: "uint", 8: "ulong"}
    long_suffix = "L"
    # NaN from its bits: PoCL's NAN macro converted to double, or stored as half, is not a NaN
    infinity, nan, nan64 = "INFINITY", "as_float(0x7fc00000)", "as_double(0x7ff8000000000000L)"
    as_float, as_int = "as_float({})", "as_int({})"  # reinterpret bits
    as_double, as_long = "as_double({})", "as_long({})"  # reinterpret 64 bits
    table_qualifier = "__constant"  # a constant array at program scope
    no_fp64 = "it reports no cl_khr_fp64"  # why float64 is refused where options.fp64 is off
    own_functions: frozenset[str] = frozenset()  # math_f32 functions the target's library lacks
    max_params: int | None = None  # arguments a kernel may take (Metal's binding table)
    float_ops = FLOAT_OPS  # a target replaces the entries its library gets wrong
    # the error record's count of faults (int word 3 of `err`) incremented atomically: the old count
    fault_count = "atomic_inc(&{0}[3])"
    fma: str | None = None  # a*b+c rounded once, for a target whose compiler is told not to contract
    # four floats from 16-byte-aligned local memory as one load ({0}: the array, {1}: the first index), parts
    # .x .y .z .w, and the qualifier that aligns a local array so (tiled.py); None: four loads
    load4: str | None = None
    align16 = ""
    atomic_dialect = "opencl"  # how ATOMIC is spelled (atomics.py)

    def buffer_param(self, position: int, ctype: str, name: str) -> str:
        """A kernel parameter pointing at a buffer of `ctype` (const-qualified for inputs)."""
        return f"{self.global_qualifier} {ctype}* {self.restrict} {name}".replace("  ", " ").strip()

    def value_param(self, position: int, ctype: str, name: str) -> str:
        """A kernel parameter passed by value."""
        return f"const {ctype} {name}"

    def preamble(self, source: str, options: RenderOptions) -> str:
        return ""

    def signature(self, name: str, params: list[str], launch: Launch) -> str:
        return f"{self.kernel_qualifier} {name}({', '.join(params)})"

    def reassociable(self, statement: str) -> list[str]:
        """Lines for a float reduction's accumulating step that the compiler may reorder (opencl.py)."""
        return [statement]

    def interleaved(self) -> list[str]:
        """Lines before a work-item's loop over a run of its row, asking for several vectors in flight
        at once (opencl.py)."""
        return []

    def group_reduce(self, r: cstyle._Render, acc: str, buf: str, op: str, dt: np.dtype, identity) -> list[str]:
        """Lines that combine every work-item's `acc` of a work-group into the total, which every
        work-item then holds: a tree in the local array `buf` (one slot per work-item)."""
        b, i32 = self.barrier, np.dtype("int32")
        return [
            f"{buf}[lid] = {acc};",
            b,
            self.loop(
                "s",
                self.types[i32],
                r.literal(r.local_size // 2, i32),
                f"s > {r.literal(0, i32)}",
                self.halve.format("s"),
            ),
            "    " + self.guard("lid < s", f"{buf}[lid] = {r.combine(op, dt, f'{buf}[lid]', f'{buf}[lid + s]')};"),
            f"    {b}",
            "}",
            f"{acc} = {buf}[0];",
            b,
        ]

    # ---- how statements are spelled ----
    halve = "{0} >>= 1"  # halve a positive loop counter

    def let(self, name: str, ctype: str, expr: str) -> str:
        """An immutable value."""
        return f"const {ctype} {name} = {expr};"

    def var(self, name: str, ctype: str, expr: str) -> str:
        """A mutable variable (an accumulator)."""
        return f"{ctype} {name} = {expr};"

    def loop(self, name: str, ctype: str, start: str, cond: str, step: str) -> str:
        return f"for ({ctype} {name} = {start}; {cond}; {step}) {{"

    def guard(self, cond: str, statement: str) -> str:
        return f"if ({cond}) {statement}"

    def array(self, name: str, ctype: str, n: int, shared: bool) -> str:
        """A work-item's own array, or (shared) one of the work-group's."""
        return f"{self.local_qualifier + ' ' if shared else ''}{ctype} {name}[{n}];"

    def index_type(self, bits: int) -> str:
        return self.types[np.dtype(f"int{bits}")]

    # ---- the renderer ----
    def assume_aligned(self, name: str, ctype: str, nbytes: int) -> str:
        """A statement telling the compiler that buffer `name` is nbytes-aligned."""
        return ""

    def render(
        self,
        kernel: KernelIR,
        options: RenderOptions,
        by_value: frozenset[int] = frozenset(),
        lanes: int = 1,
        aligned: tuple[int, ...] = (),
        name: str | None = None,
        symbolic: dict[Slot, str] | None = None,
    ) -> Rendered:
        """The kernel as C source. lanes > 1: each work-item computes `lanes` consecutive global indices
        (the size must be a multiple), in an unrolled loop; `aligned` params are then assumed aligned
        to lanes elements, so the compiler can merge a work-item's accesses into vector ones.
        `symbolic`: the symbolic sizes (slot_argument), by-value arguments, by slot (Launch.symbolic)."""
        from tracejit.codegen.simt import cstyle  # (the walk imports this module's targets' base)

        return cstyle.render(self, kernel, options, by_value, lanes, aligned, name, symbolic)
