"""The parts of a disk-cache key that every target shares: what tracejit's own code generation is."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from tracejit.version import __version__

_PACKAGE = Path(__file__).resolve().parents[2]
# the files whose change can change a compiled artifact for the same kernel IR
# (runtime/numba/llvm_jit.py writes the entry point into each kernel's object code)
_CODEGEN_SOURCES = ("codegen/**/*.py", "runtime/numba/llvm_jit.py")


@functools.cache
def tracejit_part() -> str:
    """The tracejit version plus a hash of its code-generating sources: an edit to a renderer misses."""
    h = hashlib.sha256()
    for pattern in _CODEGEN_SOURCES:
        for path in sorted(_PACKAGE.glob(pattern)):
            h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return f"{__version__}+{h.hexdigest()[:16]}"


def source_part(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


SHARED_NAME = "tj_kernel"


def shared_source(source: str, name: str) -> str:
    """`source` with the kernel's name `name` replaced by SHARED_NAME: kernels that differ only in their
    names (a GPT-2 block's twelve attention softmaxes) are one source, compiled once and cached once."""
    return re.sub(rf"\b{re.escape(name)}\b", SHARED_NAME, source)
