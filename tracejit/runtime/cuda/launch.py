"""Launches on a CUDA GPU: each kernel's arguments packed once (a ctypes holder per argument and the void*
array cuLaunchKernel reads, updated in place per call), a launch timed by CUDA events, captured launch
lists as CUDA graphs, the fault records; and the device's role that launches on its stream (CUDALaunches)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tracejit.codegen.simt.mapping import RenderOptions, by_value_dtype
from tracejit.errors import DeviceError
from tracejit.runtime import emulator
from tracejit.runtime.cache.key import SHARED_NAME
from tracejit.runtime.cuda import driver as cu
from tracejit.runtime.faults import RECORD_WORDS

if TYPE_CHECKING:
    from tracejit.runtime.cuda.compiler import CUDAKernel

VECTOR_ALIGN = 16
# scalar arguments by value, as the kernels declare them (bool as a byte, float16 as its bits)
SCALAR_CTYPES = {
    np.dtype(k): v
    for k, v in {
        "bool": ctypes.c_uint8,
        "int8": ctypes.c_int8,
        "uint8": ctypes.c_uint8,
        "int16": ctypes.c_int16,
        "uint16": ctypes.c_uint16,
        "int32": ctypes.c_int32,
        "uint32": ctypes.c_uint32,
        "int64": ctypes.c_int64,
        "uint64": ctypes.c_uint64,
        "float16": ctypes.c_uint16,
        "float32": ctypes.c_float,
        "float64": ctypes.c_double,
    }.items()
}


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


def argument_dtypes(compiled, scalars: list, options: RenderOptions) -> list:
    """Per argument of a launch, the dtype a by-value one is declared as (None for a pointer): the kernel's
    parameters (see KernelDevice.launcher), its error record, then the trailing arguments."""
    dtypes = [None if s is None else by_value_dtype(s[1], options) for s in scalars]
    if compiled.launch.error_flag:
        dtypes.append(None)
    return dtypes + [v.dtype for v in trailing_arguments(compiled)]  # one list for both variants


def timed_by_events(stream, launch: BoundLaunch, values, error) -> float:
    """Seconds of one launch, by CUDA events (waited for)."""
    d = cu.driver()
    flags = d.CUevent_flags.CU_EVENT_DEFAULT.value
    start = cu.check(d.cuEventCreate(flags), "cuEventCreate")
    stop = cu.check(d.cuEventCreate(flags), "cuEventCreate")
    try:
        cu.check(d.cuEventRecord(start, stream), "cuEventRecord")
        launch.launch(values, error, stream)
        cu.check(d.cuEventRecord(stop, stream), "cuEventRecord")
        cu.check(d.cuEventSynchronize(stop), "cuEventSynchronize")
        return cu.check(d.cuEventElapsedTime(start, stop), "cuEventElapsedTime") * 1e-3
    finally:
        d.cuEventDestroy(start)
        d.cuEventDestroy(stop)


class BoundLaunch:
    """One kernel launch with its argument array built once; calls only change the held values."""

    __slots__ = (
        "kernel",
        "fn",
        "grid",
        "block",
        "vector_fn",
        "vector_grid",
        "vector_block",
        "vector_params",
        "holders",
        "params",
        "address",
        "buffers",
        "scalars",
        "pointers",
        "driver",
        "error_at",
        "lock",
    )

    def __init__(self, compiled, fn, vector_fn, arg_dtypes: list):
        self.kernel, self.fn = compiled, fn
        self.driver = cu.driver()  # a plan lives on one device, emulated or not: looked up once
        launch = compiled.launch
        self.block = launch.local_size
        self.grid = launch.global_items // launch.local_size
        self.vector_fn, self.vector_params = vector_fn, compiled.vector_params
        self.vector_grid = self.vector_block = 0
        if vector_fn is not None:  # its own launch shape: a quarter of the threads, in blocks of their own size
            v = compiled.vector[3]
            self.vector_grid, self.vector_block = v.global_items // v.local_size, v.local_size
        self.scalars = arg_dtypes  # None for a pointer, else the scalar's dtype
        self.holders = [_holder_type(dt)() for dt in arg_dtypes]
        self.params = (ctypes.c_void_p * max(1, len(self.holders)))(*[ctypes.addressof(h) for h in self.holders])
        self.address = ctypes.addressof(self.params)
        self.buffers: dict[int, cu.DeviceBuffer] = {}  # position -> device buffer (capture, sharing)
        self.pointers = [0] * len(arg_dtypes)
        trailing = trailing_arguments(compiled)
        for holder, value in zip(self.holders[len(self.holders) - len(trailing) :], trailing):
            holder.value = value.item()
        self.error_at = len(arg_dtypes) - len(trailing) - 1 if launch.error_flag else None
        self.lock = threading.Lock()  # the held values are shared: one call at a time sets them and launches

    def copy(self) -> BoundLaunch:
        """The same kernel with arguments of its own."""
        return BoundLaunch(self.kernel, self.fn, self.vector_fn, self.scalars)

    def set(self, values, error) -> None:
        """The kernel's arguments in parameter order (device buffers and scalars), and the call's error
        record where the kernel takes one."""
        for pos, value in enumerate(values):
            if self.scalars[pos] is None:
                self.set_buffer(pos, value)
            else:
                self.set_scalar(pos, value)
        if self.error_at is not None and error is not None:
            self.set_buffer(self.error_at, error)

    def launch(self, values, error, stream) -> None:
        with self.lock:
            self.set(values, error)
            self.run(stream)

    def set_buffer(self, pos: int, buf: cu.DeviceBuffer) -> None:
        ptr = buf.lowest()  # kernels index a strided array from its lowest address
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
            raise DeviceError(
                f"CUDA refused to launch kernel {self.kernel.name} ({grid} blocks of {block} "
                f"threads): {cu.error_text(err)}"
            )


class CudaGraph:
    """Captured launches as one CUDA graph (recorded by stream capture), launched with one driver call."""

    def __init__(self, device, launches: list[BoundLaunch]):
        d = cu.driver()
        self.device, self.launches = device, launches  # the launches keep their memory alive
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


class CUDALaunches:
    """Launches a plan's kernels on the stream (a role of CUDADevice, which sets these attributes; the methods are
    the other roles')."""

    stream: Any  # the driver's CUstream
    options: RenderOptions
    launches: int
    _make_current: Callable[[], None]
    synchronize: Callable[[], None]
    _function: Callable[..., Any]
    allocate: Callable[..., cu.DeviceBuffer]
    to_numpy: Callable[[cu.DeviceBuffer], np.ndarray]

    def replay(self, launches) -> None:
        """Recorded launches, one by one, or a CUDA graph of them with one driver call."""
        self._make_current()
        self.launches += len(launches)
        if type(launches) is CudaGraph:
            launches.launch()
            return
        for launch in launches:
            launch.run(self.stream)

    def prepare_replay(self, launches):
        """A graph's launches, final before its first replay, become one CUDA graph."""
        return CudaGraph(self, list(launches)) if launches else launches

    def launcher(self, c: CUDAKernel, fn, scalars: list) -> BoundLaunch:
        vfn = self._function(c.vector[0], c.vector[2], SHARED_NAME) if c.vector else None
        return BoundLaunch(c, fn, vfn, argument_dtypes(c, scalars, self.options))

    def enqueue(self, launches, bufs, error) -> None:
        self._make_current()
        for launch, keys in launches:
            launch.launch([bufs[k] for k in keys], error, self.stream)

    def timed(self, launch: BoundLaunch, values, error) -> float | None:
        """By CUDA events on a GPU; by the host around the synchronised launch on the emulator (whose
        driver keeps no event times)."""
        self._make_current()
        if not emulator.emulates("cuda"):
            return timed_by_events(self.stream, launch, values, error)
        launch.launch(values, error, self.stream)
        self.synchronize()
        return None

    def bound(self, launch: BoundLaunch, values) -> BoundLaunch:
        own = launch.copy()
        own.set(values, None)
        return own

    def error_record(self) -> cu.DeviceBuffer:
        record = self.allocate((RECORD_WORDS,), np.dtype("int32"))
        cu.check(cu.driver().cuMemsetD32Async(record.ptr, 0, RECORD_WORDS, self.stream), "cuMemsetD32Async")
        return record

    def read_record(self, record: cu.DeviceBuffer) -> np.ndarray:
        return self.to_numpy(record)
