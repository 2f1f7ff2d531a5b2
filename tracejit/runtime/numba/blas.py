"""The matrix products of the numba device's launch plans (ir/library.py): Intel MKL's cblas ?gemm where the
`mkl` wheel is installed (`pip install tracejit[mkl]`), else NumPy's matmul (OpenBLAS in NumPy's wheels).

MKL is what torch's CPU build multiplies with. On the development VM (2 cores of an Emerald Rapids Xeon,
float32, medians) it took 116 us for 64x256 @ 256x768 against OpenBLAS's 126 (154 with the weight
transposed, as `x @ w.T` reads a [out, in] weight), and 6.9 ms for 1024^3 against 9.0. Both are BLAS:
the same sums in another order, as NumPy's own result depends on its BLAS. On another vendor's CPU MKL runs
slower code: on an AMD EPYC (Zen 4) VM, float64 1000x1200 @ 1200x1100 took 57.6 ms against OpenBLAS's 27.7, and
float32 32.5 against 13.9; there `auto` is NumPy's matmul (vendor_id in /proc/cpuinfo; elsewhere MKL, as before).
TRACEJIT_BLAS=numpy keeps NumPy's matmul where MKL is installed; TRACEJIT_BLAS=mkl uses MKL on any CPU and makes a
missing MKL an error.

MKL's threads come from its GNU OpenMP layer (libgomp, which Numba's OpenMP layer also uses) where the
system has libgomp, else from Intel's OpenMP with KMP_BLOCKTIME=0 unless set: Intel's threads otherwise
spin for 200 ms after each product, on the cores the next fused kernel wants.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
import threading
from pathlib import Path

import numpy as np

from tracejit.errors import DeviceError
from tracejit.runtime.debug import log
from tracejit.runtime.numba import threads

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_THREADING = {"INTEL": 0, "GNU": 3}  # mkl_rt's MKL_Set_Threading_Layer values
_lock = threading.Lock()
_loaded: tuple | None = None  # (library or None, why not)


def _find_mkl_rt() -> Path | None:
    """libmkl_rt from the mkl wheel, which puts it in the environment's lib folder."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        for name in ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"):
            path = Path(prefix) / "lib" / name
            if path.exists():
                return path
    return None


def _load():
    """(cdll or None, why not), once per process (a product's launch reads it without the lock)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        choice = os.environ.get("TRACEJIT_BLAS", "auto").lower()
        if choice not in ("auto", "mkl", "numpy"):
            raise DeviceError(f"TRACEJIT_BLAS={choice!r}: use auto, mkl or numpy")
        vendor = _cpu_vendor()
        other = choice == "auto" and vendor not in (None, "GenuineIntel")
        path = None if choice == "numpy" or other else _find_mkl_rt()
        if path is None:
            why = (
                "TRACEJIT_BLAS=numpy"
                if choice == "numpy"
                else f"MKL is slower than NumPy's BLAS on a {vendor} CPU (TRACEJIT_BLAS=mkl uses it)"
                if other
                else "the mkl wheel is not installed"
            )
            _loaded = (None, why)
        else:
            layer = _layer()
            if layer == "INTEL":
                os.environ.setdefault("KMP_BLOCKTIME", "0")  # read when libiomp5 loads
            try:
                lib = ctypes.CDLL(str(path))
                _symbols_for_compiled_code(path)
                if layer in _THREADING:
                    lib.MKL_Set_Threading_Layer(ctypes.c_int(_THREADING[layer]))
                i, p = ctypes.c_int, ctypes.c_void_p  # MKL_INT: int32 in mkl_rt's default LP64 interface
                for t, real in (("s", ctypes.c_float), ("d", ctypes.c_double)):
                    one = getattr(lib, f"cblas_{t}gemm")
                    one.argtypes = [i, i, i, i, i, i, real, p, i, p, i, real, p, i]
                    batched = getattr(lib, f"cblas_{t}gemm_batch_strided")
                    batched.argtypes = [i, i, i, i, i, i, real, p, i, i, p, i, i, real, p, i, i, i]
                    one.restype = batched.restype = None
                _loaded = (lib, "")
                threads.limit_pools()  # tj.set_num_threads(n) before MKL (and its libgomp) loaded
            except (OSError, AttributeError) as e:
                _loaded = (None, f"{path} did not load: {e}")
        if choice == "mkl" and _loaded[0] is None:
            raise DeviceError(f"TRACEJIT_BLAS=mkl, but {_loaded[1]}: pip install 'tracejit[mkl]'")
        return _loaded


@functools.cache
def _cpu_vendor() -> str | None:
    """The CPU's vendor_id as Linux reports it (GenuineIntel, AuthenticAMD, ...), else None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def _layer() -> str:
    """MKL's threading layer: MKL_THREADING_LAYER, else GNU OpenMP where the system has libgomp."""
    return os.environ.get("MKL_THREADING_LAYER", "").upper() or ("GNU" if _system_has_libgomp() else "INTEL")


