"""Launch plans on a CUDA GPU: each kernel's arguments packed once (a ctypes holder per argument and the
void* array cuLaunchKernel reads, updated in place per call), and captured launch lists as CUDA graphs."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np

from ..codegen.simt import by_value_dtype
from ..errors import DeviceError, UnsupportedError
from ..ir.fuse import Program
from . import cuda_driver as cu
from . import emulator, profiler
from .array import Array
from .faults import CAPTURE_REFUSED, RECORD_WORDS, raise_recorded
from .scalars import check_int_scalars

VECTOR_ALIGN = 16
# scalar arguments by value, as the kernels declare them (bool as a byte, float16 as its bits)
SCALAR_CTYPES = {np.dtype(k): v for k, v in {
    "bool": ctypes.c_uint8, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "float16": ctypes.c_uint16, "float32": ctypes.c_float, "float64": ctypes.c_double}.items()}


def _holder_type(dtype: np.dtype | None):
    return ctypes.c_uint64 if dtype is None else SCALAR_CTYPES[np.dtype(dtype)]


def trailing_arguments(compiled) -> list[np.generic]:
    """The by-value arguments a kernel (and its float4 variant: the same symbolic sizes, see
    codegen.cuda.render) takes after its parameters and error record: its symbolic sizes, then the bounds
    check's limit where either variant has one."""
    launches = [compiled.launch] + ([compiled.vector[3]] if compiled.vector else [])
    sized = [launch for launch in launches if launch.size is not None]
    size = [sized[0].size_dtype.type(sized[0].size)] if sized else []
    return [np.dtype(dt).type(v) for dt, v in compiled.launch.symbolic] + size


def _timed(dev, c, launch) -> None:
    """One launch, waited for and reported: timed by CUDA events on a GPU, by the host around the
    synchronised launch on the emulator (whose driver keeps no event times)."""
    d = cu.driver()
    t0 = time.perf_counter()
    seconds, clock = None, "wall"
    if not emulator.emulates("cuda"):
        flags = d.CUevent_flags.CU_EVENT_DEFAULT.value
        start = cu.check(d.cuEventCreate(flags), "cuEventCreate")
        stop = cu.check(d.cuEventCreate(flags), "cuEventCreate")
        try:
            cu.check(d.cuEventRecord(start, dev.stream), "cuEventRecord")
            launch.run(dev.stream)
            cu.check(d.cuEventRecord(stop, dev.stream), "cuEventRecord")
            cu.check(d.cuEventSynchronize(stop), "cuEventSynchronize")
            seconds, clock = cu.check(d.cuEventElapsedTime(start, stop), "cuEventElapsedTime") * 1e-3, "device"
        finally:
            d.cuEventDestroy(start)
            d.cuEventDestroy(stop)
    else:
        launch.run(dev.stream)
        dev.synchronize()
    end = time.perf_counter()
    seconds = end - t0 if seconds is None else seconds
    profiler.launched(dev.name, c.name, end - seconds, end, sum(p.size * p.dtype.itemsize for p in c.ir.params),
                      launch.grid, launch.block, clock,
                      f"{c.launch.mode} mode, {c.launch.global_items} threads in blocks of {c.launch.local_size}")


