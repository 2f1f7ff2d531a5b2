"""Matrix products and sorts of an OpenCL device on a CPU, run by the host's libraries (ir/library.py), as on the
numba device: MKL's or NumPy's BLAS and NumPy's sort on the device's own buffers, mapped into the host's memory.

A CPU OpenCL implementation (PoCL) keeps its buffers in the host's memory, so mapping one is a pointer, not a copy;
its compiler vectorises generated loops well but no generated product came near BLAS there (a 1024^3 float32
product: 91 ms generated, 5 ms by MKL on the same two cores). The launch plan's kernel for such a node is a
`HostCall`: when the device's queue reaches it, the kernel's buffers are mapped, which waits for the kernels before
it, the library call writes its result through the mapped views (numba's library_kernel: the same code), and the
buffers are unmapped before the next kernel is enqueued. The kernel IR stays the reference (a GPU renders it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from tracejit.ir import library
from tracejit.ir.kernel_ir import KernelIR
from tracejit.runtime.numba import library as host_library


@dataclass(frozen=True)
class HostLaunch:
    """A host call's launch, as the launch plan reads a kernel's: no work-items, no error record."""

    error_flag: bool = False
    local_size: int = 1
    global_items: int = 1
    mode: str = "host"


@dataclass(frozen=True)
class HostKernel:
    """What f.lower() lists for a host call: its name, a source line saying what runs it, the kernel IR it
    replaces."""

    name: str
    source: str
    ir: KernelIR
    launch: HostLaunch = HostLaunch()
    cached: bool = False  # (nothing loaded: counted as a library call, Kernel._counted)


class HostCall:
    """One library call of a plan: `scalars`, per parameter, None for a buffer, else (argument, dtype) for a value
    passed by value (an array of one element for the library)."""

    def __init__(self, kernel: KernelIR, call: library.Call, scalars: list):
        self.run = host_library.library_kernel(call)
        self.dtypes = [None if s is None else np.dtype(s[1]) for s in scalars]
        # the bytes of each parameter's array (a pooled buffer may be larger: its size is rounded)
        self.nbytes = [p.size * np.dtype(p.dtype).itemsize for p in kernel.params]

    def __call__(self, queue, values: list) -> None:
        import pyopencl as cl

        arrays, maps, by_buffer = [], [], {}
        flags = cl.map_flags.READ | cl.map_flags.WRITE
        try:
            for v, dtype, nbytes in zip(values, self.dtypes, self.nbytes):
                if dtype is not None:
                    arrays.append(np.asarray(v, dtype).reshape(1))
                    continue
                buf = getattr(v, "buf", v)  # (a DeviceBuffer, or a call's upload: its cl buffer)
                if buf is None or not nbytes:  # an empty array
                    arrays.append(np.empty(0, np.uint8))
                    continue
                if id(buf) not in by_buffer:  # (one buffer passed twice: mapped once, all of it)
                    maps.append(_map(queue, buf, flags))
                    by_buffer[id(buf)] = maps[-1][0]
                arrays.append(by_buffer[id(buf)][:nbytes])
            # One wait for all: the queue is in order, so the last map is done once every kernel before this
            # call and every map is. A finish and a blocking map each cost PoCL a round trip to its worker
            # thread, more than a small product itself (docs/guide/devices/opencl.md)
            if maps:
                maps[-1][1].wait()
            else:
                queue.finish()
            self.run(*arrays)
        finally:
            for mapped, _ in maps:
                cast(Any, mapped.base).release(queue)  # (the MemoryMap behind the array)


def _map(queue, buf, flags) -> tuple:
    """All of a buffer, mapped into the host's memory as bytes (a pointer on a CPU device), and the map's
    event: the array is the buffer's once the event is complete."""
    import pyopencl as cl

    mapped, event = cast(Any, cl).enqueue_map_buffer(queue, buf, flags, 0, (buf.size,), np.uint8, is_blocking=False)
    return mapped, event


def host_kernel(kernel: KernelIR, call: library.Call) -> HostKernel:
    return HostKernel(kernel.name, host_library.library_source(call), kernel)
