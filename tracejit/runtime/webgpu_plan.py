"""A compiled program on the webgpu device (webgpu_device.py): a call that uploads, allocates from the pool,
encodes every kernel's dispatch into one command encoder and submits it, the uniforms that carry scalars and
sizes, graph-capture binding, and each dispatch timed inside tj.profile()."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DeviceError, DtypeError, UnsupportedError
from ..ir.fuse import Program
from . import profiler
from .device_memory import Buffer, gather_inputs
from .faults import CAPTURE_REFUSED, RECORD_BYTES, RECORD_WORDS, raise_recorded
from .scalars import check_int_scalars

if TYPE_CHECKING:
    from .webgpu_device import CompiledKernel, WebGPUDevice


def _uniform_words(launch) -> np.ndarray:
    """A launch's by-value arguments after the scalars (Launch.trailing) as 32-bit uniform words: floats as
    float32 bits, integers as int32 or uint32 (index values are i32 in WGSL)."""
    words = [np.array(v, {"f": np.float32, "i": np.int32, "u": np.uint32}[v.dtype.kind]).view(np.uint32)
             for v in launch.trailing()]
    return np.array(words, np.uint32)


class _Launch:
    """One dispatch: pipeline, bound buffers (rebound when capture shares memory), workgroup counts."""

    __slots__ = ("pipeline", "layout", "buffers", "bind_group", "groups")

    def __init__(self, pipeline, layout, buffers: list, groups):
        self.pipeline, self.layout, self.buffers, self.groups = pipeline, layout, buffers, groups
        self.bind_group = None

    def bind(self, dev: "WebGPUDevice") -> None:
        entries = []
        for i, b in enumerate(self.buffers):
            block = b.block if isinstance(b, Buffer) else b   # an array, else a pool block
            entries.append({"binding": i, "resource": {"buffer": block.buffer, "offset": 0, "size": block.nbytes}})
        self.bind_group = dev.device.create_bind_group(layout=self.layout, entries=entries)


class WebGPUPlan:
    """A compiled program: uploads host arguments, allocates results from the pool, encodes every
    kernel into one command encoder and submits it; results stay on the device."""

    def __init__(self, device: "WebGPUDevice", program: Program, compiled: list["CompiledKernel"]):
        self.device, self.program, self.kernels = device, program, compiled
        self._inputs = [(k, b) for k, b in program.buffers.items() if k[0] == "in"]
        self._allocs = [(k, b.shape, b.dtype) for k, b in program.buffers.items() if k[0] != "in"]
        self._size_uniforms: dict[str, object] = {}   # kernel name -> its uniform when that holds only its size

    def _buffers(self, args, into=None):
        dev = self.device
        bufs = gather_inputs(dev, self._inputs, args)
        results = {}
        for key, shape, dtype in self._allocs:
            results[key] = bufs[key] = into[key] if into and key in into else dev.allocate(shape, dtype)
        return bufs, results

    def _launches(self, bufs, error=None) -> list[_Launch]:
        dev, out = self.device, []
        for c, keys in zip(self.kernels, self.program.launches):
            r = c.rendered
            pipeline, layout = dev._pipelines[r.source]
            bound = [bufs[keys[p]] for p in r.buffers]
            if r.uniform:
                bound.append(self._uniform(r, keys, bufs))
            if r.launch.error_flag:
                bound.append(error)
            bound += [dev.table_buffer(t) for t in r.tables]
            launch = _Launch(pipeline, layout, bound, r.groups)
            launch.bind(dev)
            out.append(launch)
        return out

    def _uniform(self, r, keys, bufs):
        """The uniform of one dispatch: its scalar arguments, then the bounds check's limit. One holding only
        the limit is the same for every call of the plan: written once and kept, and published only once
        written (a thread that found it unwritten could submit first, and its kernel would read a recycled
        uniform's stale limit: rows left unwritten, a wrong answer)."""
        fixed = _uniform_words(r.launch)   # symbolic sizes and the bounds check's limit, after the scalars
        members = len(r.scalars) + len(fixed)
        values = np.zeros(max(4, -(-members // 4) * 4), np.uint32)
        values[len(r.scalars):members] = fixed
        if not r.scalars:
            block = self._size_uniforms.get(r.name)
            if block is None:
                block = self.device.uniforms.allocate(values.nbytes)
                self.device.device.queue.write_buffer(block.buffer, 0, values)
                block = self._size_uniforms.setdefault(r.name, block)
            return block
        for m, p in enumerate(r.scalars):
            v = bufs[keys[p]]
            kind = self.program.buffers[keys[p]].dtype.kind
            try:
                values[m] = np.array(v, {"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.uint32}[kind]
                                     ).view(np.uint32)
            except OverflowError:
                raise DtypeError(f"the Python integer {v} (argument {keys[p][1]}) does not fit int32, the widest "
                                 f"integer on {self.device.name} (WGSL has no 64-bit types); use another "
                                 "device") from None
        block = self.device.uniforms.allocate(values.nbytes)
        self.device.device.queue.write_buffer(block.buffer, 0, values)
        return block

    def __call__(self, args, into=None):
        """Run; `into` maps output buffer keys to device arrays to write those results into."""
        dev = self.device
        check_int_scalars(self.program.int_scalars, args)
        bufs, results = self._buffers(args, into)
        error = None
        if any(c.rendered.launch.error_flag for c in self.kernels):
            error = dev.pool.allocate(RECORD_BYTES)   # the call's own: a shared one is zeroed and read by others
            dev.device.queue.write_buffer(error.buffer, 0, np.zeros(RECORD_WORDS, np.int32))
        launches = self._launches(bufs, error)   # a DtypeError for a scalar argument WGSL cannot hold
        timed = profiler.timing()
        try:
            for c, group in zip(self.kernels, [[launch] for launch in launches]) if timed else [(None, launches)]:
                t0 = time.perf_counter()
                dev._submit(group)
                if timed:   # each kernel submitted on its own and waited for
                    dev.synchronize()
                    x, y = c.rendered.groups
                    profiler.launched(dev.name, c.name, t0, time.perf_counter(),
                                      sum(p.size * p.dtype.itemsize for p in c.ir.params), x * y,
                                      c.rendered.launch.local_size)
        except Exception as e:
            raise DeviceError(f"{dev.name} refused to run {', '.join(c.name for c in self.kernels)}: {e}") from None
        if error is not None:   # one record for all the kernels of the call
            raise_recorded([c.ir for c in self.kernels], dev.device.queue.read_buffer(error.buffer, 0, RECORD_BYTES))
        return [results[k] for k in self.program.outputs]

    def bind(self, args):
        """For graph capture: fresh outputs and temporaries, and each kernel's dispatch with its buffers
        bound once; submits nothing."""
        check_int_scalars(self.program.int_scalars, args)
        if any(c.rendered.launch.error_flag for c in self.kernels):
            raise UnsupportedError(CAPTURE_REFUSED.format(name=self.kernels[0].name, device=self.device.name))
        bufs, results = self._buffers(args)
        return [results[k] for k in self.program.outputs], self._launches(bufs), list(results.values())
