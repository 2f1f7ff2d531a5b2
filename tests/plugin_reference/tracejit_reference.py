"""`reference`: a third-party target for tracejit, the kernel-IR interpreter as a device.

It runs each kernel through tracejit.ir.interpret (NumPy, one global index at a time, loops in Python):
slow, but the executable definition of the kernel IR, so a program that differs between a real device
and this one points at that device's renderer. Registered through the entry point group
"tracejit.targets" as `reference = tracejit_reference:ReferenceTarget` (see this directory's
pyproject.toml); tests/test_plugins.py installs it into a temporary directory.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import interpret
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.device_interface import Device
from tracejit.runtime.views import flat_view


@dataclass(frozen=True)
class ReferenceKernel:
    name: str
    source: str        # the kernel IR as text: what this device runs
    ir: object
    cached: bool = False


class ReferenceTarget(Device):
    """The device tracejit's registry makes of this target (one per process). Device supplies the
    capabilities it does not have (no memory pool of its own, no disk cache: nothing is compiled)."""

    name = "reference"
    has_memory_pool = False
    layout = LayoutOptions(library=False, tiled=False)   # every kernel is IR: no BLAS call, no GPU tiles

    @staticmethod
    def probe():
        return True, None, "the kernel-IR interpreter (NumPy), for debugging"

    def __init__(self, index=None):
        if index:
            raise ValueError("reference has one device: use 'reference'")

    # -- arrays: NumPy's, copied in and out so results never alias the caller's --
    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True, order="C")

    def to_numpy(self, data: np.ndarray) -> np.ndarray:
        return data

    def clone(self, data: np.ndarray) -> np.ndarray:
        return data.copy()

    def synchronize(self) -> None:
        pass

    def compile(self, program) -> "ReferencePlan":
        return ReferencePlan(program)


class ReferencePlan:
    def __init__(self, program):
        self.program = program
        self.kernels = [ReferenceKernel(k.name, k.format(), k) for k in program.kernels]

    def __call__(self, args, into=None) -> list[np.ndarray]:
        prog = self.program
        arrays, flat = {}, {}
        for key, buf in prog.buffers.items():
            if key[0] == "in":
                a = args[key[1]]
                a = a._data if hasattr(a, "_data") else a
                view = flat_view(a, buf)
                flat[key] = view.view(np.float16) if buf.dtype == np.float16 else view
            else:
                out = into[key] if into and key in into else np.empty(buf.shape, buf.dtype)
                arrays[key] = out
                flat[key] = out.reshape(-1)
        for k, keys in zip(prog.kernels, prog.launches):
            interpret.run(k, [flat[key] for key in keys])
        return [arrays[key] for key in prog.outputs]

    def bind(self, args):
        raise UnsupportedError("the reference device does not capture graphs; call the kernel instead")