class BoundLaunch:
    """One kernel launch with its argument array built once; calls only change the held values."""

    __slots__ = ("kernel", "fn", "grid", "block", "vector_fn", "vector_grid", "vector_block", "vector_params",
                 "holders", "params", "address", "buffers", "scalars", "pointers", "driver")

    def __init__(self, compiled, fn, vector_fn, arg_dtypes: list):
        self.kernel, self.fn = compiled, fn
        self.driver = cu.driver()   # a plan lives on one device, emulated or not: looked up once
        launch = compiled.launch
        self.block = launch.local_size
        self.grid = launch.global_items // launch.local_size
        self.vector_fn, self.vector_params = vector_fn, compiled.vector_params
        self.vector_grid = self.vector_block = 0
        if vector_fn is not None:   # its own launch shape: a quarter of the threads, in blocks of their own size
            v = compiled.vector[3]
            self.vector_grid, self.vector_block = v.global_items // v.local_size, v.local_size
        self.scalars = arg_dtypes                                # None for a pointer, else the scalar's dtype
        self.holders = [_holder_type(dt)() for dt in arg_dtypes]
        self.params = (ctypes.c_void_p * max(1, len(self.holders)))(*[ctypes.addressof(h) for h in self.holders])
        self.address = ctypes.addressof(self.params)
        self.buffers: dict[int, cu.DeviceBuffer] = {}            # position -> device buffer (capture, sharing)
        self.pointers = [0] * len(arg_dtypes)
        trailing = trailing_arguments(compiled)
        for holder, value in zip(self.holders[len(self.holders) - len(trailing):], trailing):
            holder.value = value.item()

    def set_buffer(self, pos: int, buf: cu.DeviceBuffer) -> None:
        ptr = buf.lowest()   # kernels index a strided array from its lowest address
        self.holders[pos].value = ptr
        self.pointers[pos] = ptr
        self.buffers[pos] = buf

    def set_pointer(self, pos: int, ptr: int, owner) -> None:
        """Point argument `pos` at other memory of the same size (shared capture memory)."""
        old = self.buffers[pos]
        self.set_buffer(pos, cu.DeviceBuffer(ptr, old.shape, old.dtype, owner))

    def set_scalar(self, pos: int, value) -> None:
        dt = self.scalars[pos]
        if dt == np.float16:
            value = int(np.float16(value).view(np.uint16))
        elif dt == np.bool_:
            value = int(bool(value))
        self.holders[pos].value = value

    def run(self, stream) -> None:
        d = self.driver
        if self.vector_fn is not None and all(self.pointers[p] % VECTOR_ALIGN == 0 for p in self.vector_params):
            fn, grid, block = self.vector_fn, self.vector_grid, self.vector_block
        else:
            fn, grid, block = self.fn, self.grid, self.block
        (err,) = d.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, self.address, 0)
        if err != d.CUresult.CUDA_SUCCESS:
            raise DeviceError(f"CUDA refused to launch kernel {self.kernel.name} ({grid} blocks of {block} "
                                 f"threads): {cu.error_text(err)}")


