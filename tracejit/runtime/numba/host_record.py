"""What LLVM said of this CPU (codegen/cpu/host.py), recorded in the cache directory per CPU, so that a process
whose kernels all come from the disk cache need not load LLVM to ask again. Linux only: a CPU is told apart by
/proc/cpuinfo's identification and feature flags (what the CPUID instruction LLVM asks reports); elsewhere, or
where the record cannot be read or written, LLVM is asked."""

from __future__ import annotations

import functools
import hashlib
import json
import os

from tracejit.codegen.cpu import host
from tracejit.runtime.cache.directory import cache_dir
from tracejit.runtime.cache.disk import write_atomic
from tracejit.runtime.numba.cache import installed_version

# /proc/cpuinfo's lines that identify a CPU and its features (x86, ARM, POWER); clocks, core numbers and the
# like change from line to line and from boot to boot
IDENTIFYING = frozenset(
    (
        "vendor_id", "cpu family", "model", "model name", "stepping", "flags",
        "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision", "Features",
        "cpu", "revision",
    )
)  # fmt: skip


@functools.cache
def host_cpu() -> host.HostCPU:
    """This CPU as LLVM sees it: from its record where there is one, else asked of LLVM and recorded."""
    identity = _identity()
    if identity is None:
        return host.host_cpu()
    path = cache_dir() / "host" / f"llvm-{hashlib.sha256(identity.encode()).hexdigest()[:32]}.json"
    try:
        record = json.loads(path.read_bytes())
        cpu = host.HostCPU(record["name"], record["features"])
        if record["identity"] == identity and record["sha256"] == _checksum(cpu):
            host.tell(cpu)
            return host.host_cpu()
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or damaged: asked again and rewritten
    cpu = host.host_cpu()
    record = {"identity": identity, "name": cpu.name, "features": cpu.features, "sha256": _checksum(cpu)}
    try:
        write_atomic(path, json.dumps(record, indent=1).encode())
    except OSError:
        pass  # a read-only cache: the next process asks LLVM too
    return cpu


def _checksum(cpu: host.HostCPU) -> str:
    return hashlib.sha256(f"{cpu.name}\n{cpu.features}".encode()).hexdigest()


def _identity() -> str | None:
    """The machine, LLVM's version (through llvmlite's) and the distinct identifying lines of /proc/cpuinfo
    (every core's: a hybrid CPU's cores may differ); None where there is no such file or nothing in it."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None
    lines = sorted({line.strip() for line in text.splitlines() if line.split(":", 1)[0].strip() in IDENTIFYING})
    if not lines:
        return None
    return "\n".join([os.uname().machine, f"llvmlite {installed_version('llvmlite')}", *lines])