def _system_has_libgomp() -> bool:
    """Whether the dynamic linker finds a libgomp (never loading it: libgomp reads GOMP_SPINCOUNT when it loads,
    settle_openmp)."""
    return system_library("gomp") is not None


@functools.cache
def system_library(name: str) -> str | None:
    """The name the dynamic linker loads lib<name> by ("libgomp.so.1"), as ctypes.util.find_library says, or None:
    on Linux read from the linker's cache file, where find_library runs `ldconfig -p` in a subprocess (in every
    process's first call); find_library elsewhere."""
    try:
        with open("/etc/ld.so.cache", "rb") as cache:
            table = cache.read()
    except OSError:
        import ctypes.util  # (imports subprocess: only where the linker's cache cannot be read)

        return ctypes.util.find_library(name)
    found = re.search(rb"(?:^|[\x00/])(lib" + re.escape(name.encode()) + rb"\.so(?:\.[0-9]+)+)\x00", table)
    return found.group(1).decode() if found else None


# GNU OpenMP's threads spin after a parallel region for GOMP_SPINCOUNT rounds of a pause instruction before
# they sleep: 300,000 by default, which on the development VM (Emerald Rapids, where a pause takes ~140
# cycles) kept MKL's second thread busy 7.5 ms after each product, on the core the next fused kernel's
# threads wanted. 1000 rounds (tens of microseconds) still bridge the gaps between a plan's back-to-back
# kernels. Measured in alternating runs against the default: ffn 6.9-7.4 ms against 8.3-9.0, gpt2_block
# 15.1-16.7 against 19.2-19.7, llama_block and linear unchanged.
GOMP_SPINCOUNT = "1000"


def settle_openmp() -> None:
    """GOMP_SPINCOUNT=1000 for the libgomp that MKL's GNU layer and Numba's OpenMP layer share, where MKL
    will run on it and the user set neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY; libgomp reads it when it
    loads, so nothing is set (and that is logged) where it is loaded already. The numba device calls this
    when it opens, before its first parallel kernel."""
    if "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ:
        return
    if os.environ.get("TRACEJIT_BLAS", "auto").lower() == "numpy" or _find_mkl_rt() is None or _layer() != "GNU":
        return  # (_layer may ask ldconfig: ~2 ms, last)
    if _libgomp_loaded():
        global SPINS_LONG
        SPINS_LONG = True
        log(
            1,
            "libgomp was loaded before the numba device opened: GOMP_SPINCOUNT is not set (its threads "
            "spin up to ~10 ms after each product; set GOMP_SPINCOUNT=1000 before they start); kernels "
            "beside products run on its threads",
        )
        return
    os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT


# Where libgomp was loaded before the numba device opened (torch ships one: `import torch` first), its
# threads spin 300,000 rounds after each of MKL's products, and a kernel on tracejit's own threads right after
# a product waited for a core (numba_device._loop). Kernels beside products then run on Numba's OpenMP loops,
# whose threads are the very ones that spin (Numba's OpenMP layer and MKL's GNU layer share one libgomp),
# so they find them awake instead of in the way: with torch imported first, alternating runs, ffn 5.6-7.3 ms
# against 7.6-9.7, gpt2_block 14.1-16.1 against 18.3-23.0, llama_block 1.25-1.72 against 1.71-1.95; without
# torch both ways took the same, and Numba's parallel loops compile slower (a cold gpt2_block 9.8 s against
# 7.9), so elsewhere they stay on tracejit's threads.
SPINS_LONG = False


def products_spin_long() -> bool:
    """Whether the threads of MKL's products spin long after each, on the libgomp that Numba's OpenMP
    loops use too (settle_openmp found libgomp loaded, or the user asked libgomp to keep its threads
    active)."""
    if backend() != "mkl" or _layer() != "GNU":
        return False
    if SPINS_LONG or os.environ.get("OMP_WAIT_POLICY", "").strip().lower() == "active":
        return True
    count = os.environ.get("GOMP_SPINCOUNT", "").strip()
    return bool(count) and not (count.isdigit() and int(count) <= 10_000)


def _libgomp_loaded() -> bool:
    """Whether this process has loaded a libgomp (the system's, or the copy torch ships under a name of its
    own, which MKL and Numba then bind to), as threadpoolctl finds the loaded OpenMP runtimes; True where
    that cannot be found out."""
    try:  # (Linux: the process's mappings, read in well under a millisecond; threadpoolctl takes ~5)
        with open("/proc/self/maps") as maps:
            return "libgomp" in maps.read()
    except OSError:
        pass
    try:
        from threadpoolctl import ThreadpoolController

        return any(
            "libgomp" in os.path.basename(c.filepath)
            for c in ThreadpoolController().select(internal_api="openmp").lib_controllers
        )
    except Exception:  # noqa: BLE001 - an answer threadpoolctl cannot give is "loaded" (the cautious one)
        return True


