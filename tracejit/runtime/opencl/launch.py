"""One kernel of a launch plan on an OpenCL device (runtime/opencl/device.py): its kernel object with the argument
types set once, a call's arguments for it, its time by the queue's profiling, its binding for capture."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, cast

import numpy as np

from tracejit.codegen.simt.mapping import RenderOptions, by_value_dtype
from tracejit.errors import DeviceError
from tracejit.runtime.device_memory import Buffer

if TYPE_CHECKING:   # (device.py imports this module)
    from tracejit.runtime.opencl.device import DeviceBuffer


class Launcher:
    """A kernel object of one plan (each holds its own arguments), its sizes and its argument types."""

    __slots__ = ("compiled", "kernel", "types", "arrays", "takes_error", "trailing", "global_size", "local_size",
                 "lock")

    def __init__(self, compiled, kernel, scalars: list, options: RenderOptions):
        launch = compiled.launch
        self.compiled, self.kernel = compiled, kernel
        self.types = [None if s is None else np.dtype("uint8") if s[1] == np.bool_ else by_value_dtype(s[1], options)
                      for s in scalars]
        self.arrays = [j for j, s in enumerate(scalars) if s is None]
        self.takes_error = launch.error_flag
        if launch.error_flag:
            self.types.append(None)
        self.types += launch.trailing_dtypes()   # symbolic sizes, the bounds check's limit
        kernel.set_scalar_arg_dtypes(self.types)
        self.trailing = launch.trailing()
        self.global_size, self.local_size = (launch.global_items,), (launch.local_size,)
        # the kernel object is shared: setting a call's arguments and enqueueing it is one step, or a thread
        # could enqueue with the arguments another thread set meanwhile (its results never written)
        self.lock = threading.Lock()

    def arguments(self, values: list, error) -> list:
        """The kernel's arguments: `values` (changed in place) with the cl buffers of its arrays, the error
        record where it takes one, the trailing sizes."""
        for j in self.arrays:
            v = values[j]
            if isinstance(v, Buffer):   # a device array (this device's); an upload of the call is its cl buffer already
                values[j] = cast("DeviceBuffer", v).buf
        if self.takes_error:
            values.append(error)
        values += self.trailing
        return values

    def refused(self, device: str, e: Exception) -> DeviceError:
        launch = self.compiled.launch
        return DeviceError(f"{device} refused to launch kernel {self.compiled.name} ({launch.global_items} "
                           f"work-items in groups of {launch.local_size}): {e}")

    def bound(self, values: list) -> tuple:
        """For graph capture: a kernel object of its own with these arguments set for good, as
        (kernel, global size, local size, arguments)."""
        import pyopencl as cl
        own = cl.Kernel(self.kernel.get_info(cl.kernel_info.PROGRAM), self.kernel.function_name)
        own.set_scalar_arg_dtypes(self.types)
        call = self.arguments(values, None)
        own.set_args(*call)
        return own, self.global_size, self.local_size, call


def profiled_seconds(event) -> float | None:
    """Wait for one launch; its seconds by the device's clock (the queue profiles its commands), or None
    from a driver that keeps no times."""
    import pyopencl as cl
    event.wait()
    try:
        return (event.profile.end - event.profile.start) * 1e-9
    except cl.Error:
        return None
