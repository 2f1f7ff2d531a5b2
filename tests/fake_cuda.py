"""A stand-in for cuda.bindings.driver that runs on the host, so the cuda runtime's host side (context,
allocator, copies, argument packing, plans, capture into CUDA graphs, interop) is exercised where there
is no GPU. Device memory is host memory; a launch reads the packed argument array exactly as the
driver would and runs the kernel's IR with tracejit's kernel-IR interpreter (the PTX, compiled by the
real NVRTC, is not executed). It is a test of the runtime's bookkeeping, not of the generated code,
which ptxas checks."""
from __future__ import annotations

import ctypes

import numpy as np
from cuda.bindings import driver as real

from tracejit.ir import interpret
from tracejit.ir.kernel_ir import faults

OK = real.CUresult.CUDA_SUCCESS
_CTYPES = {np.dtype(k): v for k, v in {
    "bool": ctypes.c_uint8, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64,
    "float16": ctypes.c_uint16, "float32": ctypes.c_float, "float64": ctypes.c_double}.items()}


class FakeDriver:
    CUresult, CUdevice_attribute, CUstream_flags = real.CUresult, real.CUdevice_attribute, real.CUstream_flags
    CUevent_flags, CUpointer_attribute = real.CUevent_flags, real.CUpointer_attribute
    CUfunction_attribute, CUstreamCaptureMode = real.CUfunction_attribute, real.CUstreamCaptureMode

    def __init__(self, memory_limit: int = 1 << 30):
        self.memory: dict[int, ctypes.Array] = {}
        self.kernels: dict[str, tuple] = {}       # PTX -> (kernel IR, names of params by value)
        self.launches = self.graph_launches = self.allocations = 0
        self.capturing: list | None = None
        self.memory_limit = memory_limit

    # -- device and context --
    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return OK, 1

    def cuDeviceGet(self, ordinal):
        return OK, ordinal

    def cuDeviceGetName(self, length, dev):
        return OK, b"Fake GPU (host memory)\0"

    def cuDeviceGetAttribute(self, attr, dev):
        a = real.CUdevice_attribute
        return OK, {a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 8, a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
                    a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 49152,
                    a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024}[attr]

    def cuDeviceTotalMem(self, dev):
        return OK, self.memory_limit

    def cuDevicePrimaryCtxRetain(self, dev):
        return OK, "context"

    def cuCtxSetCurrent(self, ctx):
        return (OK,)

    def cuGetErrorString(self, err):
        return OK, b"fake driver error"

    # -- memory --
    def cuMemAlloc(self, size):
        if sum(len(b) for b in self.memory.values()) + size > self.memory_limit:
            return real.CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0
        block = (ctypes.c_uint8 * (size + 256))()
        ptr = -(-ctypes.addressof(block) // 256) * 256        # 256-byte aligned, as cuMemAlloc's are
        self.memory[ptr] = block
        self.allocations += 1
        return OK, ptr

    def cuMemFree(self, ptr):
        del self.memory[int(ptr)]
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

    # -- streams, events, modules --
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

    def cuModuleLoadData(self, image):
        assert image.endswith(b"\0") and b".version" in image
        return OK, image

    def cuModuleGetFunction(self, module, name):
        assert b".entry " + name in module
        return OK, (name.decode(), module[:-1].decode())   # kernel names repeat; a module's PTX does not

    def cuFuncGetAttribute(self, attr, fn):
        return OK, 1024

    # -- launches --
    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        call = self._read_arguments(fn, params)
        if self.capturing is not None:
            self.capturing.append(call)       # a graph keeps the argument values of capture time
        else:
            self._run(*call)
        return (OK,)

    def register(self, compiled, by_value) -> None:
        """Called for each kernel the compiler builds: launches of its PTX run this IR."""
        names = {compiled.ir.params[i].name for i in by_value}
        self.kernels[compiled.ptx] = (compiled.ir, names)
        if compiled.vector:
            self.kernels[compiled.vector[2]] = (compiled.ir, names)

    def _read_arguments(self, fn, params: int):
        ir, by_value = self.kernels[fn[1]]
        pointers = (ctypes.c_void_p * (len(ir.params) + bool(faults(ir)))).from_address(params)
        values = []
        for p, address in zip(ir.params, pointers):
            if p.name in by_value:
                values.append(("value", _CTYPES[p.dtype].from_address(address).value))
            else:
                values.append(("buffer", ctypes.c_uint64.from_address(address).value))
        if faults(ir):   # the error record follows the parameters
            values.append(("error", ctypes.c_uint64.from_address(pointers[-1]).value))
        self.launches += 1
        return ir, values

    def _run(self, ir, values) -> None:
        arrays, error = [], None
        if values and values[-1][0] == "error":
            error = np.frombuffer((ctypes.c_int32 * 4).from_address(values[-1][1]), np.int32)
        for p, (kind, v) in zip(ir.params, values):
            storage = np.dtype("uint8") if p.dtype == np.bool_ else p.dtype
            if kind == "value":
                arrays.append(np.array([v], dtype=_CTYPES[p.dtype]._type_).view(storage).astype(p.dtype))
                continue
            assert v != 0, f"kernel {ir.name} got a null pointer for {p.name}"
            raw = (ctypes.c_uint8 * (max(p.size, 1) * storage.itemsize)).from_address(v)
            arrays.append(np.frombuffer(raw, dtype=storage).view(p.dtype) if p.dtype == np.bool_ else
                          np.frombuffer(raw, dtype=storage))
        interpret.run(ir, arrays, error)

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
        for call in graph_exec:
            self._run(*call)
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec):
        return (OK,)

    cuGraphDestroy = cuGraphExecDestroy
