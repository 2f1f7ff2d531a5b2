"""Every kernel the suite compiles on the numba device is also rendered as MSL for Metal and checked
by tracejit.codegen.simt.msl_check: compiled as C++ by clang against the project's shim of the Metal
standard library, and its [[...]] attributes checked. No Mac is needed, so CI checks every generated MSL
kernel; a failure fails the test that produced the kernel. Kernels Metal cannot take (float64, more than
31 buffers) raise a clear error at lowering instead, and are counted apart.

Clang runs in this process where libclang's Python bindings are installed (the `libclang` wheel, in the dev
extra): 3 ms a check, where a clang++ process takes 30 (27 of them clang++ starting), thousands of times a
`make test`. Else clang++ runs (`.ci/run` installs Debian's clang when it runs as root). TRACEJIT_CHECK_METAL=0
turns the check off.
"""
from __future__ import annotations

import os

from cuda_check import after_numba_lowering
from tracejit.codegen.simt import msl_check
from tracejit.errors import DtypeError, UnsupportedError
from tracejit.runtime.metal.compiler import MetalTarget


def unavailable_reason() -> str | None:
    if os.environ.get("TRACEJIT_CHECK_METAL", "1") == "0":
        return "TRACEJIT_CHECK_METAL=0"
    if not msl_check.available():
        return ("neither libclang's bindings nor clang++ were found "
                "(pip install libclang; or Debian: apt-get install clang)")
    return None


class Checker:
    def __init__(self):
        self.target = MetalTarget()
        self.checked: set[int] = set()
        self.kernels = 0
        self.refused = 0      # float64 or too many buffers: a clear error, which Metal's rules call for

    def check(self, traced) -> None:
        for program in traced.programs(self.target.layout):   # (a graph with loops: several)
            self.check_program(program)

    def check_program(self, program) -> None:
        try:
            kernels = self.target.compile(program).kernels
        except (DtypeError, UnsupportedError):
            self.refused += 1
            return
        fresh = {k.name: k.source for k in kernels if hash(k.source) not in self.checked}
        self.kernels += len(kernels)
        if fresh:
            msl_check.check_many(fresh)
            self.checked.update(hash(s) for s in fresh.values())


def checker_name() -> str:
    return msl_check.checker()


def install() -> Checker:
    """After a kernel is lowered for the numba device, check its MSL too."""
    checker = Checker()
    after_numba_lowering(checker.check)
    return checker
