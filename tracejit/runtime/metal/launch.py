"""Launches on the metal device: what goes at each [[buffer(i)]] of a kernel's dispatch, by-value arguments as
Metal holds them, every dispatch of a call in one command buffer, replay, the fault records."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tracejit.codegen.simt.mapping import RenderOptions, by_value_dtype
from tracejit.runtime.device_memory import Block, BlockPool
from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS
from tracejit.runtime.metal.memory import DeviceBuffer

if TYPE_CHECKING:
    from tracejit.runtime.metal.compiler import MetalKernel


class Dispatch:
    """One dispatch: pipeline, what goes at each [[buffer(i)]] (a DeviceBuffer, a Block, or the bytes of a
    scalar), threadgroups and their size (ints, or (x, y, z) for a RawKernel)."""

    __slots__ = ("pipeline", "buffers", "groups", "local")

    def __init__(self, pipeline, buffers: list, groups, local):
        self.pipeline, self.buffers, self.groups, self.local = pipeline, buffers, groups, local


class Launcher:
    """A kernel of one plan: its pipeline, the types its scalars are passed as, its sizes' bytes."""

    __slots__ = ("compiled", "pipeline", "scalars", "takes_error", "trailing", "groups", "local")

    def __init__(self, compiled, pipeline, scalars: list, options: RenderOptions):
        launch = compiled.launch
        self.compiled, self.pipeline = compiled, pipeline
        # no double, float16 as float (see by_value_dtype), bool as a byte
        self.scalars = [
            (j, np.dtype("uint8") if s[1] == np.bool_ else by_value_dtype(s[1], options))
            for j, s in enumerate(scalars)
            if s is not None
        ]
        self.takes_error = launch.error_flag
        self.trailing = [v.tobytes() for v in launch.trailing()]  # symbolic sizes, the bounds check's limit
        self.groups, self.local = launch.global_items // launch.local_size, launch.local_size

    def dispatch(self, values: list, error) -> Dispatch:
        """The kernel's dispatch with these arguments (`values`, changed in place)."""
        for j, dt in self.scalars:
            values[j] = np.asarray(values[j], dt).tobytes()
        if self.takes_error:
            values.append(error)
        values += self.trailing
        return Dispatch(self.pipeline, values, self.groups, self.local)


class MetalLaunches:
    """Encodes and commits a plan's dispatches (a role of MetalDevice, which sets these attributes and _wait())."""

    name: str
    Metal: Any  # PyObjC's Metal module, or the emulator's
    objc: Any
    queue: Any  # the MTLCommandQueue
    options: RenderOptions
    pool: BlockPool
    launches: int
    _committed: int
    _last: Any
    _commits: threading.Lock
    _wait: Callable[[], None]
    _write: Callable[[Block, np.ndarray], None]
    _memory: Callable[[Block, int], np.ndarray]

    # -- encoding --
    def _submit(self, launches: list[Dispatch], wait: bool = False) -> None:
        """Every launch into one compute encoder of one command buffer, committed."""
        with self.objc.autorelease_pool():
            cb = self.queue.commandBuffer()
            enc = cb.computeCommandEncoder()
            size = self.Metal.MTLSize
            for launch in launches:
                enc.setComputePipelineState_(launch.pipeline)
                for i, b in enumerate(launch.buffers):
                    if isinstance(b, bytes):
                        enc.setBytes_length_atIndex_(b, len(b), i)
                    else:
                        enc.setBuffer_offset_atIndex_((b.block if isinstance(b, DeviceBuffer) else b).buffer, 0, i)
                groups, local = launch.groups, launch.local  # ints, or (x, y, z) for a RawKernel
                groups, local = (
                    (groups, 1, 1) if isinstance(groups, int) else groups,
                    (local, 1, 1) if isinstance(local, int) else local,
                )
                enc.dispatchThreadgroups_threadsPerThreadgroup_(size(*groups), size(*local))
            enc.endEncoding()
            with self._commits:
                cb.commit()
                self._committed += 1
                self._last = cb
        if wait:
            self._wait()

    def replay(self, launches: list[Dispatch]) -> None:
        self.launches += len(launches)
        self._submit(launches)

    def launcher(self, c: MetalKernel, pipeline, scalars: list) -> Launcher:
        return Launcher(c, pipeline, scalars, self.options)

    def enqueue(self, launches, bufs, error) -> None:
        """Every kernel of the call in one command buffer."""
        self._submit([launcher.dispatch([bufs[k] for k in keys], error) for launcher, keys in launches])

    def timed(self, launcher: Launcher, values, error) -> None:
        self._submit([launcher.dispatch(values, error)], wait=True)

    def bound(self, launcher: Launcher, values) -> Dispatch:
        return launcher.dispatch(values, None)

    def error_record(self) -> Block:
        record = self.pool.allocate(RECORD_BYTES)
        self._write(record, np.zeros(RECORD_WORDS, np.int32))
        return record

    def read_record(self, record: Block) -> np.ndarray:
        self._wait()
        return self._memory(record, RECORD_BYTES)
