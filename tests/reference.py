"""NumPy as the reference: dtype tables, seeded inputs per dtype, and result comparison with
dtype-aware tolerances. Tests run a kernel body once through tracejit and once on plain NumPy arrays."""
from __future__ import annotations

import importlib.util
import itertools
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import tracejit as tj

BOOL = ["bool"]
SIGNED_INTS = ["int8", "int16", "int32", "int64"]
UNSIGNED_INTS = ["uint8", "uint16", "uint32"]
INTS = SIGNED_INTS + UNSIGNED_INTS
FLOATS = ["float16", "float32", "float64"]
INTS_AND_BOOL = BOOL + INTS
NUMERIC = INTS + FLOATS
ALL_DTYPES = BOOL + INTS + FLOATS

# (rtol, atol) by result dtype. float16 is computed in float32 and rounded, so it only agrees loosely.
FLOAT_TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}


def tolerances(dtype: Any) -> tuple[float, float]:
    """Default (rtol, atol) for comparing results of this dtype; exact for ints and bools."""
    return FLOAT_TOLERANCES.get(np.dtype(dtype).name, (0.0, 0.0))


def assert_close(result: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None,
                 what: str = "result") -> None:
    """Assert a tracejit result equals NumPy's: same tuple structure, dtype, shape, and values
    (floats within tolerance, NaN where NumPy has NaN, infinities with the same sign; ints and bools exact)."""
    if isinstance(expected, tuple):
        assert isinstance(result, tuple), f"{what}: NumPy returns a tuple of {len(expected)}, got {type(result)}"
        assert len(result) == len(expected), f"{what}: {len(result)} outputs, NumPy has {len(expected)}"
        for i, (r, e) in enumerate(zip(result, expected)):
            assert_close(r, e, rtol=rtol, atol=atol, what=f"{what}[{i}]")
        return
    assert not isinstance(result, tuple), f"{what}: got a tuple, NumPy returns a single array"
    expected = np.asarray(expected)
    actual = np.asarray(result)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, NumPy gives {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, NumPy gives {expected.shape}"
    if expected.dtype.kind == "c":  # each part as the float dtype it is, within that dtype's tolerance
        for part in ("real", "imag"):
            assert_close(getattr(actual, part), getattr(expected, part), rtol=rtol, atol=atol, what=f"{what}.{part}")
        return
    if expected.dtype.kind == "f":
        default_rtol, default_atol = tolerances(expected.dtype)
        np.testing.assert_allclose(
            actual.astype(np.float64), expected.astype(np.float64),
            rtol=default_rtol if rtol is None else rtol,
            atol=default_atol if atol is None else atol,
            equal_nan=True, err_msg=f"{what} ({expected.dtype})")
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=f"{what} ({expected.dtype})", strict=True)


def pack_flags(*flags: Any) -> Any:
    """Boolean arrays packed into one int64 array, flag i as bit i. Works on NumPy arrays and traced
    tensors alike, so one kernel output (one compile) carries several boolean results."""
    packed = flags[0] * 1
    for bit, flag in enumerate(flags[1:], start=1):
        packed = packed + flag * (1 << bit)
    return packed


def assert_flags_match(result: Any, expected: Any, names: list[str]) -> None:
    """Compare pack_flags outputs bit by bit, naming the flag that differs."""
    actual, expected = np.asarray(result), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"packed flags: dtype {actual.dtype}, NumPy gives {expected.dtype}"
    assert actual.shape == expected.shape, f"packed flags: shape {actual.shape}, NumPy gives {expected.shape}"
    for bit, name in enumerate(names):
        np.testing.assert_array_equal((actual >> bit) & 1, (expected >> bit) & 1, err_msg=name)


# devices that cannot represent float64 (a stated property of the target), and why
NO_FLOAT64 = {"webgpu": "WGSL has no float64", "metal": "the Metal Shading Language has no float64"}


def run_kernel(kernel: Callable[..., Any], *args: Any, device: str, **kwargs: Any) -> Any:
    """Call a kernel on a device. A device other than numba may lack a dtype (WGSL has no float64);
    its DtypeError then skips the test rather than failing it. numba supports every dtype."""
    try:
        return kernel(*args, device=device, **kwargs)
    except tj.DtypeError as error:
        if device == "numba":
            raise
        pytest.skip(f"{device} cannot represent a dtype of this test: {error}")


