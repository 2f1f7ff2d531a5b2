"""A compiled program on one OpenCL device (opencl_device.py): its launches with their argument types
set once, a call that uploads, allocates from the pool and enqueues without waiting, graph-capture
binding, and each launch timed inside tj.profile()."""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from ..codegen.simt import by_value_dtype
from ..errors import DeviceError, UnsupportedError
from ..ir.fuse import Program
from . import profiler
from .array import Array
from .faults import CAPTURE_REFUSED, RECORD_BYTES, RECORD_WORDS, raise_recorded
from .scalars import check_int_scalars

if TYPE_CHECKING:
    from .opencl_device import DeviceBuffer, OpenCLDevice


def _timed(dev: "OpenCLDevice", c, event, t0: float) -> None:
    """Wait for one launch and report its time by the device's clock (the queue profiles its commands),
    else the host's from before the launch."""
    import pyopencl as cl
    event.wait()
    end = time.perf_counter()
    try:
        seconds, clock = (event.profile.end - event.profile.start) * 1e-9, "device"
    except cl.Error:   # a driver that keeps no times
        seconds, clock = end - t0, "wall"
    launch = c.launch
    profiler.launched(dev.name, c.name, end - seconds, end, sum(p.size * p.dtype.itemsize for p in c.ir.params),
                      launch.global_items // launch.local_size, launch.local_size, clock,
                      f"{launch.mode} mode, {launch.global_items} work-items in groups of {launch.local_size}")


class OpenCLPlan:
    """A compiled program on one OpenCL device: uploads host arguments, allocates results from the
    pool, enqueues each kernel in order, and returns device arrays without waiting."""

    def __init__(self, device: "OpenCLDevice", program: Program, compiled):
        self.device, self.program = device, program
        self.kernels = [c for c, _ in compiled]
        self._launches = []
        for (c, knl), keys in zip(compiled, program.launches):
            scalars = [None] * len(keys)
            for j in c.launch.by_value:
                dt = program.buffers[keys[j]].dtype
                scalars[j] = np.dtype("uint8") if dt == np.bool_ else by_value_dtype(dt, device.options)
            if c.launch.error_flag:
                scalars.append(None)
            scalars += c.launch.trailing_dtypes()   # the bounds check's limit, symbolic sizes
            knl.set_scalar_arg_dtypes(scalars)
            self._launches.append((c, knl, keys, scalars, c.launch.trailing()))
        self._inputs = [(k, b) for k, b in program.buffers.items() if k[0] == "in"]
        self._allocs = [(k, b.shape, b.dtype) for k, b in program.buffers.items() if k[0] != "in"]
        # the kernel objects are shared: setting a call's arguments and enqueueing it is one step, or a thread
        # could enqueue with the arguments another thread set meanwhile (its results never written)
        self._lock = threading.Lock()

    def bind(self, args) -> tuple[list[DeviceBuffer], list[tuple], list[DeviceBuffer]]:
        """For graph capture: fresh outputs and temporaries, and for each kernel its own kernel object
        with every argument set once, as (kernel, global size, local size); enqueues nothing. Array
        arguments must already be on this device (a capture owns copies of its inputs)."""
        import pyopencl as cl
        dev, prog = self.device, self.program
        check_int_scalars(prog.int_scalars, args)
        bufs, results = {}, {}
        for key, desc in self._inputs:
            a = args[key[1]]
            if desc.shape == ():
                bufs[key] = a.numpy().reshape(()).item() if type(a) is Array else np.asarray(a).item()
            else:
                bufs[key] = a._data.buf
        for key, shape, dtype in self._allocs:
            results[key] = out = dev.allocate(shape, dtype)
            bufs[key] = out.buf
        launches = []
        for c, knl, keys, scalars, trailing in self._launches:
            if c.launch.error_flag:
                raise UnsupportedError(CAPTURE_REFUSED.format(name=c.name, device=dev.name))
            own = cl.Kernel(knl.get_info(cl.kernel_info.PROGRAM), c.name)
            own.set_scalar_arg_dtypes(scalars)
            call = [bufs[k] for k in keys]
            call += trailing
            own.set_args(*call)
            launches.append((own, (c.launch.global_items,), (c.launch.local_size,), call))
        return [results[k] for k in prog.outputs], launches, list(results.values())

    def __call__(self, args, into=None) -> list[DeviceBuffer]:
        """Run; `into` maps output buffer keys to device arrays to write those results into."""
        import pyopencl as cl
        dev, prog = self.device, self.program
        check_int_scalars(prog.int_scalars, args)
        bufs: dict = {}
        staged: dict[int, object] = {}
        for key, desc in self._inputs:
            a = args[key[1]]
            if desc.shape == ():  # by value
                bufs[key] = a.numpy().reshape(()).item() if type(a) is Array else np.asarray(a).item()
            elif type(a) is Array and a.device is dev:
                bufs[key] = a._data.buf
            else:
                host = a.numpy() if type(a) is Array else a
                if id(host) not in staged:
                    staged[id(host)] = dev.upload_span(host, desc)
                bufs[key] = staged[id(host)]
        results = {}
        for key, shape, dtype in self._allocs:
            results[key] = out = into[key] if into and key in into else dev.allocate(shape, dtype)
            bufs[key] = out.buf
        dev.launches += len(self._launches)
        timed = profiler.timing()
        for c, knl, keys, _, trailing in self._launches:
            launch = c.launch
            call = [bufs[k] for k in keys]
            if launch.error_flag:
                err = dev.error_record()   # the call's own: a shared one is zeroed and read by others
                cl.enqueue_fill_buffer(dev.queue, err, np.int32(0), 0, RECORD_BYTES)
                call.append(err)
            call += trailing
            t0 = time.perf_counter() if timed else 0.0
            try:
                with self._lock:
                    event = knl(dev.queue, (launch.global_items,), (launch.local_size,), *call)
            except cl.Error as e:
                raise DeviceError(f"{dev.name} refused to launch kernel {c.name} ({launch.global_items} work-items "
                                  f"in groups of {launch.local_size}): {e}") from None
            if timed:
                _timed(dev, c, event, t0)
            if launch.error_flag:
                record = np.zeros(RECORD_WORDS, np.int32)
                cl.enqueue_copy(dev.queue, record, err, is_blocking=True)
                raise_recorded([c.ir], record)
        return [results[k] for k in prog.outputs]
