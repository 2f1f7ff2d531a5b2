"""The metal target: MSL (codegen/simt/metal.py) compiled and run through PyObjC's Metal bindings on macOS.

One device per process (the system default GPU), created lazily; buffers in shared storage mode from a
caching allocator (memory.py); a library and compute pipeline per kernel source, built once per process
(compiler.py); one command buffer per call with every kernel of the call in one compute encoder,
committed without waiting (launch.py). Host reads wait for the work submitted before them.

On other systems nothing imports PyObjC: tj.devices() reports metal unavailable with the reason, and
f.lower(..., device="metal") renders the MSL with MetalTarget (tracejit.codegen.simt.msl_check compiles it
against a shim of the Metal standard library).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from dataclasses import replace

from tracejit.codegen.simt import mapping
from tracejit.codegen.simt import metal as metal_codegen
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.runtime import gpu_nodes, emulator
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import BlockPool
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.metal.compiler import MetalCompiler, MetalTarget, _layout
from tracejit.runtime.metal.launch import MetalLaunches
from tracejit.runtime.metal.memory import MetalMemory
from tracejit.runtime.symbolic_sizes import SymbolicSizes

INSTALL_HINT = "pip install 'tracejit[metal]' (pyobjc-framework-Metal)"
LOWER_ONLY = "kernels can still be lowered to MSL here: f.lower(..., device='metal')"
ALIGN = 256


def _bindings():
    """(Metal, objc): PyObjC's, or the CPU emulator's under TRACEJIT_EMULATE=metal."""
    if emulator.emulates("metal"):
        from tracejit.runtime.emulator import metal as emulated

        found = emulated.bindings()
        return found["Metal"], found["objc"]
    import Metal
    import objc

    return Metal, objc


@functools.cache
def _system_device():
    """(MTLDevice, None) or (None, why not). Never raises; imports PyObjC only on macOS."""
    if emulator.problem():
        return None, emulator.problem()
    if emulator.emulates("metal"):
        from tracejit.runtime.emulator import build

        reason = build.unavailable_reason()
        return (None, reason) if reason else (_bindings()[0].MTLCreateSystemDefaultDevice(), None)
    if sys.platform != "darwin":
        return None, f"Metal needs macOS (this is {sys.platform}); {LOWER_ONLY}"
    try:
        import Metal
    except ImportError as e:
        return None, f"PyObjC's Metal framework is not importable ({e}); {INSTALL_HINT}"
    try:
        device = Metal.MTLCreateSystemDefaultDevice()
    except Exception as e:  # noqa: BLE001  (whatever PyObjC raises, the reason is reported)
        return None, f"MTLCreateSystemDefaultDevice failed ({type(e).__name__}: {e})"
    if device is None:
        return None, "macOS reports no Metal device"
    return device, None


_OPEN: list = []  # the MetalDevice of this process, once made


class MetalDevice(MetalCompiler, MetalMemory, MetalLaunches, Device):
    """The system default Metal GPU (`metal`)."""

    computes_float64 = False
    inner_sizes_as_arguments = True  # row lengths and loop extents too, not only the global size (symbolic_sizes)
    keeps_compiled_kernels = False
    no_disk_cache = (
        "each process builds its libraries and pipelines from MSL (macOS keeps its own cache of "
        "compiled shaders); tracejit stores no Metal binaries"
    )

    @staticmethod
    def compile_only(suffix: str | None) -> MetalTarget | None:
        if suffix:
            raise DeviceError("metal has one device per process: use 'metal'")
        return None if _OPEN else MetalTarget()

    @staticmethod
    def probe():
        device, reason = _system_device()
        if device is None:
            return False, reason, ""
        return True, None, _describe(device)

    @staticmethod
    def maybe_gpu() -> bool:
        """Automatic selection takes a GPU, never the emulator (which is for debugging, and slow)."""
        return not gpu_nodes.ruled_out("metal") and not emulator.emulates("metal")

    @staticmethod
    def default_is_gpu() -> bool:
        return not emulator.emulates("metal")

    def __init__(self, index: int | None = None):
        if index:
            raise DeviceError("metal has one device per process: use 'metal'")
        device, reason = _system_device()
        if device is None:
            raise DeviceError(f"metal is not available: {reason}")
        self.Metal, self.objc = _bindings()
        self.mtl, self.name = device, "metal"
        self.description = _describe(device)
        self.queue = device.newCommandQueue()
        threads = int(device.maxThreadsPerThreadgroup().width)
        memory = int(device.maxThreadgroupMemoryLength())
        self.options = replace(
            metal_codegen.DEFAULT_OPTIONS,
            device=f"metal ({self.description})",
            max_local_size=min(metal_codegen.DEFAULT_OPTIONS.max_local_size, threads),
        )
        self.layout = _layout(memory)
        self._committed = 0  # command buffers committed
        self._completed = 0  # of those, known to have finished
        self._last = None  # the last command buffer committed
        self._commits = threading.Lock()  # the three above change together: threads commit and wait at once
        self.pool = BlockPool(self._new_buffer, ALIGN, stamp=lambda: self._committed, device="metal")
        self.sizes = SymbolicSizes(mapping.slot_argument, "simt-sizes")  # which sizes are arguments of the code
        self.apply_memory_limit()
        self._pipelines: dict[tuple, object] = {}  # (source, function) -> pipeline
        _OPEN.append(self)

    @property
    def info(self) -> DeviceInfo:
        """MTLDevice's properties. Total memory: the working set Metal recommends for this device; free:
        that less what the device has allocated now. Metal reports no driver version or SIMD width
        outside a pipeline."""
        total = int(self.mtl.recommendedMaxWorkingSetSize())
        free = max(0, total - int(self.mtl.currentAllocatedSize()))
        return DeviceInfo(
            self.name,
            "metal",
            "emulated" if emulator.emulates("metal") else "gpu",
            "tracejit (CPU emulator)" if emulator.emulates("metal") else "Apple",
            None,
            total,
            free,
            None,
            None,
            bool(self.mtl.hasUnifiedMemory()),
            int(self.mtl.maxThreadsPerThreadgroup().width),
            int(self.mtl.maxThreadgroupMemoryLength()),
            None,
            dtypes_without("float64"),
        )

    def synchronize(self) -> None:
        self._wait()

    def _wait(self) -> None:
        """Wait for every committed command buffer; report one that failed. Only what was committed when
        the wait began is then known to be complete: another thread may have committed more meanwhile."""
        with self._commits:
            last, committed = self._last, self._committed
        if last is None:
            return
        last.waitUntilCompleted()
        with self._commits:
            if self._last is last:
                self._last = None
            self._completed = max(self._completed, committed)
        if last.status() == self.Metal.MTLCommandBufferStatusError:
            error = last.error()
            raise DeviceError(
                f"{self.name}: a command buffer failed: "
                f"{error.localizedDescription() if error is not None else 'no error given'}"
            )

    # -- the roles together: a program's launch plan (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)


def _describe(device) -> str:
    parts = [str(device.name())]
    with contextlib.suppress(Exception):
        parts.append("unified memory" if device.hasUnifiedMemory() else "discrete memory")
    return ", ".join(parts)