def assert_kernel_matches_numpy(body: Callable[..., Any], *args: Any, device: str,
                                static: tuple[str, ...] | None = None,
                                rtol: float | None = None, atol: float | None = None,
                                numpy_errors: str = "raise", **kwargs: Any) -> Any:
    """Compile `body` with tracejit, run it on `device`, run the same body on the NumPy arrays, and
    compare. NumPy runs under np.errstate(all=numpy_errors): by default an input that makes NumPy warn
    (a domain error, an overflow) is a mistake in the test, not something to compare."""
    kernel = tj.kernel(body) if static is None else tj.kernel(static=static)(body)
    result = run_kernel(kernel, *args, device=device, **kwargs)
    with np.errstate(all=numpy_errors):
        expected = body(*args, **kwargs)
    assert_close(result, expected, rtol=rtol, atol=atol)
    return result


# ---------------------------------------------------------------------------------------------
# Seeded inputs


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, *,
                 low: float | None = None, high: float | None = None,
                 nonzero: bool = False, full_range: bool = False) -> np.ndarray:
    """Random values of `dtype`: ints in [low, high] clipped to the dtype (default [-100, 100], so
    unsigned ints get [0, 100]), floats uniform in [low, high) (default [-10, 10)), bools half True.
    nonzero keeps values away from zero (safe divisors); full_range spans the whole integer dtype."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        values = rng.random(shape) < 0.5
        if nonzero:
            values[...] = True
        return values
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if full_range else (-100 if low is None else low, 100 if high is None else high)
        values = rng.integers(max(lo, info.min), min(hi, info.max), size=shape, endpoint=True).astype(dt)
        if nonzero:
            values[values == 0] = 1
        return values
    lo, hi = -10.0 if low is None else low, 10.0 if high is None else high
    values = rng.uniform(lo, hi, size=shape)
    if nonzero:
        values[np.abs(values) < 0.25] = 0.5
    return values.astype(dt)


def random_dyadic(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, *,
                  nonzero: bool = False) -> np.ndarray:
    """Multiples of 1/4 in [-10, 10] for float dtypes (exact in float16 too), so floor division and
    remainder have exact answers and no quotient lies a rounding error away from an integer.
    Other dtypes fall back to random_array."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        return random_array(rng, shape, dt, nonzero=nonzero)
    quarters = rng.integers(-40, 40, size=shape, endpoint=True)
    if nonzero:
        quarters[quarters == 0] = 3
    return (quarters / 4).astype(dt)


def with_edge_values(values: np.ndarray) -> np.ndarray:
    """Put the extreme values of a signed integer dtype, or signed zeros of a float dtype, into the
    first elements (in place) and return the array."""
    flat = values.reshape(-1)
    if values.dtype.kind == "i":
        info = np.iinfo(values.dtype)
        flat[:3] = [info.min, info.max, 0]
    elif values.dtype.kind == "f":
        flat[:2] = [0.0, -0.0]
    return values


# ---------------------------------------------------------------------------------------------
# References for tracejit functions that NumPy does not have


def sigmoid_reference(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) computed in float64 and rounded to the input's float dtype."""
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def erf_reference(x: np.ndarray) -> np.ndarray:
    """math.erf elementwise in float64, rounded to the input's float dtype."""
    values = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    return values.astype(x.dtype)


def require_kept_kernels(device: str) -> None:
    """Skip a test of what a later process finds on disk where the device keeps no compiled kernels
    (its class says why: webgpu, metal)."""
    dev = tj.device(device)
    if not getattr(dev, "keeps_compiled_kernels", True):
        pytest.skip(f"{device} keeps no compiled kernels on disk: {dev.no_disk_cache}")


