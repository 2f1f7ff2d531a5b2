"""The CUDA driver API (the part of cuda.bindings.driver tracejit calls) on the CPU emulator: device memory is
host memory, a module is a shared object compiled from the CUDA C (build.py), a launch runs it through the
emulator's scheduler, a stream runs everything at once (in order), a CUDA graph replays the launches it
captured with the argument values of capture time. tracejit's cuda runtime runs on it unchanged: this
replaces only what libcuda would do. It needs no cuda-python: the enums it takes and returns are its own.
"""

from __future__ import annotations

import ctypes
import enum

from tracejit.runtime.emulator import DESCRIPTION, build


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUstream_flags(enum.IntEnum):
    CU_STREAM_DEFAULT = 0
    CU_STREAM_NON_BLOCKING = 1


class CUevent_flags(enum.IntEnum):
    CU_EVENT_DEFAULT = 0
    CU_EVENT_DISABLE_TIMING = 2


class CUpointer_attribute(enum.IntEnum):
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0


class CUstreamCaptureMode(enum.IntEnum):
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1


OK = CUresult.CUDA_SUCCESS
NAME = f"tracejit SIMT emulator ({DESCRIPTION})"
ATTRIBUTES = {
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 8,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 48 * 1024,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 1,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_WARP_SIZE: 32,
    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED: 1,
}  # its memory is the host's


class Function:
    """A kernel of a loaded module, with the sizes of its parameters (for graph capture)."""

    def __init__(self, module: build.Module):
        self.module = module
        count = getattr(module.library, f"tj_params_{module.name}")
        count.restype = ctypes.c_uint
        sizes = (ctypes.c_uint * 256)()
        self.sizes = list(sizes[: count(sizes)])

    def copy_arguments(self, params: int):
        """The argument values behind a void* array, copied (what a captured launch keeps)."""
        pointers = (ctypes.c_void_p * max(1, len(self.sizes))).from_address(params)
        held = [ctypes.create_string_buffer(ctypes.string_at(p, n), n) for p, n in zip(pointers, self.sizes)]
        array = (ctypes.c_void_p * max(1, len(held)))(*[ctypes.addressof(h) for h in held])
        return held, array


