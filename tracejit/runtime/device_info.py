"""Device facts (`tj.device(name).info`): what the driver or the OS says about a device when asked.

Each device builds a DeviceInfo from its own API (cuDeviceGetAttribute and cuMemGetInfo, OpenCL's
device queries, WebGPU's adapter info and limits, Metal's MTLDevice, the OS for the CPU); a field the
API cannot answer is None, never a guess. Free memory is read afresh each time `info` is asked.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

# every dtype of the arrays kernels take (uint64 only comes out: NumPy's sums of unsigned integers)
ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16", "float32", "float64")
KINDS = ("cpu", "gpu", "emulated")


@dataclass(frozen=True)
class DeviceInfo:
    """Facts about one device, each from the driver or the OS at the time it was asked (None: the API
    cannot say). `kind`: "cpu", "gpu" or "emulated" (the CPU SIMT emulator standing in for a GPU);
    memory in bytes; `compute_capability` (major, minor) on CUDA; `unified_memory`: the device computes
    in memory the host addresses directly (a CPU, an integrated GPU, Apple silicon);
    `max_threads_per_group` and `local_memory` (bytes of work-group / shared memory) per work-group;
    `subgroup_size`: threads per warp / SIMD-group where the API reports it; `dtypes`: the NumPy dtype
    names of the arrays kernels on it take and compute in (uint64 also comes out, as NumPy's sums of
    unsigned integers, where the device has 64-bit integers)."""

    name: str
    target: str
    kind: str
    vendor: str | None
    driver_version: str | None
    total_memory: int | None
    free_memory: int | None
    compute_units: int | None
    compute_capability: tuple[int, int] | None
    unified_memory: bool | None
    max_threads_per_group: int | None
    local_memory: int | None
    subgroup_size: int | None
    dtypes: tuple[str, ...]

    def as_dict(self) -> dict:
        """The facts as JSON-ready values (`python -m tracejit info --json`)."""
        out = asdict(self)
        out["compute_capability"] = list(self.compute_capability) if self.compute_capability else None
        out["dtypes"] = list(self.dtypes)
        return out

    def supports(self, dtype) -> bool:
        return np.dtype(dtype).name in self.dtypes


def dtypes_without(*missing: str) -> tuple[str, ...]:
    return tuple(d for d in ALL_DTYPES if d not in missing)


def host_memory() -> tuple[int | None, int | None]:
    """(total, available) bytes of this machine's memory as psutil reads them from the OS (Linux's
    MemTotal and MemAvailable), None where it cannot say."""
    try:
        import psutil

        memory = psutil.virtual_memory()
        return memory.total, memory.available
    except Exception:  # noqa: BLE001 - an OS psutil cannot read: the facts are unknown, not guessed
        return None, None


if not os.path.exists("/proc/meminfo"):  # (imported now: a trace near the recursion limit asks, with no room to)
    import psutil  # noqa: F401


def available_memory() -> int | None:
    """Bytes of memory available now: Linux's MemAvailable read from /proc/meminfo (importing psutil costs a
    fresh process's first call ~12 ms), else psutil's figure, None where neither can say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return host_memory()[1]


def host_cores() -> int | None:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def host_vendor() -> str | None:
    """The CPU's vendor and model as the OS reports them (Linux: /proc/cpuinfo), else platform's."""
    # read by hand: psutil has no CPU model name, and platform.processor() on Linux is only "x86_64"
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        vendor, model = fields.get("vendor_id\t", "").strip(), fields.get("model name\t", "").strip()
        if vendor or model:
            return " ".join(p for p in (vendor, model) if p)
    except OSError:
        pass
    import platform

    return platform.processor() or None
