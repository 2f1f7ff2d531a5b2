"""The webgpu target through wgpu-py: one adapter and device per process (created when first needed); its
roles are in compiler.py (a shader module and pipeline per kernel), memory.py (buffers from a caching
allocator) and launch.py (one command encoder per call). Results stay on the device as tj.Array.

Buffers hold WGSL's 32-bit types: bool and 8/16-bit integers are widened to one 32-bit word per
element on upload and narrowed on download (codegen/simt/wgsl.py computes them at their own width)."""

from __future__ import annotations

import functools
import os

from tracejit.codegen.simt import mapping, wgsl
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import gpu_nodes
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_interface import Device
from tracejit.runtime.device_memory import BlockPool
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.symbolic_sizes import SymbolicSizes
from tracejit.runtime.webgpu.compiler import REDUCTION_SCRATCH, WebGPUCompiler, WebGPUTarget
from tracejit.runtime.webgpu.launch import WebGPULaunches
from tracejit.runtime.webgpu.memory import WebGPUMemory

INSTALL_HINT = (
    "pip install 'tracejit[webgpu]' (wgpu-py; it runs on OpenGL/llvmpipe as is, on Vulkan/lavapipe "
    "with Debian's mesa-vulkan-drivers)"
)
CPU_ROWS_PER_CORE = 16  # CPU adapters (llvmpipe): group mode only for fewer rows than this per core
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
WANTED_LIMITS = (
    "max-storage-buffers-per-shader-stage",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",
)


@functools.cache
def _adapter():
    """(adapter, None) or (None, why not). Never raises."""
    os.environ.setdefault("XDG_RUNTIME_DIR", _runtime_dir())  # else the Vulkan loader prints warnings
    try:
        import wgpu
    except ImportError as e:
        return None, f"wgpu is not importable ({e}); {INSTALL_HINT}"
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:
        return (
            None,
            f"no WebGPU adapter ({type(e).__name__}: {_first_line(e)}); {INSTALL_HINT}",
        )
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


_OPEN: list = []  # the WebGPUDevice of this process, once made


class WebGPUDevice(WebGPUCompiler, WebGPUMemory, WebGPULaunches, Device):
    """The process's WebGPU adapter (`webgpu`)."""

    inner_sizes_as_arguments = True  # row lengths and loop extents too, not only the global size (symbolic_sizes)

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
    computes_int64 = False
    computes_float64 = False
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
        return not gpu_nodes.ruled_out("webgpu")

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
        self.device = adapter.request_device_sync(
            required_features=features, required_limits={k: limits[k] for k in WANTED_LIMITS if k in limits}
        )
        dl = self.device.limits
        # As on an OpenCL CPU device, a row per invocation is fastest while rows fill the cores; measured on
        # llvmpipe at 4096x1024: sum 70 -> 12 ms, softmax 155 -> 52 ms, cumsum 48 -> 14 ms
        cpu = adapter.info.get("adapter_type", "") == "CPU"
        llvmpipe = "llvmpipe" in adapter.info.get("device", "").lower()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.options = wgsl.WGSLOptions(
            device=f"webgpu ({self.description})",
            f16=bool(features),
            max_local_size=min(dl["max-compute-invocations-per-workgroup"], dl["max-compute-workgroup-size-x"]),
            max_workgroups=dl["max-compute-workgroups-per-dimension"],
            max_storage_buffers=dl["max-storage-buffers-per-shader-stage"],
            group_max_rows=CPU_ROWS_PER_CORE * cores if cpu else None,
            max_loop=LLVMPIPE_MAX_LOOP if llvmpipe else None,
            private_max=LLVMPIPE_PRIVATE_MAX if llvmpipe else None,
            scalars_in_storage=llvmpipe and adapter.info.get("backend_type", "") == "Vulkan",
            local_bytes=dl["max-compute-workgroup-storage-size"],
        )
        keep = max(0, dl["max-compute-workgroup-storage-size"] - REDUCTION_SCRATCH) // 8
        self.layout = LayoutOptions(
            accumulate_rows=False,
            share_reduce_loops=False,
            split_loops=False,
            gather_rows=False,
            fixed_locals=True,
            tiled=not cpu,
            keep_row_max=min(4096, keep),
            keep_inputs_min=None if cpu else GROUP_MIN_REDUCE,
            sort_bytes=keep * 8,
            max_buffers=dl["max-storage-buffers-per-shader-stage"],
        )
        self.max_binding = dl["max-storage-buffer-binding-size"]
        usage = wgpu.BufferUsage
        self.pool = BlockPool(
            functools.partial(self._new_buffer, usage.STORAGE | usage.COPY_DST | usage.COPY_SRC), ALIGN, device="webgpu"
        )
        # (both where a kernel may bind its scalars either way: webgpu/compiler.py)
        scalars = usage.STORAGE | usage.UNIFORM if self.options.scalars_in_storage else usage.UNIFORM
        self.uniforms = BlockPool(functools.partial(self._new_buffer, scalars | usage.COPY_DST), ALIGN)
        self._pipelines: dict[str, tuple[object, object]] = {}  # WGSL -> (pipeline, its bind group layout)
        self.sizes = SymbolicSizes(mapping.slot_argument, "simt-sizes")  # which sizes are arguments of the code
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
        return DeviceInfo(
            self.name,
            "webgpu",
            "cpu" if kind == "CPU" else "gpu",
            info.get("vendor") or None,
            info.get("description") or None,
            None,
            None,
            None,
            None,
            unified,
            self.options.max_local_size,
            int(limits["max-compute-workgroup-storage-size"]),
            None,
            dtypes_without(*missing),
        )

    def synchronize(self) -> None:
        """Reading a buffer back waits for everything submitted before (wgpu-py's work-done callback does
        not match every wgpu-native build)."""
        self.device.queue.read_buffer(self._sync_buffer().buffer, 0, 4)

    # -- the roles together: a program's launch plan (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)

    def _sync_buffer(self):
        """The buffer synchronize() reads back (what it holds does not matter)."""
        if self._sync is None:
            self._sync = self.pool.allocate(4)
        return self._sync


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""
