"""The webgpu target through wgpu-py: one adapter and device per process (created when first needed),
buffers from a caching allocator, a shader module and pipeline per kernel, one command encoder per
call. Results stay on the device as tj.Array.

Buffers hold WGSL's 32-bit types: bool and 8/16-bit integers are widened to one 32-bit word per
element on upload and narrowed on download (codegen/simt/wgsl.py computes them at their own width)."""
from __future__ import annotations

import functools
import math
import os
import re
import time
from dataclasses import dataclass

import numpy as np

from tracejit.codegen import build_log as build_log_text
from tracejit.codegen.simt import cstyle, wgsl
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE
from tracejit.errors import CompileError, DeviceError, OutOfMemoryError, UnsupportedError
from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import gpu_nodes
from tracejit.runtime.array import Array, own_copy
from tracejit.runtime.debug import log, stage
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import Block, BlockPool, Buffer, RenderedOnly, by_value_params
from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.sharing import plan_sharing
from tracejit.runtime.symbolic_sizes import SymbolicSizes
from tracejit.runtime.views import flat_view
from tracejit.runtime.webgpu.launch import Dispatch, Launcher

INSTALL_HINT = ("pip install 'tracejit[webgpu]' (wgpu-py; it runs on OpenGL/llvmpipe as is, on Vulkan/lavapipe "
                "with Debian's mesa-vulkan-drivers)")
REDUCTION_SCRATCH = 4096
CPU_ROWS_PER_CORE = 16     # CPU adapters (llvmpipe): group mode only for fewer rows than this per core
# Mesa's llvmpipe (and lavapipe, its Vulkan driver) stops an invocation's loops after this many iterations
# in all (every level of every loop, and each entry into one, draws on one budget) and goes on as if they
# had ended: a row of 200000 summed by one invocation silently sums 65535 of them, and a row of 2000 sorted
# by one invocation's bitonic network (67584 steps) comes out unsorted
LLVMPIPE_MAX_LOOP = 65535
# llvmpipe compiles an invocation's indexed array in time growing with the square of its length, at the first
# launch (a row kept or sorted: 256 elements 1.3 s, 512 7.7 s, 1024 25 s, 3000 about 220 s); longer arrays are
# slices of work-group memory (1024: 0.5 s), which run a sort up to 2x slower than private ones
LLVMPIPE_PRIVATE_MAX = 256
# lavapipe (Mesa's Vulkan driver on llvmpipe) recompiles a shader whose branches read a uniform with that
# uniform's values inlined, at every dispatch of some shaders, and keeps what it compiled: a soak grew ~88 KB
# per call without bound (test_webgpu). It inlines uniform buffers only, so the scalars go in a storage buffer.
ALIGN = 16
# limits worth more than WebGPU's defaults, asked for up to what the adapter allows
WANTED_LIMITS = ("max-storage-buffers-per-shader-stage", "max-compute-invocations-per-workgroup",
                 "max-compute-workgroup-size-x", "max-storage-buffer-binding-size", "max-buffer-size",
                 "max-compute-workgroup-storage-size")


@functools.cache
def _adapter():
    """(adapter, None) or (None, why not). Never raises."""
    os.environ.setdefault("XDG_RUNTIME_DIR", _runtime_dir())   # else the Vulkan loader prints warnings
    try:
        import wgpu
    except ImportError as e:
        return None, f"wgpu is not importable ({e}); {INSTALL_HINT}"
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:
        return None, f"no WebGPU adapter ({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}); {INSTALL_HINT}"
    if adapter is None:
        return None, f"no WebGPU adapter found; {INSTALL_HINT}"
    return adapter, None


def _runtime_dir() -> str:
    path = f"/tmp/tracejit-runtime-{os.getuid()}" if hasattr(os, "getuid") else "/tmp"
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _describe(adapter) -> str:
    info = adapter.info
    kind = info.get("adapter_type", "")
    return f"{info.get('device', '?')} ({info.get('backend_type', '?')}, {kind})".strip()


