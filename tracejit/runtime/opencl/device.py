"""The opencl target through pyopencl: device discovery, one context and in-order queue per device,
pooled buffers, program builds, launches. Results stay on the device as tj.Array."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import cstyle
from tracejit.codegen.simt import opencl as opencl_codegen
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE, Launch, RenderOptions
from tracejit.errors import CompileError, DeviceError, OutOfMemoryError, UnsupportedError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import gpu_nodes
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.cache.key import SHARED_NAME, shared_source, source_part, tracejit_part
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_memory import Buffer, over_limit
from tracejit.runtime.device_interface import Device
from tracejit.runtime.cache.disk import CACHE, CacheKey
from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.opencl.discovery import (all_devices, build_lock, build_program, choose, describe, is_pocl, pocl_cache_problem,
                             pocl_cannot_write, refused_devices)
from tracejit.runtime.opencl.launch import Launcher, profiled_seconds
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.symbolic_sizes import SymbolicSizes
from tracejit.runtime.views import flat_view

if TYPE_CHECKING:   # (imported where used: the device is opened on demand)
    import pyopencl as cl

INSTALL_HINT = "pip install 'tracejit[opencl]' (pyopencl, and PoCL for a CPU device)"
# PyPI's PoCL 3.0 (LLVM 14) cannot compile for CPUs newer than it, such as AMD's Zen 5
REFUSED_HINT = ("On Debian or Ubuntu, `apt-get install pocl-opencl-icd` adds the distribution's PoCL, built with a "
                "newer LLVM, as a second CPU platform")
REDUCTION_SCRATCH = 4096   # bytes of local memory left for reduction trees when keeping rows
CPU_ROWS_PER_UNIT = 16     # CPU devices: group mode only for fewer rows than this per compute unit
CPU_KEEP_ROW_MAX = 2048    # CPU devices: longest row kept in a work-item's private array
CPU_SORT_BYTES = 1 << 14   # CPU devices: a sorted row's private arrays (PoCL crashed at 128 KiB; 64 KiB crashed with 40 rows)


class DeviceBuffer(Buffer):
    """A contiguous array in device memory (a pooled cl buffer, None when empty)."""

    __slots__ = ("buf",)

    def __init__(self, buf, shape: tuple[int, ...], dtype: np.dtype):
        super().__init__(shape, dtype)
        self.buf = buf


@dataclass(frozen=True)
class OpenCLKernel:
    """A kernel compiled for OpenCL: its name, OpenCL C source, kernel IR and launch shape (what f.lower() lists)."""
    name: str
    source: str
    ir: KernelIR
    launch: Launch
    cached: bool = False   # the program binary came from the disk cache: nothing was compiled


class OpenCLDevice(Device):
    """One OpenCL device: `opencl` (see TRACEJIT_OPENCL_DEVICE) or `opencl:N` in tj.devices() order."""
    inner_sizes_as_arguments = True   # row lengths and loop extents too, not only the global size (symbolic_sizes)

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this Linux machine has no GPU driver's device file (gpu_nodes): automatic device
        choice then neither imports pyopencl nor lists the platforms to find out."""
        return gpu_nodes.may_have_gpu()

    @staticmethod
    def probe():
        try:
            import pyopencl  # noqa: F401
        except ImportError as e:
            return False, f"pyopencl is not importable ({e}); {INSTALL_HINT}", ""
        devices = all_devices()
        if not devices:
            refused = refused_devices()
            if refused:   # (PoCL builds in its cache directory: a full or read-only one is the reason then)
                return False, pocl_cannot_write() or ("no OpenCL device can build a kernel: " + "; ".join(refused)
                                                      + ". " + REFUSED_HINT), ""
            return False, pocl_cache_problem() or f"no OpenCL platform or device found; {INSTALL_HINT}", ""
        try:
            chosen = choose(devices)
        except DeviceError as e:
            return False, str(e), ""
        several = len(devices) > 1
        return True, None, "; ".join(f"opencl:{i} {describe(d)}{' [opencl]' if several and i == chosen else ''}"
                                     for i, d in enumerate(devices))

    @staticmethod
    def default_is_gpu() -> bool:
        import pyopencl as cl
        devices = all_devices()
        return bool(devices) and bool(devices[choose(devices)].type & cl.device_type.GPU)

    def __init__(self, index: int | None = None):
        import pyopencl as cl
        import pyopencl.tools as cl_tools
        devices = all_devices()
        chosen = choose(devices) if index is None else index
        if chosen >= len(devices):
            raise DeviceError(f"opencl:{index} does not exist; there are {len(devices)} OpenCL device(s)")
        self.name = "opencl" if index is None else f"opencl:{index}"
        self.cl_device = d = devices[chosen]
        self.description = describe(d)
        self.context = cl.Context([d])
        # profiled: each command's device times are there to read inside tj.profile() (read nowhere else)
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(self.queue))
        extensions = d.extensions.split()
        gpu = bool(d.type & cl.device_type.GPU)
        # A CPU implementation runs a work-item's loops as plain CPU loops: a row per work-item is
        # fastest while there are rows enough for every core; a GPU wants a work-group per long row.
        self.options = RenderOptions(device=f"{self.name} ({self.description})", fp64="cl_khr_fp64" in extensions,
                                     fp16="cl_khr_fp16" in extensions, max_local_size=d.max_work_group_size,
                                     group_max_rows=None if gpu else CPU_ROWS_PER_UNIT * d.max_compute_units,
                                     wide_sums=not gpu, own_math=not gpu, laned_extrema=not gpu,
                                     atomics64="cl_khr_int64_base_atomics" in extensions)
        # Kept rows live in __local memory in group mode and in private arrays in thread mode; rows of
        # accumulators private to a global index would be a private array per work-item.
        keep = max(0, d.local_mem_size - REDUCTION_SCRATCH) // 8 if gpu else CPU_KEEP_ROW_MAX
        self.layout = LayoutOptions(accumulate_rows=False, gather_rows=False, fixed_locals=True, tiled=gpu, keep_row_max=min(16384, keep),
                                    keep_inputs_min=GROUP_MIN_REDUCE if gpu else None,
                                    sort_bytes=keep * 8 if gpu else CPU_SORT_BYTES)
        self._programs: dict[str, cl.Program] = {}
        self.sizes = SymbolicSizes(cstyle.slot_argument, "simt-sizes")   # which sizes are arguments of the code
        self._limit: int | None = None   # tj.set_memory_limit
        self._peak = 0
        self.apply_memory_limit()

    @property
    def info(self) -> DeviceInfo:
        """OpenCL's device queries. Free memory: None, OpenCL has no query for it."""
        import pyopencl as cl
        d = self.cl_device
        gpu = bool(d.type & cl.device_type.GPU)
        unified: bool | None
        try:
            unified = bool(d.host_unified_memory)
        except cl.Error:   # an OpenCL 3.0 driver need not answer it
            unified = None if gpu else True
        return DeviceInfo(self.name, "opencl", "gpu" if gpu else "cpu", d.vendor.strip() or None,
                          d.driver_version.strip() or None, int(d.global_mem_size), None, int(d.max_compute_units),
                          None, unified, int(d.max_work_group_size), int(d.local_mem_size), None,
                          dtypes_without() if self.options.fp64 else dtypes_without("float64"))

    # -- memory --
    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> DeviceBuffer:
        nbytes = math.prod(shape) * dtype.itemsize
        return DeviceBuffer(self._allocate(nbytes) if nbytes else None, shape, dtype)

    def memory(self):
        """pyopencl's pool counts the bytes asked for in use and the rounded blocks it manages: their difference
        also holds the rounding of blocks in use, so with no block kept nothing is held (it read 626813 bytes
        after the pool was emptied, in the full suite); with some kept it is an upper bound."""
        pool = self.pool
        held = pool.managed_bytes - pool.active_bytes if pool.held_blocks else 0
        return pool.active_bytes, max(self._peak, pool.active_bytes), held

    def set_memory_limit(self, nbytes) -> None:
        self._limit = nbytes

    @property
    def memory_limit(self) -> int | None:
        return self._limit

    def _allocate(self, nbytes: int):
        import pyopencl as cl
        pool = self.pool
        if self._limit is not None:   # pyopencl's pool may reuse a kept block: counted as new, to be safe
            if pool.managed_bytes + nbytes > self._limit:
                pool.free_held()
            if pool.active_bytes + nbytes > self._limit:
                raise over_limit(self.name, nbytes, self._limit, pool.active_bytes)
        self._peak = max(self._peak, pool.active_bytes + nbytes)
        try:
            return self.pool.allocate(nbytes)
        except cl.Error as e:
            self.pool.free_held()   # blocks held for reuse may be what is in the way
            try:
                return self.pool.allocate(nbytes)
            except cl.Error:
                raise OutOfMemoryError(f"{self.name} could not allocate {nbytes} bytes ({e}); "
                                  "free device arrays you no longer need") from None

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        """Upload a host array. The copy is queued, so the host data is first staged in a private copy
        the caller cannot change before the transfer happens."""
        import pyopencl as cl
        out = self.allocate(a.shape, a.dtype)
        if out.buf is not None:
            staged = np.array(a, order="C", copy=True)
            cl.enqueue_copy(self.queue, out.buf, staged, is_blocking=False)
        return out

    def upload_span(self, a, desc):
        """The cl buffer holding the memory span the kernel reads of a host argument (strided in place), of
        at least a byte (a kernel may read an element it then ignores). A cl buffer, not a DeviceBuffer: it
        lives for one call, and making a DeviceBuffer costs a call on the hot path a microsecond."""
        import pyopencl as cl
        staged = np.array(flat_view(a, desc), copy=True)
        buf = self._allocate(max(staged.nbytes, 1))
        if staged.nbytes:
            cl.enqueue_copy(self.queue, buf, staged, is_blocking=False)
        return buf

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        import pyopencl as cl
        host = np.empty(data.shape, data.dtype)
        if data.buf is not None:
            cl.enqueue_copy(self.queue, host, data.buf, is_blocking=True)
        return host

    def dlpack(self, data, *args, **kwargs):
        raise UnsupportedError(f"a tj.Array on {self.name} cannot be shared through DLPack (OpenCL memory has no "
                               "DLPack device type that NumPy or torch accept); call .numpy() for a host copy")

    dlpack_device = dlpack

    def synchronize(self) -> None:
        self.queue.finish()

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        import pyopencl as cl
        out = self.allocate(data.shape, data.dtype)
        if out.buf is not None:
            cl.enqueue_copy(self.queue, out.buf, data.buf)
        return out

    def own(self, a) -> Array:
        """A graph's own copy of an input, on this device."""
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        import pyopencl as cl
        if owned._data.buf is None:
            return
        if type(a) is Array and a.device is self:
            cl.enqueue_copy(self.queue, owned._data.buf, a._data.buf)
        else:
            staged = np.array(a.numpy() if type(a) is Array else a, order="C", copy=True)
            cl.enqueue_copy(self.queue, owned._data.buf, staged, is_blocking=False)

    def replay(self, launches) -> None:
        """Kernels with their arguments set once, enqueued back to back."""
        import pyopencl as cl
        enqueue, queue = cl.enqueue_nd_range_kernel, self.queue
        self.launches += len(launches)
        for knl, global_size, local_size, _ in launches:
            enqueue(queue, knl, global_size, local_size)

    def memory_of(self, value) -> int:
        """The memory object behind a tj.Array or a DeviceBuffer of this device."""
        return id(value._data.buf if type(value) is Array else value.buf)

    def share_memory(self, launches, scratch: set[int]):
        """Intermediates whose lifetimes do not overlap share pooled blocks (see plan_sharing)."""
        import pyopencl as cl
        uses = [[(pos, a, a.size) for pos, a in enumerate(call) if isinstance(a, cl.MemoryObjectHolder)]
                for _, _, _, call in launches]
        assignment, nbytes = plan_sharing(uses, scratch, self._allocate)
        out = []
        for (knl, g, l, call), used in zip(launches, uses):
            call = list(call)
            for pos, a, _ in used:
                if id(a) in assignment:
                    call[pos] = assignment[id(a)]
                    knl.set_arg(pos, call[pos])
            out.append((knl, g, l, call))
        return out, nbytes

    def memory_stats(self) -> dict[str, int]:
        """The caching allocator: blocks in use, blocks held for reuse, bytes managed."""
        return {"active_blocks": self.pool.active_blocks, "held_blocks": self.pool.held_blocks,
                "managed_bytes": self.pool.managed_bytes, "active_bytes": self.pool.active_bytes}

    # -- compilation and launches (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: RenderOptions):
        import pyopencl as cl
        with stage("render"):
            r = opencl_codegen.render(kernel, options, by_value, symbolic)
        with stage("compile"):   # kernels that differ only in their names build once (cache_key.shared_source)
            knl, cached = self._build(r.name, shared_source(r.source, r.name), SHARED_NAME)
        fits = knl.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, self.cl_device)
        return OpenCLKernel(kernel.name, r.source, kernel, r.launch, cached), knl, fits

    def launcher(self, c: OpenCLKernel, knl, scalars: list) -> Launcher:
        return Launcher(c, knl, scalars, self.options)

    def enqueue(self, launches, bufs, error) -> None:
        for launcher, keys in launches:
            self._enqueue(launcher, [bufs[k] for k in keys], error)

    def timed(self, launcher: Launcher, values, error) -> float | None:
        return profiled_seconds(self._enqueue(launcher, values, error))

    def _enqueue(self, launcher: Launcher, values, error):
        """One kernel on the queue; its event."""
        call = launcher.arguments(values, error)
        try:
            with launcher.lock:   # the kernel object's arguments are set and enqueued in one step
                return launcher.kernel(self.queue, launcher.global_size, launcher.local_size, *call)
        except Exception as e:
            import pyopencl as cl   # not before: an import on every call costs the hot path
            if isinstance(e, cl.Error):
                raise launcher.refused(self.name, e) from None
            raise

    def bound(self, launcher: Launcher, values) -> tuple:
        return launcher.bound(values)

    def error_record(self):
        import pyopencl as cl
        record = self._allocate(RECORD_BYTES)
        cl.enqueue_fill_buffer(self.queue, record, np.int32(0), 0, RECORD_BYTES)
        return record

    def read_record(self, record) -> np.ndarray:
        import pyopencl as cl
        words = np.zeros(RECORD_WORDS, np.int32)
        cl.enqueue_copy(self.queue, words, record, is_blocking=True)
        return words

    def cache_key(self, name: str, source: str) -> CacheKey:
        d = self.cl_device
        return CacheKey("opencl", name, (
            ("kernel", source_part(source)),
            ("device", f"{d.platform.name.strip()} {d.platform.version.strip()} / {d.name.strip()} / "
                       f"driver {d.driver_version.strip()}"),
            ("options", opencl_codegen.BUILD_OPTIONS),
            ("tracejit", tracejit_part()),
            ("compiler", f"pyopencl {_pyopencl_version()}"),
        ))

    def _build(self, name: str, source: str, entry: str | None = None):
        """Kernel `name` of `source` (its entry point `entry`, else `name`), built once per process; the
        program binary comes from the disk cache when it is there. Returns (kernel, whether nothing was
        compiled)."""
        import pyopencl as cl
        prg, cached = self._programs.get(source), True
        if prg is None:
            t0 = time.perf_counter()
            key = self.cache_key(name, source)
            # One process (and thread) at a time builds or loads a program in PoCL's cache (build_lock says
            # why); the others wait, then find its binary in the disk cache.
            with build_lock(self.cl_device, key.digest):
                prg = self._programs.get(source)
                binary = CACHE.get(key) if prg is None else None
                if prg is None and binary is not None:
                    prg = self._from_binary(binary)
                if prg is None:
                    prg, cached = self._from_source(name, source), False
                    binaries = prg.get_info(cl.program_info.BINARIES)   # one per device (the stub says object)
                    assert isinstance(binaries, list)
                    CACHE.put(key, binaries[0])   # only after a successful build
                self._programs[source] = prg
            log(1, f"{'loaded' if cached else 'compiled'} {name} (opencl) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return cl.Kernel(prg, entry or name), cached  # a kernel object per plan: each holds its own argument types

    def _from_binary(self, binary: bytes) -> cl.Program | None:
        import pyopencl as cl
        try:
            prg = cl.Program(self.context, [self.cl_device], [binary])
            prg.build(opencl_codegen.BUILD_OPTIONS)
            return prg
        except cl.Error as e:   # a driver that no longer accepts it: build from source instead
            log(1, f"cached OpenCL binary rejected by {self.name} ({e}); building from source")
            return None

    def _from_source(self, name: str, source: str) -> cl.Program:
        import pyopencl as cl
        raw, build_log = build_program(self.context, self.cl_device, source, opencl_codegen.BUILD_OPTIONS.encode())
        if raw is not None:
            return cl.Program(raw)
        problem = pocl_cannot_write() if is_pocl(self.cl_device) else None
        if problem:
            raise CompileError(f"cannot build kernel {name} on {self.name}: {problem}") from None
        raise CompileError(build_error_message(name, self.name, source, build_log)) from None


def _pyopencl_version() -> str:
    import pyopencl
    return pyopencl.VERSION_TEXT


def build_error_message(name: str, device: str, source: str, build_log: str) -> str:
    """The compiler's messages, each followed by the generated line it points at."""
    return build_log_text.annotate(f"the OpenCL compiler rejected generated kernel {name} on {device}:", source,
                                   build_log, r":(\d+):\d+:")