class CudaPlan:
    """A compiled program on one GPU: uploads host arguments, allocates results from the pool, launches
    each kernel on the device's stream, and returns device arrays without waiting."""

    def __init__(self, device, program: Program, compiled):
        self.device, self.program = device, program
        self.kernels = [c for c, _, _ in compiled]
        self._compiled = []
        for (c, fn, vfn), keys in zip(compiled, program.launches):
            dtypes = [None] * len(keys)
            for j in c.launch.by_value:
                dtypes[j] = by_value_dtype(program.buffers[keys[j]].dtype, device.options)
            if c.launch.error_flag:
                dtypes.append(None)
            # symbolic sizes and the bounds check's limit, last (one list for both variants)
            dtypes += [v.dtype for v in trailing_arguments(c)]
            self._compiled.append((c, fn, vfn, keys, dtypes))
        self._launches = [BoundLaunch(c, fn, vfn, dtypes) for c, fn, vfn, _, dtypes in self._compiled]
        self._inputs = [(k, b) for k, b in program.buffers.items() if k[0] == "in"]
        self._allocs = [(k, b.shape, b.dtype) for k, b in program.buffers.items() if k[0] != "in"]
        self._lock = threading.Lock()   # the packed arguments are shared: one call at a time sets and launches
        self._driver = cu.driver()

    def _buffers(self, args, dev, into=None) -> tuple[dict, dict]:
        bufs, staged, results = {}, {}, {}
        for key, desc in self._inputs:
            a = args[key[1]]
            if desc.shape == ():  # by value
                bufs[key] = a.numpy().reshape(()).item() if type(a) is Array else np.asarray(a).item()
            elif type(a) is Array and a.device is dev:
                # an empty foreign array may have no memory at all: kernels get a valid address anyway
                bufs[key] = a._data if a._data.size else dev.allocate(desc.shape, desc.dtype)
            else:
                host = a.numpy() if type(a) is Array else a
                if id(host) not in staged:
                    staged[id(host)] = dev.upload_span(host, desc)
                bufs[key] = staged[id(host)]
        for key, shape, dtype in self._allocs:
            results[key] = bufs[key] = into[key] if into and key in into else dev.allocate(shape, dtype)
        return bufs, results

    @staticmethod
    def _set(launch: BoundLaunch, keys, bufs) -> None:
        for pos, key in enumerate(keys):
            value = bufs[key]
            if launch.scalars[pos] is None:
                launch.set_buffer(pos, value)
            else:
                launch.set_scalar(pos, value)

    def __call__(self, args, into=None) -> list:
        """Run; `into` maps output buffer keys to device arrays to write those results into."""
        with self._lock:
            return self._call(args, into)

    def _call(self, args, into) -> list:
        dev, prog = self.device, self.program
        check_int_scalars(prog.int_scalars, args)
        dev._make_current()
        bufs, results = self._buffers(args, dev, into)
        dev.launches += len(self._launches)
        d = self._driver
        timed = profiler.timing()
        for launch, (c, _, _, keys, _) in zip(self._launches, self._compiled):
            self._set(launch, keys, bufs)
            if c.launch.error_flag:
                err = dev.error_record()   # the call's own: plans run at once in other threads zero and read theirs
                cu.check(d.cuMemsetD32Async(err.ptr, 0, RECORD_WORDS, dev.stream), "cuMemsetD32Async")
                launch.set_buffer(len(keys), err)
            if timed:
                _timed(dev, c, launch)
            else:
                launch.run(dev.stream)
            if c.launch.error_flag:
                raise_recorded([c.ir], dev.to_numpy(err))
        return [results[k] for k in prog.outputs]

    def bind(self, args):
        """For graph capture: fresh outputs and temporaries, and each kernel's launch with its own
        packed arguments; launches nothing. Array arguments are already on this GPU."""
        dev, prog = self.device, self.program
        check_int_scalars(prog.int_scalars, args)
        dev._make_current()
        bufs, results = self._buffers(args, dev)
        launches = []
        for c, fn, vfn, keys, dtypes in self._compiled:
            if c.launch.error_flag:
                raise UnsupportedError(CAPTURE_REFUSED.format(name=c.name, device=dev.name))
            launch = BoundLaunch(c, fn, vfn, dtypes)
            self._set(launch, keys, bufs)
            launches.append(launch)
        return [results[k] for k in prog.outputs], launches, list(results.values())


class CudaGraph:
    """Captured launches as one CUDA graph (recorded by stream capture), launched with one driver call."""

    def __init__(self, device, launches: list[BoundLaunch]):
        d = cu.driver()
        self.device, self.launches = device, launches   # the launches keep their memory alive
        device._make_current()
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        cu.check(d.cuStreamBeginCapture(device.stream, mode), "cuStreamBeginCapture")
        try:
            for launch in launches:
                launch.run(device.stream)
        finally:
            graph = cu.check(d.cuStreamEndCapture(device.stream), "cuStreamEndCapture")
        self.graph = graph
        self.exec = cu.check(d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def __len__(self) -> int:
        return len(self.launches)

    def __iter__(self):
        return iter(self.launches)

    def launch(self) -> None:
        d = cu.driver()
        cu.check(d.cuGraphLaunch(self.exec, self.device.stream), "cuGraphLaunch")

    def __del__(self):
        try:
            d = cu.driver()
            d.cuGraphExecDestroy(self.exec)
            d.cuGraphDestroy(self.graph)
        except Exception:
            pass
