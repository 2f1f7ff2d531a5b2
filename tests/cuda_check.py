"""Every kernel the suite compiles on the numba device is also compiled for CUDA: rendered to CUDA C and
compiled by NVRTC to machine code for sm_80 (an A100), which runs ptxas's assembler within the same call
(nvrtc.compile_cubin: 36 -> 28 ms a program against PTX and a ptxas process; ptxas's errors, such as too
much shared memory for the chip, come the same). TRACEJIT_CHECK_CUDA=all adds sm_90 (an H100): another
compile for another chip, about a minute more of a 2-core `make test`. The CUDA C does not depend on the
architecture. The check compiles with NVRTC's --Ofast-compile=max
(its optimiser mostly off; the source is parsed and checked in full, and the machine code assembled):
2-4x less time a program (122 -> 58 ms for a layernorm, 300 -> 68 for a softmax), and --minimal (NVRTC
leaves out textures, device-side launches and the runtime's types, which generated kernels do not use:
22 -> 19 ms a small program); TRACEJIT_CHECK_CUDA=all compiles with the cuda device's own options. A failure is reported through the device's own compile
(Checker.one_by_one). No GPU is needed, so CI checks every generated CUDA
kernel; a failure fails the test that produced the kernel. A program's kernels are compiled and assembled
together (Checker), and one by one only to report a failure.

Active when NVRTC (the `cuda` extra) and ptxas are both present; TRACEJIT_CHECK_CUDA=0 turns it off.
"""
from __future__ import annotations

import contextlib
import os
import threading

import tracejit.frontend.kernel as kernel_module
from tracejit.codegen.simt import cuda as cuda_codegen
from tracejit.codegen.simt import nvrtc
from tracejit.errors import CompileError, DeviceError, DtypeError
from tracejit.runtime.cuda.compiler import CudaTarget
from tracejit.runtime.device_memory import by_value_params

PTX_ARCH = "sm_80"
ALL = os.environ.get("TRACEJIT_CHECK_CUDA") == "all"
ARCHS = ("sm_80", "sm_90") if ALL else ("sm_80",)
FAST = () if ALL else ("--Ofast-compile=max", "--minimal")


def unavailable_reason() -> str | None:
    """Why the CUDA check cannot run here, or None."""
    if os.environ.get("TRACEJIT_CHECK_CUDA", "1") == "0":
        return "TRACEJIT_CHECK_CUDA=0"
    try:
        nvrtc.version()
    except DeviceError as e:
        return str(e)
    if nvrtc.ptxas() is None:
        return "ptxas was not found (set PTXAS or put the CUDA toolkit's bin on PATH)"
    return None


class Checker:
    """Checks each program's kernels together: one NVRTC compile to sm_80 machine code of a translation unit
    holding all its kernels not checked before (NVRTC's start is most of a small kernel's check). Where that
    fails, each kernel is compiled on its own, as the cuda device does, so the error names the kernel and the
    generated line."""

    def __init__(self):
        self.target = CudaTarget(PTX_ARCH, "checking only", f"cuda:{PTX_ARCH}")
        self.checked: set[int] = set()          # hashes of sources compiled and assembled
        self.kernels = 0
        self.assemblies = 0

    def check(self, traced) -> None:
        for program in traced.programs(self.target.layout):   # (a graph with loops: several)
            self.check_program(program)

    def check_program(self, program) -> None:
        compiler = self.target.compiler
        try:
            rendered = [cuda_codegen.render(k, compiler.options, by_value_params(program, keys))
                        for k, keys in zip(program.kernels, program.launches)]
        except DtypeError as e:   # a scatter of a dtype CUDA has no atomics for (codegen/simt/atomics.py)
            if "cannot run on" not in str(e):
                raise
            return
        self.kernels += len(rendered)
        sources = {}
        for r in rendered:
            sources[r.name] = r.source
            if r.vector is not None:
                sources[r.vector.name] = r.vector.source
        fresh = {name: source for name, source in sources.items() if hash(source) not in self.checked}
        if not fresh:
            return
        try:
            source = together(fresh)
            for arch in ARCHS:
                nvrtc.compile_cubin("checked", source, arch, FAST)
        except CompileError:
            self.one_by_one(program)
        self.assemblies += len(fresh)
        self.checked.update(hash(source) for source in fresh.values())

    def one_by_one(self, program) -> None:
        """Each kernel through the cuda device's own compile, each PTX assembled: raises the first error."""
        for compiled in self.target.compile(program).kernels:
            variants = [(compiled.name, compiled.ptx)]
            if compiled.vector:
                variants.append((compiled.vector[0], compiled.vector[2]))
            for name, ptx in variants:
                for arch in ARCHS:
                    nvrtc.assemble(ptx, arch, name)


def together(sources: dict[str, str]) -> str:
    """One translation unit of several kernels: each in a namespace of its own (their helpers share names;
    their extern "C" names differ), cuda_fp16.h included once, first."""
    include = "#include <cuda_fp16.h>"
    parts = [include] if any(include in source for source in sources.values()) else []
    parts += [f"namespace tj_checked_{i} {{\n{source.replace(include, '')}\n}}"
              for i, source in enumerate(sources.values())]
    return "\n".join(parts)


_paused = threading.local()


@contextlib.contextmanager
def checks_paused():
    """No CUDA or MSL checks in this block, on this thread: for a test that lowers one program at many
    sizes to count numba compiles, where checking every size's renderings would only cost time."""
    _paused.on = True
    try:
        yield
    finally:
        _paused.on = False


def after_numba_lowering(check) -> None:
    """Wrap Kernel._lower: each plan lowered for the numba device also goes through check(traced)."""
    original = kernel_module.Kernel._lower

    def lower_and_check(self, args, device_name, compile_only=False, sizes=()):
        plan = original(self, args, device_name, compile_only, sizes)
        if plan.device.name == "numba" and not getattr(_paused, "on", False):
            check(plan.traced)
        return plan

    kernel_module.Kernel._lower = lower_and_check


def install() -> Checker:
    """After a kernel is lowered for the numba device, check it for CUDA too."""
    checker = Checker()
    after_numba_lowering(checker.check)
    return checker
