"""The device interface: what the frontend, the registry and capture use of a device, written down.

Every device (numba, opencl, cuda, webgpu, metal, and a plugin's) is a `Device`: it implements the
methods of `DeviceInterface` and states its optional capabilities as the class attributes below, which
callers read directly instead of probing with getattr. A compile-only target (cuda without a GPU, or
metal and webgpu where none is open) is a Device with `runs = False`. The GPU-API devices also implement
`KernelDevice`, the hooks of the launch plan they share (launch_plan.LaunchPlan).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from tracejit.errors import InternalError
from tracejit.ir.kernel_ir import KernelIR
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.device_stats import DeviceStats


@runtime_checkable
class DeviceInterface(Protocol):
    """The methods a device has. `compile` takes a tracejit.ir.fuse.Program and returns a plan with
    `.kernels` (each with .name, .source, .cached) that is called as `plan(args, into=None)` and returns
    the program's outputs as the device's arrays."""

    name: str
    layout: LayoutOptions

    @staticmethod
    def probe() -> tuple[bool, str | None, str]: ...  # (available here, why not, description)

    def compile(self, program): ...
    def from_numpy(self, a): ...  # a host array -> the device's array
    def to_numpy(self, data): ...  # and back (waiting for the work writing it)
    def clone(self, data): ...  # a copy on the device
    def synchronize(self) -> None: ...


@runtime_checkable
class KernelDevice(DeviceInterface, Protocol):
    """What launch_plan.LaunchPlan asks of a device (opencl, cuda, metal, webgpu): its own compiler and
    launches, its memory, its error records. A kernel's `values` are its arguments in parameter order (a
    device array for a buffer, a Python value for a scalar), `bufs[key]` for each buffer key of its
    parameters, in a list of the call's own that the device may change."""

    options: object  # codegen options, with .max_local_size
    sizes: object  # symbolic_sizes.SymbolicSizes

    def build(self, kernel: KernelIR, by_value: frozenset[int], symbolic, options):
        """Render and compile one kernel: (the compiled kernel, with .name, .source, .ir, .launch and
        .cached; what launcher() takes of its binary; the threads per group its registers allow, or None)."""

    def launcher(self, compiled, binary, scalars: list[tuple[int, np.dtype] | None]):
        """The plan's own launcher of one kernel. `scalars`, per parameter: None for a buffer, else (the
        call's argument, its dtype) for a value passed by value."""

    def allocate(self, shape, dtype): ...  # a device array from the pool
    def upload_span(self, a, desc):
        ...  # the memory a kernel reads of a host array, uploaded
        #   (a device array, or what launches take of one)

    def error_record(self): ...  # a zeroed fault record for one call (faults.py)
    def read_record(self, record): ...  # its bytes, once the call's kernels are done

    def enqueue(self, launches: list, bufs: dict, error) -> None:
        """Launch a call's kernels, (launcher, the buffer keys of its parameters) each, in order without
        waiting, the call's error record (or None) given to those that can fault. Threads enqueue calls
        of one plan at once."""

    def timed(self, launcher, values, error) -> float | None:
        """Launch one kernel and wait for it: its seconds by the device's clock, None where there is none."""

    def bound(self, launcher, values):
        """For graph capture: the kernel's launch with these arguments for good, as replay() takes it."""

    def replay(self, launches) -> None: ...  # captured launches, again, without waiting


class Device(DeviceStats):
    """The base of every device: the capabilities a device may have, off unless it says otherwise, and
    the counters and memory limit of DeviceStats."""

    name: str
    layout: LayoutOptions = LayoutOptions()
    runs = True  # kernels run here (False: a target that only compiles: lower, warm)
    returns_numpy = False  # calls return NumPy arrays, not tj.Arrays (numba: host memory)
    inner_sizes_as_arguments = False  # row lengths and loop extents can be arguments of its code (symbolic_sizes)
    binds_one_buffer_twice = True  # one buffer may be bound to two parameters of a kernel (not WebGPU's rule)
    computes_int64 = True  # its kernels compute with 64-bit integers (WGSL has none: only index arithmetic there)
    computes_float64 = True  # it has float64, so complex128 (WGSL and MSL have none)
    keeps_compiled_kernels = True  # compiled kernels go to the disk cache (else no_disk_cache says why)
    no_disk_cache: str | None = None
    # a static (suffix) -> compile-only target, for a target that compiles without its hardware (cuda: PTX);
    # None from it: the hardware is there
    compile_only: Callable[[str | None], Device | None] | None = None
    imports_foreign = False  # takes another library's GPU arrays without a copy (import_foreign)

    @staticmethod
    def default_is_gpu() -> bool:
        """Whether the device this target opens by default is a GPU (automatic selection, select_device)."""
        return False

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this target can tell cheaply that there is no GPU for it (no probe needed)."""
        return True

    def element_loop(self, plan):
        """A loop over elements (ir/element_loops.py) as one call on this device, or None: the frontend then runs it
        on the host (runtime/host_loops.py), or where that cannot be, runs its body's kernels once per step."""
        return None

    def tuning_choices(self) -> list:
        """The layout choices autotuning times beside the defaults (runtime/choices.Choice): a GPU-API device's
        work-groups and tiles (choices.simt_candidates), else none unless the device names its own."""
        from tracejit.runtime import choices

        return choices.simt_candidates(self) if isinstance(self, KernelDevice) else []

    def tuning_fingerprint(self) -> dict:
        """What a tuning's winner depends on besides the program: the device as its driver names it."""
        info = cast(Any, self).info  # (every device has one; DeviceInterface does not name it)
        return {
            "name": info.name,
            "vendor": info.vendor,
            "driver": info.driver_version,
            "units": info.compute_units,
            "capability": info.compute_capability,
            "threads": info.max_threads_per_group,
        }

    def build_together(self, kernels: list) -> None:
        """What a GPU-API device's launch plan builds next, one kernel at a time (KernelDevice.build): (kernel IR,
        by_value, symbolic, options) each. A device whose driver pays a cost per program builds them here as one,
        which build() then finds (opencl); by default each is built alone."""

    def library_launch(self, kernel: KernelIR, call, scalars: list[tuple[int, np.dtype] | None]):
        """A GPU-API device whose layout has `library` set (OpenCL on a CPU): a product or sort of the launch plan
        that the host's library runs on the device's memory (ir/library.Call), as (what f.lower() lists for it, the
        launcher its enqueue() runs). Only such a device's programs have library calls."""
        raise InternalError(f"{self.name} runs no library calls, yet its layout asked for them (LayoutOptions.library)")

    def prepare_replay(self, launches):
        """A captured graph's launches, final before its first replay, in the form replay() takes."""
        return launches