class DeviceBuffer(Buffer):
    """An array in a WebGPU buffer: `dtype` is what the array holds, `storage` its element type in the
    buffer (wider for bool and 8/16-bit integers). `block` is a pooled buffer."""

    __slots__ = ("block", "storage")

    def __init__(self, block: Block, shape, dtype, storage):
        super().__init__(shape, dtype)
        self.block, self.storage = block, np.dtype(storage)


@dataclass(frozen=True)
class WebGPUKernel:
    """A kernel compiled for WebGPU: its name, WGSL source, kernel IR and rendering (what f.lower() lists)."""
    name: str
    source: str                       # WGSL
    ir: KernelIR
    rendered: wgsl.WGSLRendered
    cached: bool = False

    @property
    def launch(self):
        return self.rendered.launch


class WebGPUTarget(Device):
    """WGSL for WebGPU's default limits (and shader-f16), rendered without an adapter: lower() works
    anywhere; a call lowers again for the device itself."""

    runs = False
    name = "webgpu"
    layout = LayoutOptions(accumulate_rows=False, gather_rows=False, fixed_locals=True, tiled=True,
                           keep_row_max=(16384 - REDUCTION_SCRATCH) // 8, sort_bytes=16384 - REDUCTION_SCRATCH)
    options = wgsl.WGSLOptions(device="webgpu (WGSL only, no adapter)", f16=True)

    def compile(self, program: Program) -> "RenderedOnly":
        kernels = []
        for k, keys in zip(program.kernels, program.launches):
            r = wgsl.render(k, self.options, by_value_params(program, keys))
            kernels.append(WebGPUKernel(k.name, r.source, k, r))
        return RenderedOnly(kernels, "this plan holds WGSL only; call the kernel with device='webgpu' to run it")


_OPEN: list = []   # the WebGPUDevice of this process, once made


class WebGPUDevice(Device):
    """The process's WebGPU adapter (`webgpu`)."""
    inner_sizes_as_arguments = True   # row lengths and loop extents too, not only the global size (symbolic_sizes)

    @staticmethod
    def compile_only(suffix: str | None) -> WebGPUTarget | None:
        """lower() without an adapter: WGSL for WebGPU's default limits, unless the device is open already."""
        if suffix:
            raise DeviceError("webgpu has one device per process: use 'webgpu'")
        return None if _OPEN else WebGPUTarget()

    keeps_compiled_kernels = False
    # WebGPU refuses one buffer bound both read-only and read-write in a dispatch: no kernel writes over memory
    # it also reads (an argument assigned in place, f(x, out=x)); such values are computed apart and copied in
    binds_one_buffer_twice = False
    no_disk_cache = "wgpu-py exposes no pipeline cache, so each process builds its pipelines"

    @staticmethod
    def probe():
        adapter, reason = _adapter()
        if adapter is None:
            return False, reason, ""
        return True, None, _describe(adapter)

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this machine certainly has no GPU for WebGPU (Linux without a DRM render node or an
        NVIDIA device: gpu_nodes), so automatic device choice need not create an adapter to find out."""
        return gpu_nodes.may_have_gpu()

    @staticmethod
    def default_is_gpu() -> bool:
        adapter, _ = _adapter()
        return adapter is not None and adapter.info.get("adapter_type", "") in ("DiscreteGPU", "IntegratedGPU")

    def __init__(self, index: int | None = None):
        import wgpu
        if index:
            raise DeviceError("webgpu has one device per process: use 'webgpu'")
        adapter, reason = _adapter()
        if adapter is None:
            raise DeviceError(f"webgpu is not available: {reason}")
        self.name = "webgpu"
        _OPEN.append(self)
        self.description = _describe(adapter)
        limits = adapter.limits
        features = ["shader-f16"] if "shader-f16" in adapter.features else []
        self.device = adapter.request_device_sync(required_features=features,
                                                  required_limits={k: limits[k] for k in WANTED_LIMITS if k in limits})
        dl = self.device.limits
        # As on an OpenCL CPU device, a row per invocation is fastest while rows fill the cores; measured on
        # llvmpipe at 4096x1024: sum 70 -> 12 ms, softmax 155 -> 52 ms, cumsum 48 -> 14 ms
        cpu = adapter.info.get("adapter_type", "") == "CPU"
        llvmpipe = "llvmpipe" in adapter.info.get("device", "").lower()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.options = wgsl.WGSLOptions(
            device=f"webgpu ({self.description})", f16=bool(features),
            max_local_size=min(dl["max-compute-invocations-per-workgroup"], dl["max-compute-workgroup-size-x"]),
            max_workgroups=dl["max-compute-workgroups-per-dimension"],
            max_storage_buffers=dl["max-storage-buffers-per-shader-stage"],
            group_max_rows=CPU_ROWS_PER_CORE * cores if cpu else None,
            max_loop=LLVMPIPE_MAX_LOOP if llvmpipe else None, private_max=LLVMPIPE_PRIVATE_MAX if llvmpipe else None,
            scalars_in_storage=llvmpipe and adapter.info.get("backend_type", "") == "Vulkan",
            local_bytes=dl["max-compute-workgroup-storage-size"])
        keep = max(0, dl["max-compute-workgroup-storage-size"] - REDUCTION_SCRATCH) // 8
        self.layout = LayoutOptions(accumulate_rows=False, gather_rows=False, fixed_locals=True, tiled=not cpu,
                                    keep_row_max=min(4096, keep), keep_inputs_min=None if cpu else GROUP_MIN_REDUCE,
                                    sort_bytes=keep * 8)
        self.max_binding = dl["max-storage-buffer-binding-size"]
        usage = wgpu.BufferUsage
        self.pool = BlockPool(functools.partial(self._new_buffer, usage.STORAGE | usage.COPY_DST | usage.COPY_SRC), ALIGN,
                              device="webgpu")
        scalars = usage.STORAGE if self.options.scalars_in_storage else usage.UNIFORM
        self.uniforms = BlockPool(functools.partial(self._new_buffer, scalars | usage.COPY_DST), ALIGN)
        self._pipelines: dict[str, tuple[object, object]] = {}   # WGSL -> (pipeline, its bind group layout)
        self.sizes = SymbolicSizes(cstyle.slot_argument, "simt-sizes")   # which sizes are arguments of the code
        self._sync = None
        self._tables: dict = {}
        self.apply_memory_limit()

    @property
    def info(self) -> DeviceInfo:
        """The adapter's info and the device's limits. WebGPU reports no memory sizes, compute units or
        subgroup size: those are None."""
        adapter, _ = _adapter()
        info, limits = adapter.info, self.device.limits
        kind = info.get("adapter_type", "")
        unified = True if kind in ("CPU", "IntegratedGPU") else False if kind == "DiscreteGPU" else None
        missing = ("int64", "float64") + (() if self.options.f16 else ("float16",))
        return DeviceInfo(self.name, "webgpu", "cpu" if kind == "CPU" else "gpu", info.get("vendor") or None,
                          info.get("description") or None, None, None, None, None, unified,
                          self.options.max_local_size, int(limits["max-compute-workgroup-storage-size"]), None,
                          dtypes_without(*missing))

    # -- memory --
    def _new_buffer(self, usage, nbytes: int):
        try:
            return self.device.create_buffer(size=nbytes, usage=usage)
        except Exception as e:
            raise OutOfMemoryError(f"webgpu could not allocate {nbytes} bytes ({e}); free device arrays you no longer "
                              "need") from None

    def allocate(self, shape, dtype) -> DeviceBuffer:
        storage = wgsl.storage_dtype(dtype, self.options)
        nbytes = math.prod(shape) * storage.itemsize
        if nbytes > self.max_binding:
            raise OutOfMemoryError(f"an array of {nbytes} bytes is larger than {self.name} can bind to a kernel "
                                   f"({self.max_binding} bytes); split the work, or use a device without "
                                   f"this limit (numba, opencl)")
        return DeviceBuffer(self.pool.allocate(max(nbytes, 4)), shape, dtype, storage)

    def _upload(self, host: np.ndarray, shape, dtype) -> DeviceBuffer:
        out = self.allocate(shape, dtype)
        self._write(out, host)
        return out

    def _write(self, out: DeviceBuffer, host) -> None:
        """Host values into an array, as its storage type, padded to whole words (WebGPU writes those)."""
        raw = np.ascontiguousarray(host, dtype=out.storage).reshape(-1).view(np.uint8)
        if raw.nbytes % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        if raw.nbytes:
            self.device.queue.write_buffer(out.block.buffer, 0, raw)

    def _copy(self, src: DeviceBuffer, dst: DeviceBuffer) -> None:
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(src.block.buffer, 0, dst.block.buffer, 0, dst.block.nbytes)
        self.device.queue.submit([enc.finish()])

    def from_numpy(self, a: np.ndarray) -> DeviceBuffer:
        return self._upload(a, a.shape, a.dtype)

    def upload_span(self, a, desc) -> DeviceBuffer:
        flat = flat_view(a, desc)
        if desc.dtype == np.float16:
            flat = flat.view(np.float16)
        return self._upload(flat, flat.shape, desc.dtype)

    def to_numpy(self, data: DeviceBuffer) -> np.ndarray:
        nbytes = data.size * data.storage.itemsize
        if not nbytes:
            return np.empty(data.shape, data.dtype)
        raw = self.device.queue.read_buffer(data.block.buffer, 0, -(-nbytes // 4) * 4)
        return np.frombuffer(raw, dtype=data.storage, count=data.size).astype(data.dtype).reshape(data.shape)

    def dlpack(self, data, *args, **kwargs):
        raise UnsupportedError(f"a tj.Array on {self.name} cannot be shared through DLPack (WebGPU memory has no DLPack "
                               "device type); call .numpy() for a host copy")

    dlpack_device = dlpack

    def synchronize(self) -> None:
        """Reading a buffer back waits for everything submitted before (wgpu-py's work-done callback does
        not match every wgpu-native build)."""
        self.device.queue.read_buffer(self._sync_buffer().buffer, 0, 4)

    def memory_stats(self) -> dict[str, int]:
        return self.pool.stats()

    # -- graph capture --
    def clone(self, data: DeviceBuffer) -> DeviceBuffer:
        out = DeviceBuffer(self.pool.allocate(data.block.nbytes), data.shape, data.dtype, data.storage)
        self._copy(data, out)
        return out

    def own(self, a) -> Array:
        return own_copy(self, a)

    def feed(self, owned: Array, a) -> None:
        if type(a) is Array and a.device is self:
            self._copy(a._data, owned._data)
        else:
            self._write(owned._data, a.numpy() if type(a) is Array else a)

    def replay(self, launches: list[Dispatch]) -> None:
        """Every launch in one command encoder, one submit."""
        self.launches += len(launches)
        self._submit(launches)

    def _submit(self, launches: list[Dispatch]) -> None:
        enc = self.device.create_command_encoder()
        for launch in launches:
            pass_ = enc.begin_compute_pass()
            pass_.set_pipeline(launch.pipeline)
            pass_.set_bind_group(0, launch.bind_group)
            pass_.dispatch_workgroups(*launch.groups, 1)
            pass_.end()
        self.device.queue.submit([enc.finish()])

    def memory_of(self, value) -> int:
        data = value._data if type(value) is Array else value
        return id(data.block)

    def share_memory(self, launches, scratch: set[int]):
        uses = [[(pos, buf.block, buf.block.nbytes) for pos, buf in enumerate(launch.buffers)
                 if isinstance(buf, DeviceBuffer)] for launch in launches]
        assignment, nbytes = plan_sharing(uses, scratch, self.pool.allocate)
        for launch, used in zip(launches, uses):
            changed = False
            for pos, block, _ in used:
                shared = assignment.get(id(block))
                if shared is not None:
                    old = launch.buffers[pos]
                    launch.buffers[pos] = DeviceBuffer(shared, old.shape, old.dtype, old.storage)
                    changed = True
            if changed:
                launch.bind(self)
        return launches, nbytes

    # -- compilation and launches (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options: wgsl.WGSLOptions):
        """WebGPU says no more about a pipeline than the device's limits, which the rendering honours."""
        with stage("render"):
            r = wgsl.render(kernel, options, by_value, symbolic)
        with stage("compile"):
            cached = self._pipeline(r)
        return WebGPUKernel(kernel.name, r.source, kernel, r, cached), self._pipelines[r.source], None

    def launcher(self, c: WebGPUKernel, pipeline: tuple[object, object], scalars: list) -> Launcher:
        return Launcher(c, *pipeline, scalars)

    def enqueue(self, launches, bufs, error) -> None:
        """Every kernel of the call in one command encoder, one submit."""
        self._run([launcher.dispatch(self, [bufs[k] for k in keys], error) for launcher, keys in launches])

    def timed(self, launcher: Launcher, values, error) -> None:
        self._run([launcher.dispatch(self, values, error)], wait=True)

    def _run(self, launches: list[Dispatch], wait: bool = False) -> None:
        try:
            self._submit(launches)
            if wait:
                self.synchronize()
        except Exception as e:
            raise DeviceError(f"{self.name} refused to run {', '.join(d.name for d in launches)}: {e}") from None

    def bound(self, launcher: Launcher, values) -> Dispatch:
        return launcher.dispatch(self, values, None)

    def error_record(self) -> Block:
        record = self.pool.allocate(RECORD_BYTES)
        self.device.queue.write_buffer(record.buffer, 0, np.zeros(RECORD_WORDS, np.int32))
        return record

    def read_record(self, record: Block):
        return self.device.queue.read_buffer(record.buffer, 0, RECORD_BYTES)

    def _pipeline(self, r: wgsl.WGSLRendered) -> bool:
        """Shader module, bind group layout and pipeline of a rendered kernel, built once per process;
        whether it was built before. The first time in a process is always a compile: wgpu-py exposes no
        pipeline cache, so nothing compiled can be kept on disk."""
        if r.source in self._pipelines:
            return True     # built before in this process: nothing compiled now
        import wgpu
        t0 = time.perf_counter()
        try:
            module = self.device.create_shader_module(code=r.source)
            kinds = [wgpu.BufferBindingType.storage if w else wgpu.BufferBindingType.read_only_storage
                     for w in r.writable]
            if r.uniform:
                kinds.append(wgpu.BufferBindingType.read_only_storage if self.options.scalars_in_storage
                             else wgpu.BufferBindingType.uniform)
            if r.launch.error_flag:
                kinds.append(wgpu.BufferBindingType.storage)
            kinds += [wgpu.BufferBindingType.read_only_storage] * len(r.tables)
            layout = self.device.create_bind_group_layout(entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
                for i, kind in enumerate(kinds)])
            pipeline = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": r.name})
        except Exception as e:
            raise CompileError(build_error_message(r.name, self.name, r.source, str(e))) from None
        self._pipelines[r.source] = (pipeline, layout)
        log(1, f"compiled {r.name} (webgpu) in {1e3 * (time.perf_counter() - t0):.0f} ms")
        return False

    def table_buffer(self, table):
        """The storage buffer of a constant table, uploaded once per device and kept. Written before it
        is published: another thread finding it in the table submits after the write."""
        block = self._tables.get(table)
        if block is None:
            words = wgsl.table_words(table)
            block = self.pool.allocate(words.nbytes)
            self.device.queue.write_buffer(block.buffer, 0, words)
            block = self._tables.setdefault(table, block)
        return block

    def _sync_buffer(self):
        """The buffer synchronize() reads back (what it holds does not matter)."""
        if self._sync is None:
            self._sync = self.pool.allocate(4)
        return self._sync


def build_error_message(name: str, device: str, source: str, error: str) -> str:
    """wgpu's validation messages (naga names 'wgsl:LINE:COL'), each followed by the generated line."""
    return build_log_text.annotate(f"WebGPU rejected generated WGSL kernel {name} on {device}:", source,
                                   re.sub(r"\n\s*\n", "\n", error), r"wgsl:(\d+):\d+")