def _symbols_for_compiled_code(path: Path) -> None:
    """cblas's symbols made visible to the code Numba compiles and loads (DRIVER calls them by name)."""
    import llvmlite.binding as llvm

    try:
        llvm.load_library_permanently(str(path))
    except RuntimeError as e:
        raise OSError(e) from None


def describe() -> str:
    """What the products will run on, for `python -m tracejit info` (MKL is found, not loaded)."""
    choice = os.environ.get("TRACEJIT_BLAS", "auto").lower()
    vendor = _cpu_vendor()
    if choice == "auto" and vendor not in (None, "GenuineIntel") and _find_mkl_rt() is not None:
        return f"BLAS: NumPy's matmul (MKL is installed, and slower on a {vendor} CPU: TRACEJIT_BLAS=mkl uses it)"
    if choice != "numpy" and _find_mkl_rt() is not None:
        return "BLAS: MKL"
    return "BLAS: NumPy's matmul"


def backend() -> str:
    """ "mkl" or "numpy": what the numba device's matrix products run on in this process."""
    return "mkl" if _load()[0] is not None else "numpy"


_INT_MAX = 2**31 - 1


def _operand(x: np.ndarray, rows: int, cols: int) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) of a row-major cblas operand for the last two axes of x, or None
    where neither axis is contiguous (a broadcast, a strided view: NumPy's matmul copies those)."""
    size = x.itemsize
    s0, s1 = x.strides[-2], x.strides[-1]
    if s0 % size or s1 % size:
        return None
    s0, s1 = s0 // size, s1 // size
    if cols == 1:
        s1 = 1
    if rows == 1:
        s0 = max(cols, 1)
    if s1 == 1 and s0 >= max(cols, 1):
        return _NO_TRANS, s0
    if s0 == 1 and s1 >= max(rows, 1):
        return _TRANS, s1
    return None


def _batch_stride(x: np.ndarray, batch: int, matrix: int) -> int | None:
    """x's stride between matrices in elements, where it keeps them apart (at least `matrix`, the
    elements one spans), else None (a broadcast batch: NumPy's matmul)."""
    if batch == 1:
        return matrix
    stride = x.strides[0]
    return stride // x.itemsize if stride % x.itemsize == 0 and stride // x.itemsize >= matrix else None


def matmul(a: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """out[...] = a @ c for (B, M, K) @ (B, K, N) -> (B, M, N): one MKL call where the operands are
    matrices it reads in place, else np.matmul."""
    lib = _load()[0]
    if lib is not None and _gemm(lib, a, c, out):
        return
    np.matmul(a, c, out=out)


def gemm_arguments(a: np.ndarray, c: np.ndarray, out: np.ndarray) -> tuple[int, ...] | None:
    """cblas's arguments for out[...] = a @ c, (B, M, K) @ (B, K, N) -> (B, M, N), but for the pointers:
    (transa, transb, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch), strides between the
    matrices of a batch in elements; None where an argument is not one cblas takes (MKL refuses those with
    a message and computes nothing) or not one of two float arrays of the same type."""
    if not a.dtype == c.dtype == out.dtype or a.dtype not in (np.float32, np.float64):
        return None
    b, m, k = a.shape
    n = c.shape[2]
    if (
        not (m and n and k)
        or not out.flags.writeable
        or not all(x.flags.aligned and x.dtype.isnative for x in (a, c, out))
    ):
        return None
    left, right, result = _operand(a, m, k), _operand(c, k, n), _operand(out, m, n)
    if left is None or right is None or result is None or result[0] != _NO_TRANS:
        return None
    stride_a = _batch_stride(a, b, left[1] * (m if left[0] == _NO_TRANS else k))
    stride_c = _batch_stride(c, b, right[1] * (k if right[0] == _NO_TRANS else n))
    stride_out = _batch_stride(out, b, result[1] * m)
    if (
        stride_a is None
        or stride_c is None
        or stride_out is None
        or max(b, m, n, k, left[1], right[1], result[1], stride_a, stride_c, stride_out) > _INT_MAX
    ):
        return None
    return (left[0], right[0], m, n, k, left[1], stride_a, right[1], stride_c, result[1], stride_out, b)


def extent(transposed: bool, rows: int, cols: int, ld: int, stride: int, batch: int) -> int:
    """Elements from an operand's first to one past its last, rows x cols stored row-major (transposed:
    cols x rows) with leading dimension ld, `batch` of them `stride` apart."""
    if transposed:
        rows, cols = cols, rows
    return (batch - 1) * stride + (rows - 1) * ld + cols


def _gemm(lib, a: np.ndarray, c: np.ndarray, out: np.ndarray) -> bool:
    """The product through MKL where gemm_arguments takes the arrays, else False."""
    args = gemm_arguments(a, c, out)
    if args is None:
        return False
    ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, b = args
    t = "s" if a.dtype == np.float32 else "d"
    if b == 1:
        getattr(lib, f"cblas_{t}gemm")(
            _ROW_MAJOR, ta, tb, m, n, k, 1.0, a.ctypes.data, lda, c.ctypes.data, ldb, 0.0, out.ctypes.data, ldc
        )
    else:
        getattr(lib, f"cblas_{t}gemm_batch_strided")(
            _ROW_MAJOR,
            ta,
            tb,
            m,
            n,
            k,
            1.0,
            a.ctypes.data,
            lda,
            sa,
            c.ctypes.data,
            ldb,
            sb,
            0.0,
            out.ctypes.data,
            ldc,
            sc,
            b,
        )
    return True


# ---- the launch from compiled code ----
# A product in a launch plan, run through ctypes, spent ~30 us a call in Python before MKL started (views of
# the buffers, cblas's arguments worked out again, three `ndarray.ctypes.data`, ctypes's own conversion): a
# quarter of a 64x256 @ 256x768 product. The numba device works the arguments out once per plan
# (numba_library.GemmLaunch) and launches each call through DRIVER, compiled by Numba like a kernel: Numba's
# unboxing reads the buffers' pointers, and the call costs ~1 us.

DRIVER = '''"""tracejit: a matrix product of a launch plan, by MKL's cblas_{t}gemm (tracejit/runtime/numba/blas.py)."""
import numpy as np
from numba import types

_i, _p, _real = types.int32, types.int64, types.{real}   # MKL_INT (LP64); pointers passed as integers
gemm = types.ExternalFunction("cblas_{t}gemm", types.void(_i, _i, _i, _i, _i, _i, _real, _p, _i, _p, _i, _real, _p, _i))
gemm_batch = types.ExternalFunction("cblas_{t}gemm_batch_strided", types.void(
    _i, _i, _i, _i, _i, _i, _real, _p, _i, _i, _p, _i, _i, _real, _p, _i, _i, _i))


def tj_gemm(a, c, out, p):
    """out = a @ c at byte offsets p[0:3] of the three buffers, each read up to byte p[3:6]; p[6:] is
    blas.gemm_arguments's tuple. False, and nothing run, where a pointer is not aligned to an element or
    a buffer is shorter than that."""
    pa, pc, po = a.ctypes.data + p[0], c.ctypes.data + p[1], out.ctypes.data + p[2]
    if pa % {size} or pc % {size} or po % {size} or p[3] > a.nbytes or p[4] > c.nbytes or p[5] > out.nbytes:
        return False
    one, zero = np.{real}(1.0), np.{real}(0.0)
    if p[17] == 1:
        gemm({row_major}, p[6], p[7], p[8], p[9], p[10], one, pa, p[11], pc, p[13], zero, po, p[15])
    else:
        gemm_batch({row_major}, p[6], p[7], p[8], p[9], p[10], one, pa, p[11], p[12], pc, p[13], p[14], zero,
                   po, p[15], p[16], p[17])
    return True
'''


def driver_source(dtype: np.dtype) -> str:
    """DRIVER for float32 or float64 operands."""
    t, real = ("s", "float32") if dtype == np.float32 else ("d", "float64")
    return DRIVER.format(t=t, real=real, size=np.dtype(dtype).itemsize, row_major=_ROW_MAJOR)


def driver_arguments(
    buffers: tuple[np.ndarray, np.ndarray, np.ndarray], views: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray | None:
    """DRIVER's p for the product views[2] = views[0] @ views[1], each view inside the flat buffer beside
    it, where gemm_arguments takes the views; else None. The offsets hold for every call whose buffers
    are laid out as these are."""
    args = gemm_arguments(*views)
    if args is None or any(not b.flags.c_contiguous for b in buffers):
        return None
    ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, batch = args
    offsets, ends = [], []
    for buffer, view, (transposed, rows, cols, ld, stride) in zip(
        buffers, views, ((ta == _TRANS, m, k, lda, sa), (tb == _TRANS, k, n, ldb, sb), (False, m, n, ldc, sc))
    ):
        offset = view.ctypes.data - buffer.ctypes.data
        end = offset + extent(transposed, rows, cols, ld, stride, batch) * view.itemsize
        if offset < 0 or end > buffer.nbytes:  # not inside the buffer: a copy NumPy made of it
            return None
        offsets.append(offset)
        ends.append(end)
    return np.array([*offsets, *ends, *args], np.int64)