class Driver:
    """One emulated GPU with host memory; `memory_limit` bytes of it."""

    CUresult, CUdevice_attribute, CUstream_flags = CUresult, CUdevice_attribute, CUstream_flags
    CUevent_flags, CUpointer_attribute = CUevent_flags, CUpointer_attribute
    CUfunction_attribute, CUstreamCaptureMode = CUfunction_attribute, CUstreamCaptureMode

    def __init__(self, memory_limit: int = 1 << 32):
        self.memory: dict[int, ctypes.Array] = {}
        self.in_use = 0
        self.launches = self.graph_launches = self.allocations = 0
        self.capturing: list | None = None
        self.memory_limit = memory_limit
        self.last_error = ""

    # -- device and context --
    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return OK, 1

    def cuDeviceGet(self, ordinal):
        return OK, ordinal

    def cuDeviceGetName(self, length, dev):
        return OK, NAME.encode() + b"\0"

    def cuDeviceGetAttribute(self, attr, dev):
        return OK, ATTRIBUTES[attr]

    def cuDeviceTotalMem(self, dev):
        return OK, self.memory_limit

    def cuMemGetInfo(self):
        return OK, self.memory_limit - self.in_use, self.memory_limit

    def cuDevicePrimaryCtxRetain(self, dev):
        return OK, "context"

    def cuCtxSetCurrent(self, ctx):
        return (OK,)

    def cuGetErrorString(self, err):
        return OK, (self.last_error or CUresult(err).name).encode()

    # -- memory --
    def cuMemAlloc(self, size):
        if self.in_use + size > self.memory_limit:
            return CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0
        block = (ctypes.c_uint8 * (size + 256))()
        ptr = -(-ctypes.addressof(block) // 256) * 256  # 256-byte aligned, as cuMemAlloc's are
        self.memory[ptr] = block
        self.in_use += len(block)
        self.allocations += 1
        return OK, ptr

    def cuMemFree(self, ptr):
        self.in_use -= len(self.memory.pop(int(ptr)))
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        ctypes.memmove(int(dst), int(src), n)
        return (OK,)

    cuMemcpyDtoHAsync = cuMemcpyDtoDAsync = cuMemcpyHtoDAsync

    def cuMemsetD32Async(self, ptr, value, n, stream):
        (ctypes.c_uint32 * n).from_address(int(ptr))[:] = [value] * n
        return (OK,)

    def cuPointerGetAttribute(self, attr, ptr):
        return OK, 0

    # -- streams and events: a stream runs its work when it is queued --
    def cuStreamCreate(self, flags):
        return OK, 4242

    def cuStreamSynchronize(self, stream):
        return (OK,)

    def cuEventCreate(self, flags):
        return OK, object()

    def cuEventRecord(self, event, stream):
        return (OK,)

    def cuStreamWaitEvent(self, stream, event, flags):
        return (OK,)

    def cuEventDestroy(self, event):
        return (OK,)

    # -- modules: the image is a shared object --
    def cuModuleLoadData(self, image):
        if not isinstance(image, bytes) or not image.startswith(b"\x7fELF"):
            self.last_error = "the emulator loads shared objects built from CUDA C, not PTX"
            return CUresult.CUDA_ERROR_INVALID_IMAGE, None
        return OK, image

    def cuModuleGetFunction(self, module, name):
        return OK, Function(build.load(module, name.decode()))

    def cuFuncGetAttribute(self, attr, fn):
        return OK, 1024

    def cuFuncGetParamInfo(self, fn, index):
        if not 0 <= index < len(fn.sizes):
            return CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0
        return OK, sum(fn.sizes[:index]), fn.sizes[index]  # (offsets as if packed: nothing here reads them)

    # -- launches --
    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launches += 1
        if self.capturing is not None:  # a graph keeps the argument values of capture time
            held, array = fn.copy_arguments(params)
            self.capturing.append((fn, (gx, gy, gz), (bx, by, bz), held, array))
            return (OK,)
        return self._run(fn, (gx, gy, gz), (bx, by, bz), params)

    def _run(self, fn: Function, grid, block, params: int):
        error = fn.module.launch(params, grid, block)
        if error is None:
            return (OK,)
        self.last_error = f"kernel {fn.module.name} failed on the emulator: {error}"
        return (CUresult.CUDA_ERROR_LAUNCH_FAILED,)

    # -- graphs --
    def cuStreamBeginCapture(self, stream, mode):
        self.capturing = []
        return (OK,)

    def cuStreamEndCapture(self, stream):
        graph, self.capturing = self.capturing, None
        return OK, graph

    def cuGraphInstantiate(self, graph, flags):
        return OK, list(graph)

    def cuGraphLaunch(self, graph_exec, stream):
        self.graph_launches += 1
        for fn, grid, block, _, array in graph_exec:
            result = self._run(fn, grid, block, ctypes.addressof(array))
            if result[0] != OK:
                return result
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec):
        return (OK,)

    cuGraphDestroy = cuGraphExecDestroy


_DRIVER: list[Driver] = []


def driver() -> Driver:
    """The process's emulated driver."""
    if not _DRIVER:
        _DRIVER.append(Driver())
    return _DRIVER[0]


class EmulatedCompiler:
    """Mixed into CudaCompiler (see cuda_compiler): the artifact of a kernel is its shared object for the
    emulator, built from the CUDA C, instead of PTX; no NVRTC is needed."""

    _ptx: dict[tuple[str, str], bytes]  # CudaCompiler's: here (source, entry) -> shared object

    def ptx(self, name: str, source: str, entry: str | None = None) -> tuple[bytes, bool]:
        """The shared object of `source` with the emulator's entry for function `entry` (else `name`)."""
        key = (source, entry or name)  # the entry is compiled into the object: one per function launched
        image = self._ptx.get(key)
        if image is not None:
            return image, True
        image, cached = build.build("cuda", entry or name, source)
        self._ptx[key] = image
        return image, cached
