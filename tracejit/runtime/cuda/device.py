"""The cuda target: kernels rendered to CUDA C, compiled to PTX by NVRTC and loaded (compiler.py), launched
through the driver API on one stream per GPU (launch.py). Results stay on the GPU as tj.Array (memory.py),
which exposes __cuda_array_interface__ and __dlpack__; CuPy / PyTorch / Numba device arrays are read in place.

Compiling needs no GPU: where there is none, `cuda` (and `cuda:sm_90`, ...) is a compile-only target
for lower() and warm(); its PTX lands in the disk cache under the architecture, for a GPU machine later.
"""

from __future__ import annotations

import threading

from tracejit.codegen.simt import mapping
from tracejit.codegen.simt import nvrtc
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.runtime.cuda import driver as cu
from tracejit.runtime import emulator, gpu_nodes
from tracejit.runtime.cuda.compiler import CUDAModules, CudaCompiler, CudaTarget, EmulatedCudaCompiler, compile_arch
from tracejit.runtime.cuda.launch import CUDALaunches
from tracejit.runtime.cuda.memory import CUDAMemory
from tracejit.runtime.device_info import ALL_DTYPES, DeviceInfo
from tracejit.runtime.device_interface import Device
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.symbolic_sizes import SymbolicSizes

LOWER_ONLY = (
    "kernels can still be lowered and warmed for CUDA here (PTX for TRACEJIT_CUDA_ARCH, default "
    f"{nvrtc.DEFAULT_ARCH}, or device='cuda:sm_90')"
)


class _Current(threading.local):
    context = None


_CURRENT = _Current()


class CUDADevice(CUDAModules, CUDAMemory, CUDALaunches, Device):
    """One GPU through the driver API: `cuda` (the first visible GPU) or `cuda:N`."""

    imports_foreign = True  # another library's arrays on this GPU, without a copy (import_foreign)
    inner_sizes_as_arguments = True  # row lengths and loop extents too, not only the global size (symbolic_sizes)

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this Linux machine has no NVIDIA device file (gpu_nodes): automatic device choice
        then loads neither the driver nor NVRTC to find out."""
        return not gpu_nodes.ruled_out("cuda")

    @staticmethod
    def probe():
        ok, reason = cu.initialise()
        if emulator.emulates("cuda"):
            return ok, reason, "cuda:0 " + _describe(0) if ok else ""
        try:
            nvrtc.version()
        except DeviceError as e:
            return False, str(e), ""
        if not ok:
            return False, f"{reason.rstrip('.')}; {LOWER_ONLY}", ""
        d = cu.driver()
        count = cu.check(d.cuDeviceGetCount(), "cuDeviceGetCount")
        return True, None, "; ".join(f"cuda:{i} {_describe(i)}" for i in range(count))

    @staticmethod
    def default_is_gpu() -> bool:
        """Automatic selection takes a GPU, never the emulator (which is for debugging, and slow)."""
        return not emulator.emulates("cuda")

    @staticmethod
    def compile_only(suffix: str | None) -> CudaTarget | None:
        """The compile-only target for `cuda` with no usable GPU, or for `cuda:sm_XX` anywhere."""
        ok, reason = cu.initialise()
        if suffix is None and ok:
            return None
        arch = nvrtc.parse_arch(suffix)
        why = reason if not ok else f"{arch} names an architecture to compile for, not a GPU; run on 'cuda'"
        assert why is not None  # initialise says why where it fails
        return CudaTarget(arch, why, "cuda" if suffix is None else f"cuda:{suffix}")

    def __init__(self, index: int | None = None):
        ok, reason = cu.initialise()
        if not ok:
            raise DeviceError(f"cuda is not available: {reason}")
        d = cu.driver()
        self.ordinal = index or 0
        count = cu.check(d.cuDeviceGetCount(), "cuDeviceGetCount")
        if self.ordinal >= count:
            raise DeviceError(f"cuda:{index} does not exist; there are {count} CUDA GPU(s)")
        self.name = "cuda" if index is None else f"cuda:{index}"
        self.cu_device = cu.check(d.cuDeviceGet(self.ordinal), "cuDeviceGet")
        self.description = _describe(self.ordinal)
        attr = d.CUdevice_attribute
        major = self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.context = cu.check(d.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
        self._make_current()
        self.stream = cu.check(d.cuStreamCreate(d.CUstream_flags.CU_STREAM_NON_BLOCKING.value), "cuStreamCreate")
        self.stream_handle = int(self.stream)
        make = EmulatedCudaCompiler if emulator.emulates("cuda") else CudaCompiler
        arch = f"sm_{major}{minor}" if make is EmulatedCudaCompiler else compile_arch(major * 10 + minor)
        self.compiler = make(
            arch,
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            f"{self.name} ({self.description})",
        )
        self.layout, self.options = self.compiler.layout, self.compiler.options
        self.pool = cu.Pool(self.name)
        self._functions: dict[tuple, object] = {}  # (PTX, entry point) -> function
        self._modules: list = []
        self.sizes = SymbolicSizes(mapping.slot_argument, "simt-sizes")  # which sizes are arguments of the code
        self.apply_memory_limit()

    def _attribute(self, attr) -> int:
        return cu.check(cu.driver().cuDeviceGetAttribute(attr, self.cu_device), f"cuDeviceGetAttribute({attr.name})")

    def _make_current(self) -> None:
        """The driver's current context is per thread: set it in each thread that uses this GPU."""
        if _CURRENT.context is not self.context:
            cu.check(cu.driver().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
            _CURRENT.context = self.context

    @property
    def info(self) -> DeviceInfo:
        """The driver's attributes and cuMemGetInfo (free memory, read now). Emulated: the CPU emulator's
        own limits, its memory the host's (the emulator's allotment)."""
        d, attr = cu.driver(), cu.driver().CUdevice_attribute
        self._make_current()
        free, total = cu.check(d.cuMemGetInfo(), "cuMemGetInfo")
        emulated = emulator.emulates("cuda")
        version = None
        if not emulated:
            v = int(cu.check(d.cuDriverGetVersion(), "cuDriverGetVersion"))
            version = f"{v // 1000}.{v % 1000 // 10}"
        cc = (
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        )
        return DeviceInfo(
            self.name,
            "cuda",
            "emulated" if emulated else "gpu",
            "NVIDIA" if not emulated else "tracejit (CPU emulator)",
            version,
            int(total),
            int(free),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            cc,
            bool(self._attribute(attr.CU_DEVICE_ATTRIBUTE_INTEGRATED)),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            self._attribute(attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE),
            ALL_DTYPES,
        )

    def synchronize(self) -> None:
        self._make_current()
        cu.check(cu.driver().cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # -- the roles together: a program's launch plan (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)


def _describe(ordinal: int) -> str:
    d = cu.driver()
    dev = cu.check(d.cuDeviceGet(ordinal), "cuDeviceGet")
    name = cu.check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = (name.decode() if isinstance(name, bytes) else str(name)).split("\0")[0].strip()
    attr = d.CUdevice_attribute
    major = cu.check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attribute")
    minor = cu.check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attribute")
    memory = cu.check(d.cuDeviceTotalMem(dev), "cuDeviceTotalMem")
    return f"{name} (sm_{major}{minor}, {int(memory) / 2**30:.0f} GiB)"
