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
from tracejit.runtime.emulator import cuda_driver as emulated
from tracejit.ir.kernel_ir import faults

OK = real.CUresult.CUDA_SUCCESS
_CTYPES = {np.dtype(k): v for k, v in {
    "bool": ctypes.c_uint8, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64,
    "float16": ctypes.c_uint16, "float32": ctypes.c_float, "float64": ctypes.c_double}.items()}


class FakeDriver(emulated.Driver):
    """The emulator's driver (host memory, streams that run at once, graphs) with cuda-python's own enums,
    PTX modules and launches that run the kernel IR."""

    CUresult, CUdevice_attribute, CUstream_flags = real.CUresult, real.CUdevice_attribute, real.CUstream_flags
    CUevent_flags, CUpointer_attribute = real.CUevent_flags, real.CUpointer_attribute
    CUfunction_attribute, CUstreamCaptureMode = real.CUfunction_attribute, real.CUstreamCaptureMode

    def __init__(self, memory_limit: int = 1 << 30):
        super().__init__(memory_limit)
        self.kernels: dict[str, tuple] = {}       # PTX -> (kernel IR, names of params by value)

    def cuDeviceGetName(self, length, dev):
        return OK, b"Fake GPU (host memory)\0"

    def cuDeviceGetAttribute(self, attr, dev):
        a = real.CUdevice_attribute
        return OK, {a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 8, a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
                    a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 49152,
                    a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024}[attr]

    def cuGetErrorString(self, err):
        return OK, b"fake driver error"

    def cuModuleLoadData(self, image):
        assert image.endswith(b"\0") and b".version" in image
        return OK, image

    def cuModuleGetFunction(self, module, name):
        assert b".entry " + name in module
        return OK, (name.decode(), module[:-1].decode())   # kernel names repeat; a module's PTX does not

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
    def cuGraphLaunch(self, graph_exec, stream):
        self.graph_launches += 1
        for call in graph_exec:
            self._run(*call)
        return (OK,)
