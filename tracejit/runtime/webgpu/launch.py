"""One kernel of a launch plan on the webgpu device (runtime/webgpu/device.py): a dispatch's bound buffers and the
uniform that carries its scalars and sizes."""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from tracejit.errors import DtypeError
from tracejit.runtime.device_memory import Block, Buffer

if TYPE_CHECKING:
    from tracejit.runtime.webgpu.device import DeviceBuffer, WebGPUKernel, WebGPUDevice

WORD = {"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.uint32}   # a uniform member's type, by dtype kind


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

    def bind(self, dev: "WebGPUDevice") -> None:
        entries = []
        for i, b in enumerate(self.buffers):
            block = cast("DeviceBuffer", b).block if isinstance(b, Buffer) else b   # an array, else a pool block
            entries.append({"binding": i, "resource": {"buffer": block.buffer, "offset": 0, "size": block.nbytes}})
        self.bind_group = dev.device.create_bind_group(layout=self.layout, entries=entries)


class Launcher:
    """A kernel of one plan: its pipeline, its scalars' arguments and types, and the uniform of a kernel
    with no scalars, which holds only sizes and is the same for every call: written once and kept."""

    __slots__ = ("compiled", "pipeline", "layout", "scalars", "size_uniform")

    def __init__(self, compiled: "WebGPUKernel", pipeline, layout, scalars: list):
        self.compiled, self.pipeline, self.layout = compiled, pipeline, layout
        self.scalars = [(p, scalars[p][0], WORD[scalars[p][1].kind]) for p in compiled.rendered.scalars]
        self.size_uniform: Block | None = None

    def dispatch(self, dev: "WebGPUDevice", values: list, error) -> Dispatch:
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

    def _uniform(self, dev: "WebGPUDevice", values: list):
        """The uniform of one dispatch: its scalar arguments, then the sizes. One holding only sizes is
        published only once written (a thread that found it unwritten could submit first, and its kernel
        would read a recycled uniform's stale limit: rows left unwritten, a wrong answer)."""
        r = self.compiled.rendered
        fixed = _uniform_words(r.launch)   # symbolic sizes and the bounds check's limit, after the scalars
        members = len(r.scalars) + len(fixed)
        words = np.zeros(max(4, -(-members // 4) * 4), np.uint32)
        words[len(r.scalars):members] = fixed
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
                raise DtypeError(f"the Python integer {v} (argument {argument}) does not fit int32, the widest "
                                 f"integer on {dev.name} (WGSL has no 64-bit types); use another device") from None
        block = dev.uniforms.allocate(words.nbytes)
        dev.device.queue.write_buffer(block.buffer, 0, words)
        return block
