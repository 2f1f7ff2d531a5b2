"""The device interface: what the frontend, the registry and capture use of a device, written down.

Every device (numba, opencl, cuda, webgpu, metal, and a plugin's) is a `Device`: it implements the
methods of `DeviceInterface` and states its optional capabilities as the class attributes below, which
callers read directly instead of probing with getattr. A compile-only target (cuda without a GPU, or
metal and webgpu where none is open) is a Device with `runs = False`.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..ir.layout import LayoutOptions
from .device_stats import DeviceStats


@runtime_checkable
class DeviceInterface(Protocol):
    """The methods a device has. `compile` takes a tracejit.ir.fuse.Program and returns a plan with
    `.kernels` (each with .name, .source, .cached) that is called as `plan(args, into=None)` and returns
    the program's outputs as the device's arrays."""
    name: str
    layout: LayoutOptions

    @staticmethod
    def probe() -> tuple[bool, str | None, str]: ...        # (available here, why not, description)

    def compile(self, program): ...
    def from_numpy(self, a): ...                              # a host array -> the device's array
    def to_numpy(self, data): ...                             # and back (waiting for the work writing it)
    def clone(self, data): ...                                # a copy on the device
    def synchronize(self) -> None: ...


class Device(DeviceStats):
    """The base of every device: the capabilities a device may have, off unless it says otherwise, and
    the counters and memory limit of DeviceStats."""
    name: str
    layout: LayoutOptions = LayoutOptions()
    runs = True                      # kernels run here (False: a target that only compiles: lower, warm)
    returns_numpy = False            # calls return NumPy arrays, not tj.Arrays (numba: host memory)
    inner_sizes_as_arguments = False # row lengths and loop extents can be arguments of its code (size_templates)
    binds_one_buffer_twice = True    # one buffer may be bound to two parameters of a kernel (not WebGPU's rule)
    keeps_compiled_kernels = True    # compiled kernels go to the disk cache (else no_disk_cache says why)
    no_disk_cache: str | None = None
    # a static (suffix) -> compile-only target, for a target that compiles without its hardware (cuda: PTX)
    compile_only = None
    imports_foreign = False          # takes another library's GPU arrays without a copy (import_foreign)

    @staticmethod
    def default_is_gpu() -> bool:
        """Whether the device this target opens by default is a GPU (automatic selection, select_device)."""
        return False

    @staticmethod
    def maybe_gpu() -> bool:
        """False when this target can tell cheaply that there is no GPU for it (no probe needed)."""
        return True

    def prepare_replay(self, launches):
        """A captured graph's launches, final before its first replay, in the form replay() takes."""
        return launches