def unprivileged() -> list[str]:
    """A command prefix under which a child is bound by file permissions: as is when not root; as nobody
    (uid 65534) when it can run this interpreter and checkout; else uid 0 with every capability dropped
    (the interpreter may live under /root, out of nobody's reach), which permissions bind as any user."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): no way to drop privileges for the child")
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*nobody, sys.executable, "-c", "import tracejit"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])), cwd="/")
    if probe.returncode == 0:
        return nobody
    capless = [setpriv, "--bounding-set=-all", "--inh-caps=-all"]
    probe = subprocess.run([*capless, sys.executable, "-c", "pass"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot drop privileges (setpriv as uid 65534 or without capabilities): {probe.stderr}")
    return capless


# ---- scenarios every GPU runtime runs without a GPU (tests/test_cuda_runtime.py, tests/test_metal.py) ----

def _scatter_add(table, i, d):
    grad = np.zeros_like(table)
    np.add.at(grad, i, d)
    return grad


def check_scatter_add(device: str) -> None:
    """np.add.at accumulates duplicate indices; an index out of bounds raises NumPy's IndexError."""
    table, d = np.zeros((4, 3), np.float32), np.arange(9.0, dtype=np.float32).reshape(3, 3)
    scatter_add = tj.kernel(_scatter_add)
    with pytest.raises(tj.IndexOutOfBoundsError, match="^index 4 is out of bounds for axis 0 with size 4$"):
        scatter_add(table, np.array([1, 4, 1], np.int32), d, device=device)
    np.testing.assert_array_equal(scatter_add(table, np.array([1, -1, 1], np.int32), d, device=device).numpy(),
                                  _scatter_add(table, np.array([1, -1, 1], np.int32), d))
    # large: the SCATTER op's atomics (float32 add natively or by compare-and-swap, int32 max natively)
    rng = np.random.default_rng(16)
    table, i = np.zeros((2000, 3), np.float32), rng.integers(-2000, 2000, 30_000).astype(np.int32)
    d = rng.standard_normal((30_000, 3)).astype(np.float32)
    np.testing.assert_allclose(scatter_add(table, i, d, device=device).numpy(), _scatter_add(table, i, d),
                               rtol=1e-5, atol=1e-4)
    counts = tj.kernel(_scatter_max)(i, d.astype(np.int32), device=device).numpy()
    np.testing.assert_array_equal(counts, _scatter_max(i, d.astype(np.int32)))


def _scatter_max(i, d):
    top = np.full((2000, 3), -5, np.int32)
    np.maximum.at(top, i, d)
    return top


def _shift_scale(x, y):
    x[1:] = x[:-1] * 2         # reads what it writes: computed apart, copied into x
    y *= 3                     # elementwise: written in place
    return x + y


def check_assigned_arguments(device: str, rng: np.random.Generator):
    """Arguments assigned into change for the caller (device arrays and host arrays); returns the kernel
    and the host inputs for out= checks."""
    f = tj.kernel(_shift_scale)
    hx, hy = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    ex, ey = hx.copy(), hy.copy()
    expected = _shift_scale(ex, ey)
    x, y = tj.asarray(hx, device=device), tj.asarray(hy, device=device)
    np.testing.assert_allclose(f(x, y, device=device).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), ex, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), ey, rtol=1e-6)
    mx, my = hx.copy(), hy.copy()  # host arrays are written back too
    f(mx, my, device=device)
    np.testing.assert_allclose(mx, ex, rtol=1e-6)
    np.testing.assert_allclose(my, ey, rtol=1e-6)
    return f, hx, hy



# ---------------------------------------------------------------------------------------------
# Reading a numba kernel's source, in either of its renderings (codegen/cpu/numba.py's Python, or
# codegen/cpu/native.py's LLVM IR under a one-line Python function)


def native_ir(source: str) -> str | None:
    """The LLVM IR of a natively rendered numba kernel's module, else None (a Python rendering)."""
    from tracejit.codegen.cpu.numba import native_ir as ir_of
    return ir_of(source)


def loop_extents(source: str) -> list[int]:
    """The constant extents of a numba kernel's loops (a hidden one's too: opaque_extent)."""
    native = native_ir(source)
    if native is not None:
        return [int(n) for n in re.findall(r'icmp slt i64 %"[^"]+", (\d+)|"=r,0"\(i64 (\d+)\)', native) for n in n if n]
    return [int(n) for n in re.findall(r"range\((?:opaque_extent\()?(\d+)\)", source)]


def divides_indices(source: str) -> bool:
    """Whether a numba kernel divides an index (or takes its remainder) anywhere."""
    native = native_ir(source)
    if native is not None:
        return "sdiv" in native or "srem" in native
    return "//" in source or "%" in source


_MODULES = itertools.count()   # (module_from_source's file names)


def module_from_source(source: str, directory: str, stem: str):
    """A module written to `directory` as a real file (so tracejit reads the functions' source, as it reads a
    user's) and imported under a name made unique from `stem`."""
    path = os.path.join(directory, f"{stem}_{os.getpid()}_{next(_MODULES)}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
