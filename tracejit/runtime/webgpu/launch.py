"""Launches on the webgpu device: a plan's kernel as a dispatch (its bound buffers and the uniform that carries
its scalars and sizes), one command encoder per call, replay, the fault records."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tracejit.errors import DeviceError, DtypeError
from tracejit.runtime.device_memory import Block, BlockPool, Buffer
from tracejit.runtime.faults import RECORD_BYTES, RECORD_WORDS

if TYPE_CHECKING:
    from tracejit.runtime.webgpu.compiler import WebGPUKernel
    from tracejit.runtime.webgpu.memory import DeviceBuffer

WORD = {"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.uint32}  # a uniform member's type, by dtype kind


def _uniform_words(launch) -> np.ndarray:
    """A launch's by-value arguments after the scalars (Launch.trailing) as 32-bit uniform words: floats as
    float32 bits, integers as int32 or uint32 (index values are i32 in WGSL)."""
    return np.array([np.array(v, WORD[v.dtype.kind]).view(np.uint32) for v in launch.trailing()], np.uint32)


class Dispatch:
    """One dispatch: pipeline, bound buffers (rebound when capture shares memory), workgroup counts."""

    __slots__ = ("name", "pipeline", "layout", "buffers", "bind_group", "groups")

    def __init__(self, name: str, pipeline, layout, buffers: list, groups):
        self.name, self.pipeline, self.layout, self.buffers, self.groups = name, pipeline, layout, buffers, groups
        self.bind_group = None

    def bind(self, dev: WebGPULaunches) -> None:
        entries = []
        for i, b in enumerate(self.buffers):
            block = cast("DeviceBuffer", b).block if isinstance(b, Buffer) else b  # an array, else a pool block
            entries.append({"binding": i, "resource": {"buffer": block.buffer, "offset": 0, "size": block.nbytes}})
        self.bind_group = dev.device.create_bind_group(layout=self.layout, entries=entries)


class Launcher:
    """A kernel of one plan: its pipeline, its scalars' arguments and types, and the uniform of a kernel
    with no scalars, which holds only sizes and is the same for every call: written once and kept."""

    __slots__ = ("compiled", "pipeline", "layout", "scalars", "size_uniform")

    def __init__(self, compiled: WebGPUKernel, pipeline, layout, scalars: list):
        self.compiled, self.pipeline, self.layout = compiled, pipeline, layout
        self.scalars = [(p, scalars[p][0], WORD[scalars[p][1].kind]) for p in compiled.rendered.scalars]
        self.size_uniform: Block | None = None

    def dispatch(self, dev: WebGPULaunches, values: list, error) -> Dispatch:
        """The kernel's dispatch with these arguments (a DtypeError for a scalar WGSL cannot hold), bound."""
        r = self.compiled.rendered
        bound = [values[p] for p in r.buffers]
        if r.uniform:
            bound.append(self._uniform(dev, values))
        if r.launch.error_flag:
            bound.append(error)
        bound += [dev.table_buffer(t) for t in r.tables]
        launch = Dispatch(self.compiled.name, self.pipeline, self.layout, bound, r.groups)
        launch.bind(dev)
        return launch

    def _uniform(self, dev: WebGPULaunches, values: list):
        """The uniform of one dispatch: its scalar arguments, then the sizes. One holding only sizes is
        published only once written (a thread that found it unwritten could submit first, and its kernel
        would read a recycled uniform's stale limit: rows left unwritten, a wrong answer)."""
        r = self.compiled.rendered
        fixed = _uniform_words(r.launch)  # symbolic sizes and the bounds check's limit, after the scalars
        members = len(r.scalars) + len(fixed)
        words = np.zeros(max(4, -(-members // 4) * 4), np.uint32)
        words[len(r.scalars) : members] = fixed
        if not r.scalars:
            if self.size_uniform is None:
                block = dev.uniforms.allocate(words.nbytes)
                dev.device.queue.write_buffer(block.buffer, 0, words)
                self.size_uniform = block
            return self.size_uniform
        for m, (p, argument, word) in enumerate(self.scalars):
            v = values[p]
            try:
                words[m] = np.array(v, word).view(np.uint32)
            except OverflowError:
                raise DtypeError(
                    f"the Python integer {v} (argument {argument}) does not fit int32, the widest "
                    f"integer on {dev.name} (WGSL has no 64-bit types); use another device"
                ) from None
        block = dev.uniforms.allocate(words.nbytes)
        dev.device.queue.write_buffer(block.buffer, 0, words)
        return block


class WebGPULaunches:
    """Submits a plan's dispatches (a role of WebGPUDevice, which sets these attributes and synchronize())."""

    name: str
    device: Any  # wgpu's GPUDevice
    pool: BlockPool
    uniforms: BlockPool
    table_buffer: Callable[[Any], Block]  # (WebGPUMemory's)
    launches: int
    synchronize: Callable[[], None]

    def replay(self, launches: list[Dispatch]) -> None:
        """Every launch in one command encoder, one submit."""
        self.launches += len(launches)
        self._submit(launches)

    def _submit(self, launches: list[Dispatch]) -> None:
        enc = self.device.create_command_encoder()
        for launch in launches:
            pass_ = enc.begin_compute_pass()
            pass_.set_pipeline(launch.pipeline)
            pass_.set_bind_group(0, launch.bind_group)
            pass_.dispatch_workgroups(*launch.groups, 1)
            pass_.end()
        self.device.queue.submit([enc.finish()])

    def launcher(self, c: WebGPUKernel, pipeline: tuple[object, object], scalars: list) -> Launcher:
        return Launcher(c, *pipeline, scalars)

    def enqueue(self, launches, bufs, error) -> None:
        """Every kernel of the call in one command encoder, one submit."""
        self._run([launcher.dispatch(self, [bufs[k] for k in keys], error) for launcher, keys in launches])

    def timed(self, launcher: Launcher, values, error) -> None:
        self._run([launcher.dispatch(self, values, error)], wait=True)

    def _run(self, launches: list[Dispatch], wait: bool = False) -> None:
        try:
            self._submit(launches)
            if wait:
                self.synchronize()
        except Exception as e:
            raise DeviceError(f"{self.name} refused to run {', '.join(d.name for d in launches)}: {e}") from None

    def bound(self, launcher: Launcher, values) -> Dispatch:
        return launcher.dispatch(self, values, None)

    def error_record(self) -> Block:
        record = self.pool.allocate(RECORD_BYTES)
        self.device.queue.write_buffer(record.buffer, 0, np.zeros(RECORD_WORDS, np.int32))
        return record

    def read_record(self, record: Block):
        return self.device.queue.read_buffer(record.buffer, 0, RECORD_BYTES)
