"""PyObjC's Metal (the part tracejit's metal runtime calls) on the CPU emulator: buffers are host memory in
shared storage mode, a library is the MSL compiled as C++ against include/metal_stdlib into a shared object
(build.py), a compute pipeline is its kernel, and a command buffer runs its dispatches through the emulator's
scheduler when it is committed and waited for (a queue runs its command buffers in order). tracejit's metal
runtime runs on it unchanged. Method names and return conventions follow PyObjC: an NSError** argument is
passed as None and comes back as the second item of a tuple.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import types
from dataclasses import dataclass

from tracejit.errors import CompileError
from tracejit.runtime.emulator import DESCRIPTION, build

STORAGE_SHARED = 0
STATUS_COMPLETED, STATUS_ERROR = 4, 5
NAME = f"tracejit SIMT emulator ({DESCRIPTION})"


@dataclass
class MTLSize:
    width: int
    height: int
    depth: int


class Error:
    def __init__(self, text: str):
        self.text = text

    def localizedDescription(self):
        return self.text


class _Contents:
    def __init__(self, memory: ctypes.Array):
        self.memory = memory

    def as_buffer(self, n):
        return memoryview(self.memory).cast("B")[:n]


class Buffer:
    def __init__(self, n: int, device):
        self.memory = (ctypes.c_uint8 * n)()
        self.address = ctypes.c_void_p(ctypes.addressof(self.memory))  # what a kernel's pointer holds
        self.device = device

    def __del__(self):
        self.device.in_use -= len(self.memory)

    def contents(self):
        return _Contents(self.memory)

    def length(self):
        return len(self.memory)


class Pipeline:
    def __init__(self, device, module: build.Module):
        self.device, self.module = device, module

    def maxTotalThreadsPerThreadgroup(self):
        return self.device.pipeline_threads


class Library:
    def __init__(self, device, source: str):
        self.device, self.source = device, source

    def newFunctionWithName_(self, name):
        return (self.source, name) if f"kernel void {name}(" in self.source else None


class Encoder:
    def __init__(self, cb):
        self.cb, self.pipeline, self.bound = cb, None, {}

    def setComputePipelineState_(self, pipeline):
        self.pipeline, self.bound = pipeline, {}

    def setBuffer_offset_atIndex_(self, buffer, offset, index):
        assert isinstance(buffer, Buffer) and offset == 0
        self.bound[index] = buffer

    def setBytes_length_atIndex_(self, data, length, index):
        assert isinstance(data, bytes) and len(data) == length
        self.bound[index] = ctypes.create_string_buffer(data, max(length, 1))  # copied now, as Metal does

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, local):
        self.cb.dispatches.append(
            (
                self.pipeline,
                dict(self.bound),
                (groups.width, groups.height, groups.depth),
                (local.width, local.height, local.depth),
            )
        )

    def endEncoding(self):
        self.cb.ended = True


class CommandBuffer:
    def __init__(self, device):
        self.device, self.dispatches, self.ended, self._status, self._error = device, [], False, 0, None

    def computeCommandEncoder(self):
        return Encoder(self)

    def commit(self):
        assert self.ended, "commit before endEncoding"
        self.device.pending.append(self)

    def waitUntilCompleted(self):
        # a queue runs its command buffers in order, one thread at a time: one waiting for a buffer that
        # another thread took from the queue and is running waits until that run has finished
        with self.device.running:
            while self._status == 0 and self.device.pending:
                self.device.pending.pop(0)._run()

    def _run(self):
        self._status = STATUS_COMPLETED
        for pipeline, bound, groups, local in self.dispatches:
            error = self.device.run(pipeline, bound, groups, local)
            if error is not None:
                self._status, self._error = STATUS_ERROR, Error(error)
                return

    def status(self):
        return self._status

    def error(self):
        return self._error


class Queue:
    def __init__(self, device):
        self.device = device

    def commandBuffer(self):
        self.device.command_buffers += 1
        return CommandBuffer(self.device)


class Device:
    """The emulated Metal device: SIMD groups of 32, threadgroups of up to 1024 threads, 32 KiB of
    threadgroup memory (what every Apple GPU allows)."""

    def __init__(self, threads: int = 1024, pipeline_threads: int = 1024, memory_limit: int = 1 << 32):
        self.memory_limit, self.in_use = memory_limit, 0
        self.pending: list[CommandBuffer] = []
        self.running = threading.Lock()
        self.buffers = self.dispatches = self.command_buffers = 0
        self.threads, self.pipeline_threads = threads, pipeline_threads

    def name(self):
        return NAME

    def hasUnifiedMemory(self):
        return True

    def recommendedMaxWorkingSetSize(self):
        return self.memory_limit

    def currentAllocatedSize(self):
        return self.in_use

    def maxThreadsPerThreadgroup(self):
        return MTLSize(self.threads, self.threads, 64)

    def maxThreadgroupMemoryLength(self):
        return 32768

    def newCommandQueue(self):
        return Queue(self)

    def newBufferWithLength_options_(self, n, options):
        assert options == STORAGE_SHARED and n > 0
        if self.in_use + n > self.memory_limit:
            return None  # as Metal does when it cannot allocate
        self.buffers += 1
        self.in_use += n
        return Buffer(n, self)

    def newLibraryWithSource_options_error_(self, source, options, error):
        assert error is None
        return Library(self, source), None

    def newComputePipelineStateWithFunction_error_(self, function, error):
        source, name = function
        try:
            image, _ = build.build("metal", name, source)
        except CompileError as e:
            return None, Error(str(e))
        return Pipeline(self, build.load(image, name)), None

    def run(self, pipeline: Pipeline, bound: dict, groups, local) -> str | None:
        """One dispatch: [[buffer(i)]] -> a void* array of pointers to each argument's value."""
        self.dispatches += 1
        count = max(bound, default=-1) + 1
        args = (ctypes.c_void_p * max(1, count))()
        for i, b in bound.items():
            args[i] = ctypes.addressof(b.address) if isinstance(b, Buffer) else ctypes.addressof(b)
        return pipeline.module.launch(ctypes.addressof(args), groups, local)


class _CompileOptions:
    fast_math = True

    @classmethod
    def new(cls):
        return cls()

    def setFastMathEnabled_(self, value):
        self.fast_math = bool(value)


def modules(device: Device) -> dict[str, types.ModuleType]:
    """Modules in the shape of PyObjC's `Metal` and `objc`, for `device`."""
    metal = types.ModuleType("Metal")
    metal.__dict__.update(
        MTLCreateSystemDefaultDevice=lambda: device,
        MTLResourceStorageModeShared=STORAGE_SHARED,
        MTLCommandBufferStatusError=STATUS_ERROR,
        MTLSize=MTLSize,
        MTLCompileOptions=_CompileOptions,
    )
    objc = types.ModuleType("objc")
    objc.__dict__.update(autorelease_pool=contextlib.nullcontext)
    return {"Metal": metal, "objc": objc}


_BINDINGS: list[dict] = []


def bindings() -> dict[str, types.ModuleType]:
    """The process's emulated `Metal` and `objc`."""
    if not _BINDINGS:
        _BINDINGS.append(modules(Device()))
    return _BINDINGS[0]
