"""Whether a machine may have a GPU, from its device files alone: automatic device choice (registry.py)
asks each GPU target's maybe_gpu() before probing it, and on a Linux machine without any GPU driver's
device file it need not load a driver, import pyopencl or create an adapter to learn that (0.1-0.2 s of
a CPU-only process's first call). A GPU whose driver makes none of these files is then not chosen
automatically; naming its device (device="opencl") still uses it."""

from __future__ import annotations

import glob
import sys

NVIDIA = ("/dev/nvidia[0-9]*", "/dev/dxg")  # the NVIDIA driver's device files; WSL2's GPU
ANY = (
    *NVIDIA,
    "/dev/dri/renderD*",  # DRM render nodes: AMD, Intel, nouveau and most others
    "/dev/kfd",  # AMD ROCm
    "/dev/mali*",
    "/dev/kgsl-3d0",
    "/dev/galcore",
)  # Arm Mali, Qualcomm Adreno, Vivante: embedded OpenCL


def may_have_gpu(files: tuple[str, ...] = ANY) -> bool:
    """False only on Linux when none of these device files exists; True elsewhere (nothing to look at)."""
    if sys.platform != "linux":
        return True
    return any(glob.glob(pattern) for pattern in files)


# the device files of each built-in target's GPUs: automatic choice rules a target out with them before importing
# its runtime (registry._qualifies: the cuda and webgpu modules cost ~15 ms each to import)
FILES = {"cuda": NVIDIA, "opencl": ANY, "webgpu": ANY}


def ruled_out(target: str) -> bool:
    """True when this machine certainly has no GPU for a built-in target (metal: not macOS; the others: none of
    their device files on Linux), known without importing the target; False where it may have one, or for a
    target this module does not know (a plugin: its class's maybe_gpu says)."""
    if target == "metal":
        return sys.platform != "darwin"
    files = FILES.get(target)
    return files is not None and not may_have_gpu(files)
