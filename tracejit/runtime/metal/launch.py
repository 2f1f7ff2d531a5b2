"""One kernel of a launch plan on the metal device (runtime/metal/device.py): what goes at each [[buffer(i)]] of
its dispatch, by-value arguments as Metal holds them."""
from __future__ import annotations

import numpy as np

from tracejit.codegen.simt.mapping import RenderOptions, by_value_dtype


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
        self.scalars = [(j, np.dtype("uint8") if s[1] == np.bool_ else by_value_dtype(s[1], options))
                        for j, s in enumerate(scalars) if s is not None]
        self.takes_error = launch.error_flag
        self.trailing = [v.tobytes() for v in launch.trailing()]   # symbolic sizes, the bounds check's limit
        self.groups, self.local = launch.global_items // launch.local_size, launch.local_size

    def dispatch(self, values: list, error) -> Dispatch:
        """The kernel's dispatch with these arguments (`values`, changed in place)."""
        for j, dt in self.scalars:
            values[j] = np.asarray(values[j], dt).tobytes()
        if self.takes_error:
            values.append(error)
        values += self.trailing
        return Dispatch(self.pipeline, values, self.groups, self.local)
