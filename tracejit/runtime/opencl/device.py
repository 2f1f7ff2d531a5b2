"""The opencl target through pyopencl: device discovery, one context and in-order queue per device; its
roles are in compiler.py (program builds), memory.py (pooled buffers) and launch.py. Results stay on the
device as tj.Array."""

from __future__ import annotations

import atexit
import weakref
from typing import TYPE_CHECKING

from tracejit.codegen.simt import mapping
from tracejit.codegen.simt.mapping import GROUP_MIN_REDUCE, RenderOptions
from tracejit.errors import DeviceError
from tracejit.ir.fuse import Program
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime import gpu_nodes
from tracejit.runtime.device_info import DeviceInfo, dtypes_without
from tracejit.runtime.device_interface import Device
from tracejit.runtime.launch_plan import LaunchPlan
from tracejit.runtime.opencl.discovery import (
    all_devices,
    choose,
    describe,
    pocl_cache_problem,
    pocl_cannot_write,
    refused_devices,
)
from tracejit.runtime.opencl.compiler import OpenCLCompiler
from tracejit.runtime.opencl.launch import OpenCLLaunches
from tracejit.runtime.opencl.memory import OpenCLMemory
from tracejit.runtime.symbolic_sizes import SymbolicSizes

if TYPE_CHECKING:  # (imported where used: the device is opened on demand)
    import pyopencl as cl

INSTALL_HINT = "pip install 'tracejit[opencl]' (pyopencl, and PoCL for a CPU device)"
# PyPI's PoCL 3.0 (LLVM 14) cannot compile for CPUs newer than it, such as AMD's Zen 5
REFUSED_HINT = (
    "On Debian or Ubuntu, `apt-get install pocl-opencl-icd` adds the distribution's PoCL, built with a "
    "newer LLVM, as a second CPU platform"
)
REDUCTION_SCRATCH = 4096  # bytes of local memory left for reduction trees when keeping rows
CPU_ROWS_PER_UNIT = 16  # CPU devices: group mode only for fewer rows than this per compute unit
CPU_KEEP_ROW_MAX = 2048  # CPU devices: longest row kept in a work-item's private array
CPU_SORT_BYTES = (
    1 << 14
)  # CPU devices: a sorted row's private arrays (PoCL crashed at 128 KiB; 64 KiB crashed with 40 rows)


def _finish_at_exit() -> None:
    """Wait for every opened device's queue before the interpreter exits. A call returns once its kernels are
    enqueued; a CPU driver's threads may still be compiling one then (PoCL compiles a kernel for its
    work-group size at its first launch), and the process's exit destroys LLVM under them: a segmentation
    fault after the script's last line (seen with six processes starting at once, in about one round of
    fifteen)."""
    for device in list(_OPENED):
        try:
            device.synchronize()
        except Exception:  # (an error of the device's own is no reason to fail the exit)
            continue


_OPENED: weakref.WeakSet[OpenCLDevice] = weakref.WeakSet()
atexit.register(_finish_at_exit)


class OpenCLDevice(OpenCLCompiler, OpenCLMemory, OpenCLLaunches, Device):
    """One OpenCL device: `opencl` (see TRACEJIT_OPENCL_DEVICE) or `opencl:N` in tj.devices() order."""

    inner_sizes_as_arguments = True  # row lengths and loop extents too, not only the global size (symbolic_sizes)

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this Linux machine has no GPU driver's device file (gpu_nodes): automatic device
        choice then neither imports pyopencl nor lists the platforms to find out."""
        return not gpu_nodes.ruled_out("opencl")

    @staticmethod
    def probe():
        try:
            import pyopencl  # noqa: F401
        except ImportError as e:
            return False, f"pyopencl is not importable ({e}); {INSTALL_HINT}", ""
        devices = all_devices()
        if not devices:
            refused = refused_devices()
            if refused:  # (PoCL builds in its cache directory: a full or read-only one is the reason then)
                return (
                    False,
                    pocl_cannot_write()
                    or ("no OpenCL device can build a kernel: " + "; ".join(refused) + ". " + REFUSED_HINT),
                    "",
                )
            return False, pocl_cache_problem() or f"no OpenCL platform or device found; {INSTALL_HINT}", ""
        try:
            chosen = choose(devices)
        except DeviceError as e:
            return False, str(e), ""
        several = len(devices) > 1
        return (
            True,
            None,
            "; ".join(
                f"opencl:{i} {describe(d)}{' [opencl]' if several and i == chosen else ''}"
                for i, d in enumerate(devices)
            ),
        )

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
        self.options = RenderOptions(
            device=f"{self.name} ({self.description})",
            fp64="cl_khr_fp64" in extensions,
            fp16="cl_khr_fp16" in extensions,
            max_local_size=d.max_work_group_size,
            group_max_rows=None if gpu else CPU_ROWS_PER_UNIT * d.max_compute_units,
            wide_sums=not gpu,
            own_math=not gpu,
            laned_extrema=not gpu,
            atomics64="cl_khr_int64_base_atomics" in extensions,
        )
        # Kept rows live in __local memory in group mode and in private arrays in thread mode; rows of
        # accumulators private to a global index would be a private array per work-item.
        keep = max(0, d.local_mem_size - REDUCTION_SCRATCH) // 8 if gpu else CPU_KEEP_ROW_MAX
        self.layout = LayoutOptions(
            accumulate_rows=False,
            share_reduce_loops=False,
            split_loops=False,
            gather_rows=False,
            fixed_locals=True,
            tiled=gpu,
            library=not gpu,  # on a CPU, products and sorts by the host's libraries on mapped buffers (host_calls.py)
            keep_row_max=min(16384, keep),
            keep_inputs_min=GROUP_MIN_REDUCE if gpu else None,
            sort_bytes=keep * 8 if gpu else CPU_SORT_BYTES,
        )
        self._programs: dict[str, tuple[cl.Program, str | None]] = {}
        self._fresh: dict[str, bool] = {}
        self.sizes = SymbolicSizes(mapping.slot_argument, "simt-sizes")  # which sizes are arguments of the code
        self._limit: int | None = None  # tj.set_memory_limit
        self._peak = 0
        self.apply_memory_limit()
        _OPENED.add(self)

    @property
    def info(self) -> DeviceInfo:
        """OpenCL's device queries. Free memory: None, OpenCL has no query for it."""
        import pyopencl as cl

        d = self.cl_device
        gpu = bool(d.type & cl.device_type.GPU)
        unified: bool | None
        try:
            unified = bool(d.host_unified_memory)
        except cl.Error:  # an OpenCL 3.0 driver need not answer it
            unified = None if gpu else True
        return DeviceInfo(
            self.name,
            "opencl",
            "gpu" if gpu else "cpu",
            d.vendor.strip() or None,
            d.driver_version.strip() or None,
            int(d.global_mem_size),
            None,
            int(d.max_compute_units),
            None,
            unified,
            int(d.max_work_group_size),
            int(d.local_mem_size),
            None,
            dtypes_without() if self.options.fp64 else dtypes_without("float64"),
        )

    def synchronize(self) -> None:
        self.queue.finish()

    # -- the roles together: a program's launch plan (launch_plan.LaunchPlan) --
    def compile(self, program: Program) -> LaunchPlan:
        return LaunchPlan(self, program)
