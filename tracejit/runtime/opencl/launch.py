"""Launches on an OpenCL device: a plan's kernel object with the argument types set once, a call's arguments
for it, its time by the queue's profiling, its binding for capture and replay, the fault records."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tracejit.codegen.simt.mapping import RenderOptions, by_value_dtype
from tracejit.errors import DeviceError
from tracejit.runtime.device_memory import Buffer

from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS
from tracejit.runtime.opencl.host_calls import HostCall, host_kernel

if TYPE_CHECKING:  # (pyopencl is imported where used: the device is opened on demand)
    import pyopencl as cl

    from tracejit.runtime.opencl.compiler import OpenCLKernel
    from tracejit.runtime.opencl.memory import DeviceBuffer


class Launcher:
    """A kernel object of one plan (each holds its own arguments), its sizes and its argument types."""

    __slots__ = (
        "compiled",
        "kernel",
        "types",
        "arrays",
        "takes_error",
        "trailing",
        "global_size",
        "local_size",
        "lock",
    )

    def __init__(self, compiled, kernel, scalars: list, options: RenderOptions):
        launch = compiled.launch
        self.compiled, self.kernel = compiled, kernel
        self.types = [
            None if s is None else np.dtype("uint8") if s[1] == np.bool_ else by_value_dtype(s[1], options)
            for s in scalars
        ]
        self.arrays = [j for j, s in enumerate(scalars) if s is None]
        self.takes_error = launch.error_flag
        if launch.error_flag:
            self.types.append(None)
        self.types += launch.trailing_dtypes()  # symbolic sizes, the bounds check's limit
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
            if isinstance(v, Buffer):  # a device array (this device's); an upload of the call is its cl buffer already
                values[j] = cast("DeviceBuffer", v).buf
        if self.takes_error:
            values.append(error)
        values += self.trailing
        return values

    def refused(self, device: str, e: Exception) -> DeviceError:
        launch = self.compiled.launch
        return DeviceError(
            f"{device} refused to launch kernel {self.compiled.name} ({launch.global_items} "
            f"work-items in groups of {launch.local_size}): {e}"
        )

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


class OpenCLLaunches:
    """Enqueues a plan's kernels (a role of OpenCLDevice, which sets these attributes; _allocate: OpenCLMemory's)."""

    name: str
    queue: cl.CommandQueue
    options: RenderOptions
    launches: int
    _allocate: Callable[[int], Any]

    def replay(self, launches) -> None:
        """Kernels with their arguments set once, enqueued back to back."""
        import pyopencl as cl

        enqueue, queue = cl.enqueue_nd_range_kernel, self.queue
        self.launches += len(launches)
        for knl, global_size, local_size, values in launches:
            if global_size is None:  # a library call on the host (host_calls.py)
                knl(queue, values)
            else:
                enqueue(queue, knl, global_size, local_size)

    def launcher(self, c: OpenCLKernel, knl, scalars: list) -> Launcher:
        return Launcher(c, knl, scalars, self.options)

    def library_launch(self, kernel, call, scalars: list):
        """A product or sort the host's library runs on the mapped buffers (a CPU device: host_calls.py)."""
        return host_kernel(kernel, call), HostCall(kernel, call, scalars)

    def enqueue(self, launches, bufs, error) -> None:
        for launcher, keys in launches:
            self._enqueue(launcher, [bufs[k] for k in keys], error)

    def timed(self, launcher: Launcher | HostCall, values, error) -> float | None:
        if isinstance(launcher, HostCall):  # (its time is the host's: the plan's wall clock)
            launcher(self.queue, values)
            return None
        return profiled_seconds(self._enqueue(launcher, values, error))

    def _enqueue(self, launcher: Launcher | HostCall, values, error):
        """One kernel on the queue; its event (None: a library call, run on the host when the queue reached it)."""
        if isinstance(launcher, HostCall):
            launcher(self.queue, values)
            return None
        call = launcher.arguments(values, error)
        try:
            with launcher.lock:  # the kernel object's arguments are set and enqueued in one step
                return launcher.kernel(self.queue, launcher.global_size, launcher.local_size, *call)
        except Exception as e:
            import pyopencl as cl  # not before: an import on every call costs the hot path

            if isinstance(e, cl.Error):
                raise launcher.refused(self.name, e) from None
            raise

    def bound(self, launcher: Launcher | HostCall, values) -> tuple:
        if isinstance(launcher, HostCall):  # (replay runs it on the host in its turn, on these cl buffers)
            return launcher, None, None, [cast("DeviceBuffer", v).buf if isinstance(v, Buffer) else v for v in values]
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
