"""A stand-in for PyObjC's Metal bindings that runs on the host, so the metal runtime's host side
(device set-up, pooled shared buffers, uploads, scalars by setBytes, one command buffer per call,
waiting before host reads, capture and replay) is exercised without a Mac. Buffers are host memory; a
dispatch runs the kernel's IR with tracejit's kernel-IR interpreter when its command buffer is
committed (the MSL itself is not executed: msl_check compiles it against the Metal shim). It checks
the bookkeeping, not the generated code. Method names and return conventions follow PyObjC: an
NSError** argument is passed as None and comes back as the second item of a tuple."""
from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass

import numpy as np

from tracejit.ir import interpret

STORAGE_SHARED = 0
STATUS_COMPLETED, STATUS_ERROR = 4, 5


@dataclass
class MTLSize:
    width: int
    height: int
    depth: int


class _Error:
    def __init__(self, text):
        self.text = text

    def localizedDescription(self):
        return self.text


class _Contents:
    def __init__(self, memory: bytearray):
        self.memory = memory

    def as_buffer(self, n):
        return memoryview(self.memory)[:n]


class FakeBuffer:
    def __init__(self, n):
        self.memory = bytearray(n)

    def contents(self):
        return _Contents(self.memory)

    def length(self):
        return len(self.memory)


class FakePipeline:
    def __init__(self, device, source, name):
        self.device, self.source, self.name = device, source, name

    def maxTotalThreadsPerThreadgroup(self):
        return self.device.pipeline_threads


class FakeLibrary:
    def __init__(self, device, source):
        self.device, self.source = device, source

    def newFunctionWithName_(self, name):
        return (self.source, name) if f"kernel void {name}(" in self.source else None


class FakeEncoder:
    def __init__(self, cb):
        self.cb, self.pipeline, self.bound = cb, None, {}

    def setComputePipelineState_(self, pipeline):
        self.pipeline, self.bound = pipeline, {}

    def setBuffer_offset_atIndex_(self, buffer, offset, index):
        assert isinstance(buffer, FakeBuffer) and offset == 0
        self.bound[index] = buffer

    def setBytes_length_atIndex_(self, data, length, index):
        assert isinstance(data, bytes) and len(data) == length
        self.bound[index] = bytes(data)

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, local):
        self.cb.dispatches.append((self.pipeline, dict(self.bound), groups.width * local.width, local.width))

    def endEncoding(self):
        self.cb.ended = True


class FakeCommandBuffer:
    def __init__(self, device):
        self.device, self.dispatches, self.ended, self._status = device, [], False, 0

    def computeCommandEncoder(self):
        return FakeEncoder(self)

    def commit(self):
        assert self.ended, "commit before endEncoding"
        self.device.pending.append(self)

    def waitUntilCompleted(self):
        while self.device.pending:   # a queue runs its command buffers in order
            cb = self.device.pending.pop(0)
            cb._run()
            if cb is self:
                break

    def _run(self):
        for pipeline, bound, threads, local in self.dispatches:
            self.device.run(pipeline, bound, threads, local)
        self._status = STATUS_COMPLETED

    def status(self):
        return self._status

    def error(self):
        return None


class FakeQueue:
    def __init__(self, device):
        self.device = device

    def commandBuffer(self):
        self.device.command_buffers += 1
        return FakeCommandBuffer(self.device)


class FakeDevice:
    def __init__(self, threads=1024, pipeline_threads=1024):
        self.kernels: dict[str, tuple] = {}      # MSL -> (kernel IR, by-value params, error flag)
        self.pending: list[FakeCommandBuffer] = []
        self.buffers = self.dispatches = self.command_buffers = 0
        self.threads, self.pipeline_threads = threads, pipeline_threads

    def name(self):
        return "Fake Apple GPU (host memory)"

    def hasUnifiedMemory(self):
        return True

    def maxThreadsPerThreadgroup(self):
        return MTLSize(self.threads, self.threads, 64)

    def maxThreadgroupMemoryLength(self):
        return 32768

    def newCommandQueue(self):
        return FakeQueue(self)

    def newBufferWithLength_options_(self, n, options):
        assert options == STORAGE_SHARED and n > 0
        self.buffers += 1
        return FakeBuffer(n)

    def newLibraryWithSource_options_error_(self, source, options, error):
        assert error is None and options.fast_math is False
        if "kernel void" not in source:
            return None, _Error("program_source:1:1: error: no kernel")
        return FakeLibrary(self, source), None

    def newComputePipelineStateWithFunction_error_(self, function, error):
        source, name = function
        return FakePipeline(self, source, name), None

    def register(self, kernel, source, by_value, error_flag) -> None:
        self.kernels[source] = (kernel, by_value, error_flag)

    def run(self, pipeline, bound, threads, local):
        ir, by_value, error_flag = self.kernels[pipeline.source]
        assert local <= pipeline.maxTotalThreadsPerThreadgroup()
        self.dispatches += 1
        arrays = []
        for i, p in enumerate(ir.params):
            storage = np.dtype("uint8") if p.dtype == np.bool_ else p.dtype
            if i in by_value:
                held = {"f": np.float32, "b": np.uint8}.get(p.dtype.kind, p.dtype) if p.dtype.itemsize == 8 or \
                    p.dtype == np.bool_ else p.dtype
                arrays.append(np.frombuffer(bound[i], dtype=held).astype(p.dtype))
                continue
            data = np.frombuffer(bound[i].memory, dtype=storage, count=max(p.size, 1))
            arrays.append(data.view(np.bool_) if p.dtype == np.bool_ else data)
        error = np.frombuffer(bound[len(ir.params)].memory, np.int32, count=4) if error_flag else None
        interpret.run(ir, arrays, error)   # a fault goes to the error record, as the kernel writes it


class _CompileOptions:
    fast_math = True

    @classmethod
    def new(cls):
        return cls()

    def setFastMathEnabled_(self, value):
        self.fast_math = bool(value)


def modules(device: FakeDevice) -> dict[str, types.ModuleType]:
    """Modules to put in sys.modules as `Metal` and `objc`."""
    metal = types.ModuleType("Metal")
    metal.MTLCreateSystemDefaultDevice = lambda: device
    metal.MTLResourceStorageModeShared = STORAGE_SHARED
    metal.MTLCommandBufferStatusError = STATUS_ERROR
    metal.MTLSize = MTLSize
    metal.MTLCompileOptions = _CompileOptions
    objc = types.ModuleType("objc")
    objc.autorelease_pool = contextlib.nullcontext
    return {"Metal": metal, "objc": objc}
