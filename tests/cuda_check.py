"""Every kernel the suite compiles on the numba device is also compiled for CUDA: rendered to CUDA C,
compiled by NVRTC to PTX for compute_80 (what `cuda` compiles for with no GPU), and that PTX assembled by
ptxas for sm_80 (as the driver does on an A100). TRACEJIT_CHECK_CUDA=all adds sm_90 (an H100): the same
PTX assembled again for another chip, twice the ptxas runs, about a minute more of a 2-core `make test`.
The CUDA C does not depend on the architecture. No GPU is needed, so CI checks every generated CUDA
kernel; a failure fails the test that produced the kernel.

Active when NVRTC (the `cuda` extra) and ptxas are both present; TRACEJIT_CHECK_CUDA=0 turns it off.
"""
from __future__ import annotations

import contextlib
import os
import threading

import tracejit.frontend.kernel as kernel_module
from tracejit.codegen import nvrtc
from tracejit.errors import DeviceError, DtypeError
from tracejit.runtime.cuda_compiler import CudaTarget

PTX_ARCH = "sm_80"
ARCHS = ("sm_80", "sm_90") if os.environ.get("TRACEJIT_CHECK_CUDA") == "all" else ("sm_80",)


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
    def __init__(self):
        self.target = CudaTarget(PTX_ARCH, "checking only", f"cuda:{PTX_ARCH}")
        self.assembled: set[tuple[str, int]] = set()
        self.kernels = 0

    def check(self, traced) -> None:
        program = traced.program(self.target.layout)
        try:
            kernels = self.target.compile(program).kernels
        except DtypeError as e:   # a scatter of a dtype CUDA has no atomics for (codegen/atomics.py)
            if "cannot run on" not in str(e):
                raise
            return
        for compiled in kernels:
            self.kernels += 1
            variants = [(compiled.name, compiled.ptx)]
            if compiled.vector:
                variants.append((compiled.vector[0], compiled.vector[2]))
            for name, ptx in variants:
                for arch in ARCHS:
                    key = (arch, hash(ptx))
                    if key not in self.assembled:
                        nvrtc.assemble(ptx, arch, name)
                        self.assembled.add(key)


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

    def lower_and_check(self, args, device_name, compile_only=False):
        plan = original(self, args, device_name, compile_only)
        if plan.device.name == "numba" and not getattr(_paused, "on", False):
            check(plan.traced)
        return plan

    kernel_module.Kernel._lower = lower_and_check


def install() -> Checker:
    """After a kernel is lowered for the numba device, check it for CUDA too."""
    checker = Checker()
    after_numba_lowering(checker.check)
    return checker
