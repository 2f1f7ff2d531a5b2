"""tracejit's CPU SIMT emulator: the generated CUDA C and MSL themselves, compiled as C++ against the headers
in include/ (tj_simt.h: fibers, barriers, warps, shared memory, atomics, half; tj_cuda.h and metal_stdlib: each
dialect's names on top) into a shared object, loaded with ctypes and run on host memory. Only the driver is
replaced (runtime/cuda/driver.py: the CUDA driver API; metal.py: PyObjC's Metal): the runtime code of the cuda and
metal devices is the same as on the hardware.

`TRACEJIT_EMULATE=cuda`, `=metal` or `=cuda,metal` makes those devices available on any machine with clang++
or g++; `TRACEJIT_EMULATE_SEED` picks the launch orders (see build.py). It is a debugging tool: it runs the
generated source as written, in an order the hardware could choose, and models nothing of speed.
"""

from __future__ import annotations

import functools
import os

from tracejit.errors import DeviceError

ENV = "TRACEJIT_EMULATE"
TARGETS = ("cuda", "metal")
DESCRIPTION = "emulated on the CPU"


def requested() -> frozenset[str]:
    """The targets TRACEJIT_EMULATE names; an unknown name is an error naming the known ones."""
    return _parse(os.environ.get(ENV, ""))


@functools.lru_cache(maxsize=8)
def _parse(value: str) -> frozenset[str]:
    names = frozenset(n.strip().lower() for n in value.split(",") if n.strip())
    unknown = sorted(names - set(TARGETS))
    if unknown:
        raise DeviceError(f"{ENV}={value!r} names {', '.join(unknown)}; it takes cuda, metal or cuda,metal")
    return names


def problem() -> str | None:
    """What is wrong with TRACEJIT_EMULATE, if anything (the devices report it as why they are unavailable)."""
    try:
        requested()
    except DeviceError as e:
        return str(e)
    return None


def emulates(target: str) -> bool:
    """Whether `target` runs on the emulator in this process (an invalid TRACEJIT_EMULATE reads as no)."""
    try:
        return target in requested()
    except DeviceError:
        return False
