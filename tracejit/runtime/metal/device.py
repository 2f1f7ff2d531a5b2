"""The metal target: MSL (codegen/simt/metal.py) compiled and run through PyObjC's Metal bindings on macOS.

One device per process (the system default GPU), created lazily; buffers in shared storage mode from a
caching allocator; a library and compute pipeline per kernel source, built once per process; one
command buffer per call with every kernel of the call in one compute encoder, committed without
waiting. Host reads wait for the work submitted before them.

On other systems nothing imports PyObjC: tj.devices() reports metal unavailable with the reason, and
f.lower(..., device="metal") renders the MSL with MetalTarget (tracejit.codegen.simt.msl_check compiles it
against a shim of the Metal standard library).
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import cstyle
from tracejit.codegen.simt import metal as metal_codegen
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE, Launch, RenderOptions
from tracejit.errors import CompileError, DeviceError, OutOfMemoryError, UnsupportedError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import emulator
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.cache.key import SHARED_NAME, shared_source
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import Block, BlockPool, Buffer, RenderedOnly, by_value_params
from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.metal.launch import Dispatch, Launcher
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.symbolic_sizes import SymbolicSizes
from tracejit.runtime.views import flat_view

INSTALL_HINT = "pip install 'tracejit[metal]' (pyobjc-framework-Metal)"
LOWER_ONLY = "kernels can still be lowered to MSL here: f.lower(..., device='metal')"
REDUCTION_SCRATCH = 4096   # bytes of threadgroup memory left for reduction trees when keeping rows
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
    except Exception as e:   # noqa: BLE001  (whatever PyObjC raises, the reason is reported)
        return None, f"MTLCreateSystemDefaultDevice failed ({type(e).__name__}: {e})"
    if device is None:
        return None, "macOS reports no Metal device"
    return device, None


def _layout(threadgroup_memory: int) -> LayoutOptions:
    return LayoutOptions(accumulate_rows=False, gather_rows=False, fixed_locals=True, tiled=True,
                         keep_row_max=min(4096, (threadgroup_memory - REDUCTION_SCRATCH) // 8),
                         keep_inputs_min=GROUP_MIN_REDUCE,
                         sort_bytes=threadgroup_memory - REDUCTION_SCRATCH)


class DeviceBuffer(Buffer):
    """An array in a pooled Metal buffer (`block`)."""

    __slots__ = ("block",)

    def __init__(self, block: Block, shape, dtype):
        super().__init__(shape, dtype)
        self.block = block


@dataclass(frozen=True)
class MetalKernel:
    """A kernel compiled for Metal: its name, MSL source, kernel IR and launch shape (what f.lower() lists)."""
    name: str
    source: str                # MSL
    ir: KernelIR
    launch: Launch
    cached: bool = False


class MetalTarget(Device):
    """MSL for any Metal GPU (no double, threadgroups of up to 256), rendered without a device, on any
    system: lower() works anywhere; a call lowers again for the device itself."""

    runs = False
    name = "metal"
    layout = _layout(metal_codegen.THREADGROUP_MEMORY)
    options = replace(metal_codegen.DEFAULT_OPTIONS, device="metal (MSL only, no device)")

    def compile(self, program: Program) -> "RenderedOnly":
        kernels = []
        for k, keys in zip(program.kernels, program.launches):
            r = metal_codegen.render(k, self.options, by_value_params(program, keys))
            kernels.append(MetalKernel(k.name, r.source, k, r.launch))
        return RenderedOnly(kernels, "this plan holds MSL only; call the kernel with device='metal' (on macOS) "
                                     "to run it")


_OPEN: list = []   # the MetalDevice of this process, once made


class MetalDevice(Device):
    """The system default Metal GPU (`metal`)."""

    inner_sizes_as_arguments = True   # row lengths and loop extents too, not only the global size (symbolic_sizes)
    keeps_compiled_kernels = False
    no_disk_cache = ("each process builds its libraries and pipelines from MSL (macOS keeps its own cache of "
                     "compiled shaders); tracejit stores no Metal binaries")

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
        return sys.platform == "darwin" and not emulator.emulates("metal")

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
        self.options = replace(metal_codegen.DEFAULT_OPTIONS, device=f"metal ({self.description})",
                               max_local_size=min(metal_codegen.DEFAULT_OPTIONS.max_local_size, threads))
        self.layout = _layout(memory)
        self._committed = 0          # command buffers committed
        self._completed = 0          # of those, known to have finished
        self._last = None            # the last command buffer committed
        self._commits = threading.Lock()   # the three above change together: threads commit and wait at once
        self.pool = BlockPool(self._new_buffer, ALIGN, stamp=lambda: self._committed, device="metal")
        self.sizes = SymbolicSizes(cstyle.slot_argument, "simt-sizes")   # which sizes are arguments of the code
        self.apply_memory_limit()
        self._pipelines: dict[tuple, object] = {}   # (source, function) -> pipeline
        _OPEN.append(self)

    @property
    def info(self) -> DeviceInfo:
        """MTLDevice's properties. Total memory: the working set Metal recommends for this device; free:
        that less what the device has allocated now. Metal reports no driver version or SIMD width
        outside a pipeline."""
        total = int(self.mtl.recommendedMaxWorkingSetSize())
        free = max(0, total - int(self.mtl.currentAllocatedSize()))
        return DeviceInfo(self.name, "metal", "emulated" if emulator.emulates("metal") else "gpu",
                          "tracejit (CPU emulator)" if emulator.emulates("metal") else "Apple", None, total, free,
                          None, None, bool(self.mtl.hasUnifiedMemory()),
                          int(self.mtl.maxThreadsPerThreadgroup().width), int(self.mtl.maxThreadgroupMemoryLength()),
                          None, dtypes_without("float64"))

    # -- memory --
    def _new_buffer(self, nbytes: int):
        buffer = self.mtl.newBufferWithLength_options_(nbytes, self.Metal.MTLResourceStorageModeShared)
        if buffer is None:
            self.pool.drop_held()   # buffers held for reuse may be what is in the way
            buffer = self.mtl.newBufferWithLength_options_(nbytes, self.Metal.MTLResourceStorageModeShared)
        if buffer is None:
            raise OutOfMemoryError(f"metal could not allocate {nbytes} bytes; free device arrays you no longer need")
        return buffer

    @staticmethod
    def _memory(block, nbytes: int) -> np.ndarray:
        """The block's shared memory as bytes NumPy can read and write."""
        return np.frombuffer(block.buffer.contents().as_buffer(block.nbytes), np.uint8, count=nbytes)

    def allocate(self, shape, dtype) -> DeviceBuffer:
        dtype = np.dtype(dtype)
        return DeviceBuffer(self.pool.allocate(max(math.prod(shape) * dtype.itemsize, 1)), shape, dtype)

    def _write(self, block: Block, data: np.ndarray) -> None:
        """Host bytes into a block, once no committed work can still be using it."""
        if block.tag is not None and block.tag > self._completed:
            self._wait()
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if raw.nbytes:
            self._memory(block, raw.nbytes)[:] = raw

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        out = self.allocate(a.shape, a.dtype)
        self._write(out.block, np.ascontiguousarray(a))
        return out

    def upload_span(self, a, desc) -> DeviceBuffer:
        flat = flat_view(a, desc)
        out = self.allocate(flat.shape, flat.dtype)
        self._write(out.block, flat)
        return out

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        self._wait()
        nbytes = data.size * data.dtype.itemsize
        return self._memory(data.block, nbytes).copy().view(data.dtype).reshape(data.shape)

    def dlpack(self, data, *args, **kwargs):
        raise UnsupportedError(f"a tj.Array on {self.name} cannot be shared through DLPack (NumPy and torch import no "
                               "Metal memory); call .numpy() for a host copy")

    dlpack_device = dlpack

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
            raise DeviceError(f"{self.name}: a command buffer failed: "
                              f"{error.localizedDescription() if error is not None else 'no error given'}")

    def memory_stats(self) -> dict[str, int]:
        return self.pool.stats()

    # -- encoding --
    def _submit(self, launches: list[Dispatch], wait: bool = False) -> None:
        """Every launch into one compute encoder of one command buffer, committed."""
        with self.objc.autorelease_pool():
            cb = self.queue.commandBuffer()
            enc = cb.computeCommandEncoder()
            size = self.Metal.MTLSize
            for launch in launches:
                enc.setComputePipelineState_(launch.pipeline)
                for i, b in enumerate(launch.buffers):
                    if isinstance(b, bytes):
                        enc.setBytes_length_atIndex_(b, len(b), i)
                    else:
                        enc.setBuffer_offset_atIndex_((b.block if isinstance(b, DeviceBuffer) else b).buffer, 0, i)
                groups, local = launch.groups, launch.local   # ints, or (x, y, z) for a RawKernel
                groups, local = (groups, 1, 1) if isinstance(groups, int) else groups, \
                    (local, 1, 1) if isinstance(local, int) else local
                enc.dispatchThreadgroups_threadsPerThreadgroup_(size(*groups), size(*local))
            enc.endEncoding()
            with self._commits:
                cb.commit()
                self._committed += 1
                self._last = cb
        if wait:
            self._wait()

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        out = self.allocate(data.shape, data.dtype)
        self._wait()
        nbytes = data.size * data.dtype.itemsize
        self._memory(out.block, nbytes)[:] = self._memory(data.block, nbytes)
        return out

    def own(self, a) -> Array:
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        """New data into a captured input: waits for replays that may read it, then copies (shared memory)."""
        dst = owned._data
        self._wait()
        host = a._data if type(a) is Array and a.device is self else None
        nbytes = dst.size * dst.dtype.itemsize
        if host is not None:
            self._memory(dst.block, nbytes)[:] = self._memory(host.block, nbytes)
        else:
            self._write(dst.block, np.ascontiguousarray(a.numpy() if type(a) is Array else a, dtype=dst.dtype))

    def replay(self, launches: list[Dispatch]) -> None:
        self.launches += len(launches)
        self._submit(launches)

    def memory_of(self, value) -> int:
        data = value._data if type(value) is Array else value
        return id(data.block)

    def share_memory(self, launches, scratch: set[int]):
        uses = [[(pos, b.block, b.block.nbytes) for pos, b in enumerate(launch.buffers) if isinstance(b, DeviceBuffer)]
                for launch in launches]
        assignment, nbytes = plan_sharing(uses, scratch, self.pool.allocate)
        for launch, used in zip(launches, uses):
            for pos, block, _ in used:
                shared = assignment.get(id(block))
                if shared is not None:
                    old = launch.buffers[pos]
                    launch.buffers[pos] = DeviceBuffer(shared, old.shape, old.dtype)
        return launches, nbytes

    # -- compilation and launches (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        with stage("render"):
            r = metal_codegen.render(kernel, options, by_value, symbolic)
        with stage("compile"):   # kernels that differ only in their names build once (cache_key.shared_source)
            pipeline, cached = self._pipeline(r.name, shared_source(r.source, r.name), SHARED_NAME)
        return (MetalKernel(kernel.name, r.source, kernel, r.launch, cached), pipeline,
                int(pipeline.maxTotalThreadsPerThreadgroup()))

    def launcher(self, c: MetalKernel, pipeline, scalars: list) -> Launcher:
        return Launcher(c, pipeline, scalars, self.options)

    def enqueue(self, launches, bufs, error) -> None:
        """Every kernel of the call in one command buffer."""
        self._submit([launcher.dispatch([bufs[k] for k in keys], error) for launcher, keys in launches])

    def timed(self, launcher: Launcher, values, error) -> None:
        self._submit([launcher.dispatch(values, error)], wait=True)

    def bound(self, launcher: Launcher, values) -> Dispatch:
        return launcher.dispatch(values, None)

    def error_record(self) -> Block:
        record = self.pool.allocate(RECORD_BYTES)
        self._write(record, np.zeros(RECORD_WORDS, np.int32))
        return record

    def read_record(self, record: Block) -> np.ndarray:
        self._wait()
        return self._memory(record, RECORD_BYTES)

    def _pipeline(self, name: str, source: str, entry: str | None = None):
        """The compute pipeline of kernel `name`'s source (its function `entry`, else `name`), built once per
        process; (pipeline, built before)."""
        entry = entry or name
        found = self._pipelines.get((source, entry))   # a library may hold several (a raw kernel's source)
        if found is not None:
            return found, True
        t0 = time.perf_counter()
        Metal = self.Metal
        options = Metal.MTLCompileOptions.new()
        # IEEE results as NumPy gives them: no fast math, precise library functions where settable
        if hasattr(options, "setMathMode_"):
            options.setMathMode_(getattr(Metal, "MTLMathModeSafe", 0))
        else:
            options.setFastMathEnabled_(False)
        if hasattr(options, "setMathFloatingPointFunctions_"):
            options.setMathFloatingPointFunctions_(getattr(Metal, "MTLMathFloatingPointFunctionsPrecise", 1))
        library, error = self.mtl.newLibraryWithSource_options_error_(source, options, None)
        if library is None:
            raise CompileError(build_error_message(name, self.name, source, _describe_error(error)))
        function = library.newFunctionWithName_(entry)
        if function is None:
            raise CompileError(f"the Metal library built from generated kernel {name} has no function "
                               f"{entry}; this is a tracejit bug")
        pipeline, error = self.mtl.newComputePipelineStateWithFunction_error_(function, None)
        if pipeline is None:
            raise CompileError(build_error_message(name, self.name, source, _describe_error(error)))
        self._pipelines[source, entry] = pipeline
        log(1, f"compiled {name} (metal) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return pipeline, False


def _describe(device) -> str:
    parts = [str(device.name())]
    with contextlib.suppress(Exception):
        parts.append("unified memory" if device.hasUnifiedMemory() else "discrete memory")
    return ", ".join(parts)


def _describe_error(error) -> str:
    if error is None:
        return "no message"
    return str(error.localizedDescription())


def build_error_message(name: str, device: str, source: str, error: str) -> str:
    """Metal's compiler messages ('program_source:LINE:COL: error: ...'), each followed by the generated line."""
    return build_log_text.annotate(f"the Metal compiler rejected generated kernel {name} on {device}:", source, error,
                                   r"program_source:(\d+):\d+")
