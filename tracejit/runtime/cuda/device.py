"""The cuda target: kernels rendered to CUDA C, compiled to PTX by NVRTC (runtime/cuda/compiler.py), loaded and
launched through the driver API on one stream per GPU. Results stay on the GPU as tj.Array, which
exposes __cuda_array_interface__ and __dlpack__; CuPy / PyTorch / Numba device arrays are read in place.

Compiling needs no GPU: where there is none, `cuda` (and `cuda:sm_90`, ...) is a compile-only target
for lower() and warm(); its PTX lands in the disk cache under the architecture, for a GPU machine later.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from tracejit.codegen.simt import cstyle
from tracejit.codegen.simt import nvrtc
from tracejit.codegen.simt.mapping import RenderOptions
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.runtime.cuda import driver as cu
from tracejit.runtime import dlpack, emulator, gpu_nodes
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.cache.key import SHARED_NAME
from tracejit.runtime.cuda.compiler import CUDAKernel, CudaCompiler, CudaTarget, EmulatedCudaCompiler, compile_arch
from tracejit.runtime.cuda.launch import BoundLaunch, CudaGraph, argument_dtypes, timed_by_events
from tracejit.runtime.debug import stage
from tracejit.runtime.device_info import ALL_DTYPES, DeviceInfo
from tracejit.runtime.device_interface import Device
from tracejit.runtime.faults import RECORD_WORDS
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.symbolic_sizes import SymbolicSizes
from tracejit.runtime.views import flat_view

LOWER_ONLY = ("kernels can still be lowered and warmed for CUDA here (PTX for TRACEJIT_CUDA_ARCH, default "
              f"{nvrtc.DEFAULT_ARCH}, or device='cuda:sm_90')")


class _Current(threading.local):
    context = None


_CURRENT = _Current()


class CUDADevice(Device):
    """One GPU through the driver API: `cuda` (the first visible GPU) or `cuda:N`."""
    imports_foreign = True   # another library's arrays on this GPU, without a copy (import_foreign)
    inner_sizes_as_arguments = True   # row lengths and loop extents too, not only the global size (symbolic_sizes)

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this Linux machine has no NVIDIA device file (gpu_nodes): automatic device choice
        then loads neither the driver nor NVRTC to find out."""
        return gpu_nodes.may_have_gpu(gpu_nodes.NVIDIA)

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
        assert why is not None   # initialise says why where it fails
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
        self.compiler = make(arch,
                                     self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
                                     self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                                     f"{self.name} ({self.description})")
        self.layout, self.options = self.compiler.layout, self.compiler.options
        self.pool = cu.Pool(self.name)
        self._functions: dict[tuple, object] = {}   # (PTX, entry point) -> function
        self._modules: list = []
        self.sizes = SymbolicSizes(cstyle.slot_argument, "simt-sizes")   # which sizes are arguments of the code
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
        cc = (self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
              self._attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        return DeviceInfo(self.name, "cuda", "emulated" if emulated else "gpu", "NVIDIA" if not emulated else
                          "tracejit (CPU emulator)", version, int(total), int(free),
                          self._attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), cc,
                          bool(self._attribute(attr.CU_DEVICE_ATTRIBUTE_INTEGRATED)),
                          self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                          self._attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
                          self._attribute(attr.CU_DEVICE_ATTRIBUTE_WARP_SIZE), ALL_DTYPES)

    # -- memory --
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> cu.DeviceBuffer:
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        self._make_current()
        # an empty array still gets memory: a kernel may read an element it then ignores (the load of a
        # loop that runs zero times can be hoisted out of it), and a null pointer would fault
        block = self.pool.allocate(max(nbytes, 1))
        return cu.DeviceBuffer(block.ptr, shape, dtype, block)

    def from_numpy(self, a: np.ndarray) -> cu.DeviceBuffer:
        """Upload a host array (queued; the driver has staged pageable memory when the call returns)."""
        host = np.ascontiguousarray(a)
        out = self.allocate(host.shape, host.dtype)
        if out.nbytes:
            cu.check(cu.driver().cuMemcpyHtoDAsync(out.ptr, host.ctypes.data, out.nbytes, self.stream),
                     "cuMemcpyHtoDAsync")
        return out

    def upload_span(self, a, desc) -> cu.DeviceBuffer:
        """The memory span the kernel reads of a host argument (strided arrays in place)."""
        return self.from_numpy(np.ascontiguousarray(flat_view(a, desc)))

    def to_numpy(self, data: cu.DeviceBuffer) -> np.ndarray:
        self._make_current()
        lo, nbytes = data.span()
        raw = np.empty(nbytes, np.uint8)
        if nbytes:
            d = cu.driver()
            cu.check(d.cuMemcpyDtoHAsync(raw.ctypes.data, lo, nbytes, self.stream), "cuMemcpyDtoHAsync")
            cu.check(d.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        if data.contiguous:
            return raw.view(data.dtype).reshape(data.shape)
        start = data.ptr - lo
        view = np.lib.stride_tricks.as_strided(raw[start:].view(data.dtype), data.shape, data.strides)
        return np.array(view)

    def import_foreign(self, obj, what: str = "argument") -> Array:
        """A CUDA array of another library (__cuda_array_interface__) as a tj.Array, without a copy. Work
        queued on the stream the producer names is waited for first."""
        buf = cu.from_interface(obj, what)
        self._make_current()
        d = cu.driver()
        err, ptr_device = d.cuPointerGetAttribute(d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                  buf.ptr) if buf.ptr else (d.CUresult.CUDA_SUCCESS, self.ordinal)
        if err == d.CUresult.CUDA_SUCCESS and int(ptr_device) != self.ordinal:
            raise DeviceError(f"{what} lives on GPU {int(ptr_device)}, and this call runs on {self.name}; "
                              f"pass device='cuda:{int(ptr_device)}' or move the array")
        stream = obj.__cuda_array_interface__.get("stream")
        if stream:   # CAI v3: the producer's stream may still be writing it
            self._wait_for(int(stream))
        if not buf.size:   # an empty array may have no memory at all: kernels get a valid address anyway
            return Array(self.allocate(buf.shape, buf.dtype), self)
        return Array(buf, self)

    def _wait_for(self, stream: int) -> None:
        d = cu.driver()
        event = cu.check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value), "cuEventCreate")
        cu.check(d.cuEventRecord(event, stream), "cuEventRecord")
        cu.check(d.cuStreamWaitEvent(self.stream, event, 0), "cuStreamWaitEvent")
        d.cuEventDestroy(event)

    def cuda_array_interface(self, data: cu.DeviceBuffer) -> dict:
        return {"shape": data.shape, "typestr": data.dtype.str, "data": (data.ptr, data.readonly),
                "strides": None if data.contiguous else data.strides, "version": 3, "stream": self.stream_handle}

    def dlpack(self, data: cu.DeviceBuffer, stream=None, **kwargs):
        """A DLPack capsule; the consumer's `stream` (None: the legacy default stream, -1: none) waits
        for this device's queued work first."""
        self._make_current()
        if stream != -1:
            consumer = 1 if stream is None else int(stream)
            event_stream = self.stream
            d = cu.driver()
            event = cu.check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DISABLE_TIMING.value), "cuEventCreate")
            cu.check(d.cuEventRecord(event, event_stream), "cuEventRecord")
            cu.check(d.cuStreamWaitEvent(consumer, event, 0), "cuStreamWaitEvent")
            d.cuEventDestroy(event)
        return dlpack.export(data.ptr, data.shape, data.strides, data.dtype, dlpack.CUDA, self.ordinal, data)

    def dlpack_device(self, data) -> tuple[int, int]:
        return (dlpack.CUDA, self.ordinal)

    def synchronize(self) -> None:
        self._make_current()
        cu.check(cu.driver().cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def memory_stats(self) -> dict[str, int]:
        """The caching allocator: blocks in use, blocks held for reuse, bytes managed."""
        return self.pool.stats()

    # -- graph capture --
    def clone(self, data: cu.DeviceBuffer) -> cu.DeviceBuffer:
        out = self.allocate(data.shape, data.dtype)
        if out.nbytes:
            if not data.contiguous:
                return self.from_numpy(self.to_numpy(data))
            cu.check(cu.driver().cuMemcpyDtoDAsync(out.ptr, data.ptr, out.nbytes, self.stream), "cuMemcpyDtoDAsync")
        return out

    def own(self, a) -> Array:
        """A graph's own copy of an input, on this GPU."""
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        dst = owned._data
        if not dst.nbytes:
            return
        d = cu.driver()
        self._make_current()
        if type(a) is Array and a.device is self and a._data.contiguous:
            cu.check(d.cuMemcpyDtoDAsync(dst.ptr, a._data.ptr, dst.nbytes, self.stream), "cuMemcpyDtoDAsync")
        else:
            host = np.ascontiguousarray(a.numpy() if type(a) is Array else a, dtype=dst.dtype)
            cu.check(d.cuMemcpyHtoDAsync(dst.ptr, host.ctypes.data, dst.nbytes, self.stream), "cuMemcpyHtoDAsync")

    def replay(self, launches) -> None:
        """Recorded launches, one by one, or a CUDA graph of them with one driver call."""
        self._make_current()
        self.launches += len(launches)
        if type(launches) is CudaGraph:
            launches.launch()
            return
        for launch in launches:
            launch.run(self.stream)

    def prepare_replay(self, launches):
        """A graph's launches, final before its first replay, become one CUDA graph."""
        return CudaGraph(self, list(launches)) if launches else launches

    def memory_of(self, value) -> int:
        """The allocation behind a tj.Array or a DeviceBuffer of this device."""
        data = value._data if type(value) is Array else value
        return id(data.owner)

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share pooled blocks (see plan_sharing)."""
        uses = [[(pos, buf.owner, buf.nbytes) for pos, buf in launch.buffers.items()] for launch in launches]
        assignment, nbytes = plan_sharing(uses, scratch, lambda n: self.pool.allocate(n))
        for launch, used in zip(launches, uses):
            for pos, owner, _ in used:
                block = assignment.get(id(owner))
                if block is not None:
                    launch.set_pointer(pos, block.ptr, block)
        return launches, nbytes

    # -- compilation and launches (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        c = self.compiler.build(kernel, by_value, options, symbolic)
        with stage("load"):
            fn = self._function(c.name, c.ptx, SHARED_NAME)   # (CudaCompiler.build)
        d = cu.driver()
        fits = cu.check(d.cuFuncGetAttribute(d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
                        "cuFuncGetAttribute")
        return c, fn, fits

    def launcher(self, c: CUDAKernel, fn, scalars: list) -> BoundLaunch:
        vfn = self._function(c.vector[0], c.vector[2], SHARED_NAME) if c.vector else None
        return BoundLaunch(c, fn, vfn, argument_dtypes(c, scalars, self.options))

    def enqueue(self, launches, bufs, error) -> None:
        self._make_current()
        for launch, keys in launches:
            launch.launch([bufs[k] for k in keys], error, self.stream)

    def timed(self, launch: BoundLaunch, values, error) -> float | None:
        """By CUDA events on a GPU; by the host around the synchronised launch on the emulator (whose
        driver keeps no event times)."""
        self._make_current()
        if not emulator.emulates("cuda"):
            return timed_by_events(self.stream, launch, values, error)
        launch.launch(values, error, self.stream)
        self.synchronize()
        return None

    def bound(self, launch: BoundLaunch, values) -> BoundLaunch:
        own = launch.copy()
        own.set(values, None)
        return own

    def error_record(self) -> cu.DeviceBuffer:
        record = self.allocate((RECORD_WORDS,), np.dtype("int32"))
        cu.check(cu.driver().cuMemsetD32Async(record.ptr, 0, RECORD_WORDS, self.stream), "cuMemsetD32Async")
        return record

    def read_record(self, record: cu.DeviceBuffer) -> np.ndarray:
        return self.to_numpy(record)

    def _function(self, name: str, ptx: str | bytes, entry: str | None = None):
        """Kernel `name` of a PTX module (or, emulated, of a shared object), its entry point `entry` (else
        `name`), loaded once per process (the driver finishes PTX for this GPU and keeps the result in its
        own compute cache)."""
        entry = entry or name
        fn = self._functions.get((ptx, entry))   # a module may hold several (a raw kernel's source)
        if fn is None:
            self._make_current()
            d = cu.driver()
            err, module = d.cuModuleLoadData(ptx if isinstance(ptx, bytes) else ptx.encode() + b"\0")
            if err == d.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
                assert isinstance(ptx, str)   # (only PTX has a version to refuse, not the emulator's objects)
                raise DeviceError(f"the CUDA driver on this machine is older than {nvrtc.version()}: it rejects PTX ISA "
                                  f"{nvrtc.ptx_isa(ptx)}. Update the driver (CUDA 13.0 needs r580 or newer), or "
                                  "install an nvidia-cuda-nvrtc that matches the driver's CUDA version")
            if err != d.CUresult.CUDA_SUCCESS:
                raise DeviceError(f"the CUDA driver could not load kernel {name} ({cu.error_text(err)})")
            self._modules.append(module)
            fn = self._functions[ptx, entry] = cu.check(d.cuModuleGetFunction(module, entry.encode()),
                                                        "cuModuleGetFunction")
        return fn


def _describe(ordinal: int) -> str:
    d = cu.driver()
    dev = cu.check(d.cuDeviceGet(ordinal), "cuDeviceGet")
    name = cu.check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = (name.decode() if isinstance(name, bytes) else str(name)).split("\0")[0].strip()
    attr = d.CUdevice_attribute
    major = cu.check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attribute")
    minor = cu.check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attribute")
    memory = cu.check(d.cuDeviceTotalMem(dev), "cuDeviceTotalMem")
    return f"{name} (sm_{major}{minor}, {int(memory) / 2 ** 30:.0f} GiB)"
