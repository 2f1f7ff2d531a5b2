"""This CPU as LLVM names it, with the features LLVM compiles for on it: what the numba device's kernels are
rendered for (rows.py, llvm_values.py) and keyed by. LLVM is asked (importing llvmlite's LLVM, ~20 ms) unless
the runtime has told what it remembers of this machine (runtime/numba/host_record.py)."""

from __future__ import annotations

import functools
from typing import NamedTuple


class HostCPU(NamedTuple):
    name: str  # LLVM's name of the CPU: "znver4", "skylake-avx512", ...
    features: str  # LLVM's features, flattened as llvmlite's FeatureMap.flatten(): "+avx,+avx2,-avx512f,..."

    def has(self, feature: str) -> bool:
        return feature in _enabled(self.features)


_told: list[HostCPU] = []


def tell(cpu: HostCPU) -> None:
    """What the runtime remembers LLVM said of this CPU, used instead of asking LLVM again."""
    _told[:] = [cpu]


@functools.cache
def host_cpu() -> HostCPU:
    return _told[0] if _told else ask_llvm()


def ask_llvm() -> HostCPU:
    import llvmlite.binding as llvm

    return HostCPU(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


@functools.cache
def _enabled(features: str) -> frozenset[str]:
    return frozenset(f[1:] for f in features.split(",") if f.startswith("+"))
