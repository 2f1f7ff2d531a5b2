"""The numba device's library calls: a kernel of the launch plan whose work is a NumPy call (BLAS matmul,
stable sort) on views of its buffers (ir/library.py), and the launch of an MKL product from compiled code
(GemmLaunch, with blas.DRIVER)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from tracejit.ir import library
from tracejit.runtime.numba import blas
from tracejit.runtime.cache.disk import _warn_once
from tracejit.runtime.numba.cache import first_lines


def library_kernel(call: library.Call):
    """A kernel's work done by a NumPy call (BLAS matmul, stable sort), given the same flat arrays as its
    entry point (float16 as uint16 bit patterns)."""
    what, shape = call.what, (call.views[-1] if call.views else call.what.node).shape

    def run(*arrays, matmul=blas.matmul):
        values = {}
        for leaf, i, buf in call.leaves:  # np.ndarray on the buffer: as_strided costs ~10 us a view
            flat = arrays[i].view(buf.dtype)
            item = flat.itemsize
            values[leaf] = np.ndarray(buf.shape, flat.dtype, flat, buf.offset * item, [s * item for s in buf.strides])
        call.write(
            [library.view(x, values) for x in what.operands],
            arrays[call.out].view(what.node.dtype).reshape(shape),
            matmul,
        )

    return run


DRIVEN = (np.float32, np.float64)  # the products blas.DRIVER launches


class GemmLaunch:
    """A product of the launch plan on MKL. Its first call runs the library kernel (views of the buffers,
    blas.matmul) and keeps what MKL was given, as offsets into the flat buffers; later calls launch MKL
    with those through blas.DRIVER (~1 us; ~30 us the first way). The driver is loaded on the first call
    where the disk cache has it, else compiled on the second (a product called once does not wait for
    it). Buffers of another type or layout than the first call's, an operand that is a constant or a
    copy, or one cblas does not take: the first way, every call."""

    def __init__(self, call: library.Call, run, driver):
        self.run, self.driver = run, driver  # driver(compile): see numba/compiler.py, NumbaModules._gemm_driver
        self.positions = tuple(_leaf_position(call, x) for x in call.what.operands) + (call.out,)
        self.dtype = np.dtype(call.what.node.dtype)
        self.arguments: np.ndarray | Literal[False] | None = None  # blas.driver_arguments's; False: none work
        self.entry = None  # the driver's entry point, once loaded
        # a matrix times a vector: NumPy's matmul, whose BLAS (OpenBLAS) runs gemv; MKL's gemm with one row or
        # column took 8.5 ms for a 5500^2 float64 matrix where gemv takes 5.5 (2-core VM); and a few rows times
        # a large matrix (streams_a_matrix)
        self.matvec = isinstance(call.what, library.Gemm) and streams_a_matrix(call.what)

    def __call__(self, *arrays):
        if self.matvec:
            self.run(*arrays, matmul=_numpy_matmul)
            return
        p, entry = self.arguments, self.entry
        if entry is not None:
            i, j, o = self.positions
            a, c, out = arrays[i], arrays[j], arrays[o]
            dtype = self.dtype
            if (
                a.dtype == dtype
                and c.dtype == dtype
                and out.dtype == dtype
                and a.flags.c_contiguous
                and c.flags.c_contiguous
                and out.flags.c_contiguous
                and entry(a, c, out, p)
            ):
                return
        seen = []

        def matmul(a, c, into):
            seen.append((a, c, into))
            blas.matmul(a, c, into)

        self.run(*arrays, matmul=matmul)
        if p is None:
            p = self.arguments = self._arguments(arrays, seen) if None not in self.positions else False
            if p is not False:
                self.entry = self._driver(compile=False)
        elif p is not False and entry is None:
            self.entry = self._driver(compile=True)

    def _driver(self, compile: bool):
        """The driver, or None where it is not there yet; where it fails to load or compile, the product
        keeps the first way (a warning, once), and the call that asked still has its result."""
        try:
            return self.driver(compile=compile)
        except Exception as e:  # noqa: BLE001 - the product runs the first way; nothing is lost
            self.arguments = False
            _warn_once(
                "mkl-driver",
                f"MKL's launcher for matrix products could not be built ({type(e).__name__}: "
                f"{first_lines(str(e), 1)}); products call MKL through ctypes instead "
                "(~30 us more per call)",
            )
            return None

    def _arguments(self, arrays, seen):
        if len(seen) != 1 or any(arrays[i].dtype != self.dtype for i in self.positions):
            return False
        p = blas.driver_arguments(tuple(arrays[i] for i in self.positions), seen[0])
        return False if p is None else p


# a product of at most this many rows (or columns) of a matrix of at least STREAMED_MIN elements reads that
# matrix once, at the memory's speed: NumPy's matmul (OpenBLAS's gemm) streams it 1.5-5x faster than MKL's gemm
# did on the 2-core AMD EPYC VM, 2026-11-30 (float32 8 x 30000 @ 30000 x 2000: 17.6 ms against 29.1;
# 8 x 768 @ 768 x 3072: 0.58 against 1.94; 2 rows: 16.6 against 82); from 32 rows on MKL's lead in a model's
# blocks (its products' threads beside the fused kernels) is back
SKINNY = 16
STREAMED_MIN = 1 << 20


def streams_a_matrix(gemm: library.Gemm) -> bool:
    """A matrix times a vector, or a few rows (columns) times a large matrix: NumPy's matmul runs it."""
    _, m, n, k = gemm.sizes()
    return min(m, n) == 1 or min(m, n) <= SKINNY and k * max(m, n) >= STREAMED_MIN


def _numpy_matmul(a, c, into) -> None:
    np.matmul(a, c, out=into)


def _leaf_position(call: library.Call, operand) -> int | None:
    """The kernel parameter whose buffer an operand of the call views; None for a constant."""
    while operand.op in library.VIEWS:
        operand = operand.srcs[0]
    return next((i for leaf, i, _ in call.leaves if leaf is operand), None)


def library_source(call: library.Call) -> str:
    what = call.what.describe()
    if not isinstance(call.what, library.Gemm):
        by = "numpy"
    elif min(call.what.sizes()[1:3]) == 1:
        by = "numpy.matmul (its BLAS's gemv)"
    elif streams_a_matrix(call.what):
        by = "numpy.matmul (a few rows through a large matrix: its BLAS streams it)"
    else:
        by = {"mkl": "MKL's cblas gemm", "numpy": "numpy.matmul"}[blas.backend()]
    return (
        f"# run as {what} by {by}, on views of the buffers (tracejit.ir.library, tracejit.runtime.numba.blas); the "
        "kernel IR is the reference it replaces\n"
    )
