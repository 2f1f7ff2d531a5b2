"""tracejit.codegen.cpu.numba_math against NumPy (and math.erf) in float64 rounded to float32: a sweep of
every 1021st float32 bit pattern plus a dense grid over each function's busy range, the IEEE edge
cases, and a check that a loop calling them is vectorised."""
from __future__ import annotations

import math
import re

import numba
import numpy as np
import pytest

from tracejit.runtime.numba.cache import FASTMATH
from tracejit.codegen.cpu.numba_math import erf_f32, exp_f32, log_f32, tanh_f32

MAX_ULP = 2
F32_MAX = float(np.finfo(np.float32).max)


@numba.njit
def _erf64(x):
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


REFERENCES = {exp_f32: np.exp, tanh_f32: np.tanh, log_f32: np.log, erf_f32: _erf64}
DENSE = {exp_f32: (-105.0, 90.0), tanh_f32: (-10.0, 10.0), log_f32: (0.0, 4.0), erf_f32: (-4.5, 4.5)}
FUNCS = list(REFERENCES)

_loops: dict = {}


def loop(fn, fastmath=False):
    """A compiled `out[i] = fn(x[i])` loop, as a kernel would call these functions."""
    key = (fn, fastmath)
    if key not in _loops:
        @numba.njit(fastmath=set(fastmath) if fastmath else False, error_model="numpy")
        def run(x):
            out = np.empty_like(x)
            for i in range(x.size):
                out[i] = fn(x[i])
            return out
        _loops[key] = run
    return _loops[key]


def reference(fn, x):
    with np.errstate(all="ignore"):
        return REFERENCES[fn](x.astype(np.float64)).astype(np.float32)


def ulp_distance(a, b):
    """Distance in representable float32 values (0 where both are NaN; -0 and +0 coincide)."""
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(ordered(a) - ordered(b))
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def sweep(fn, step=1021, dense=1 << 20):
    bits = np.arange(0, 1 << 32, step, dtype=np.uint64).astype(np.uint32)
    lo, hi = DENSE[fn]
    return np.concatenate([bits.view(np.float32), np.linspace(lo, hi, dense, dtype=np.float32)])


def assert_close(fn, x, got):
    want = reference(fn, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="NaN where the reference has none")
    ulp = ulp_distance(got, want)
    worst = int(np.argmax(ulp))
    assert ulp[worst] <= MAX_ULP, f"{ulp[worst]} ulp at x={x[worst]!r}: {got[worst]!r} vs {want[worst]!r}"


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_sweep(fn):
    x = sweep(fn)
    assert_close(fn, x, loop(fn)(x))


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_sweep_under_kernel_fastmath(fn):
    """The inlined functions keep their accuracy under the kernels' flags, and under reassociation too (a
    reduction's own steps are reassociable, numba_math.reassoc_add)."""
    x = sweep(fn, step=4093, dense=1 << 18)
    assert_close(fn, x, loop(fn, tuple(sorted(FASTMATH | {"reassoc", "nsz"})))(x))


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-40, -1e-40,
                    1.1754942e-38, 1.1754944e-38, -1.1754944e-38, F32_MAX, -F32_MAX, 88.72283, 88.72284,
                    88.7229, 89.0, -87.33654, -87.3366, -103.27893, -103.97207, -103.9721, -104.0, -150.0,
                    0.625, -0.625, 0.9, -0.9, 3.92, 4.0, 9.0, -9.0, 20.0, -20.0, 1e10], dtype=np.float32)


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_special_values_match_reference(fn):
    assert_close(fn, SPECIAL, loop(fn)(SPECIAL))


def _scalar(fn, v):
    return loop(fn)(np.array([v], dtype=np.float32))[0]


def test_exp_edges():
    assert _scalar(exp_f32, np.inf) == np.inf
    assert _scalar(exp_f32, -np.inf) == 0.0
    assert np.isnan(_scalar(exp_f32, np.nan))
    assert _scalar(exp_f32, 0.0) == 1.0 and _scalar(exp_f32, -0.0) == 1.0
    assert 3.4e38 < _scalar(exp_f32, 88.72283) < np.inf                              # largest finite
    assert _scalar(exp_f32, 88.7229) == np.inf
    assert 0 < _scalar(exp_f32, -103.0) < np.finfo(np.float32).tiny                 # subnormal result
    assert _scalar(exp_f32, -104.0) == 0.0


def test_tanh_edges():
    for v, want in [(np.inf, 1.0), (-np.inf, -1.0), (20.0, 1.0), (-20.0, -1.0), (1e-45, 1e-45), (-1e-45, -1e-45)]:
        assert _scalar(tanh_f32, v) == np.float32(want)
    assert np.signbit(_scalar(tanh_f32, -0.0)) and _scalar(tanh_f32, -0.0) == 0.0
    assert np.isnan(_scalar(tanh_f32, np.nan))


def test_log_edges():
    assert _scalar(log_f32, np.inf) == np.inf
    assert _scalar(log_f32, 0.0) == -np.inf and _scalar(log_f32, -0.0) == -np.inf
    for v in [np.nan, -1.0, -1e-45, -np.inf]:
        assert np.isnan(_scalar(log_f32, v))
    assert _scalar(log_f32, 1.0) == 0.0
    assert abs(_scalar(log_f32, 1e-45) - math.log(np.float32(1e-45))) < 1e-5      # smallest subnormal


def test_erf_edges():
    for v, want in [(np.inf, 1.0), (-np.inf, -1.0), (4.0, 1.0), (-4.0, -1.0), (0.0, 0.0)]:
        assert _scalar(erf_f32, v) == np.float32(want)
    assert np.signbit(_scalar(erf_f32, -0.0))
    assert np.isnan(_scalar(erf_f32, np.nan))
    x = np.linspace(-5, 5, 100_001, dtype=np.float32)
    assert np.max(np.abs(loop(erf_f32)(x) - _erf64(x.astype(np.float64)))) < 2e-7


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_loop_is_vectorised(fn):
    """The point of these functions: no libm call, so LLVM turns the loop into SIMD code."""
    run = loop(fn)
    run(np.ones(1, np.float32))
    llvm_ir = run.inspect_llvm(run.signatures[0])
    assert re.search(r"<\d+ x float>", llvm_ir), "the loop was not vectorised"
    assert not re.search(r"call .*@(exp|expf|tanh|tanhf|log|logf|erf|erff)\(", llvm_ir)


def test_float16_bits_to_float32_is_exact_for_all_65536_patterns():
    from tracejit.codegen.cpu.numba_math import f16_to_f32

    @numba.njit
    def widen(bits, out):
        for i in range(bits.size):
            out[i] = f16_to_f32(bits[i])

    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    out = np.empty(bits.size, np.float32)
    widen(bits, out)
    expected = bits.view(np.float16).astype(np.float32)
    same = (out.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(out) & np.isnan(expected))
    assert same.all(), bits[~same][:10]


def test_float32_to_float16_bits_rounds_like_numpy():
    from tracejit.codegen.cpu.numba_math import f32_to_f16

    @numba.njit
    def narrow(x, out):
        for i in range(x.size):
            out[i] = f32_to_f16(x[i])

    patterns = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    edges = np.array([65504, 65519.996, 65520, 6.0e-8, 2.98e-8, 2.9802322e-8, 5.96e-8, 1e-40, 0.0, -0.0,
                      np.inf, -np.inf, np.nan, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11], np.float32)
    x = np.concatenate([patterns.view(np.float32), edges, -edges])
    out = np.empty(x.size, np.uint16)
    narrow(x, out)
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16)
    got = out.view(np.float16)
    same = (out == expected.view(np.uint16)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), list(zip(x[~same][:5], got[~same][:5], expected[~same][:5]))


def _ldexp_loop(fn):
    @numba.njit(fastmath=set(FASTMATH))
    def run(x, n):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i], n[i])
        return out
    return run


@pytest.mark.parametrize(("dtype", "limit", "tiniest"), [(np.float32, 320, -149), (np.float64, 2200, -1074)])
def test_ldexp_is_exact_and_vectorised_under_kernel_fastmath(dtype, limit, tiniest):
    """ldexp_f32/ldexp_f64 against np.ldexp on random bit patterns, half of them scaled to just around
    the subnormal range (where a scaling in two steps could round twice), bit for bit."""
    from tracejit.codegen.cpu.numba_math import ldexp_f32, ldexp_f64
    rng = np.random.default_rng(14)
    size = 1 << 18
    uint = np.uint32 if dtype == np.float32 else np.uint64
    x = rng.integers(0, np.iinfo(uint).max, size, dtype=uint).view(dtype)
    n = rng.integers(-limit, limit, size)
    with np.errstate(all="ignore"):
        n[: size // 2] = np.clip(tiniest - np.frexp(x[: size // 2])[1] + rng.integers(-60, 60, size // 2), -limit, limit)
        want = np.ldexp(x, n.astype(np.int32))
    run = _ldexp_loop(ldexp_f32 if dtype == np.float32 else ldexp_f64)
    got = run(x, n.astype(dtype))
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), f"x={x[~same][:3]!r}, n={n[~same][:3]!r}: {got[~same][:3]!r}, NumPy {want[~same][:3]!r}"
    llvm_ir = run.inspect_llvm(run.signatures[0])
    assert re.search(r"<\d+ x (float|double)>", llvm_ir), "the loop was not vectorised"
    assert not re.search(r"call .*@ldexp", llvm_ir)


# ---- float64 exp and tanh, against libm (math.exp, math.tanh: correctly rounded in nearly every case) ----

@numba.njit
def _libm64(x, which):
    out = np.empty(x.size, np.float64)
    for i in range(x.size):
        if which == 2:   # (math.log raises for x <= 0: C's log, as NumPy's)
            out[i] = -np.inf if x[i] == 0 else np.nan if x[i] < 0 else np.log(x[i])
        else:
            out[i] = math.exp(x[i]) if which == 0 else math.tanh(x[i])
    return out


def _loop64(fn):
    @numba.njit(fastmath=set(FASTMATH) | {"reassoc", "nsz"}, error_model="numpy")
    def run(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = fn(x[i])
        return out
    return run


def _ulp64(a, b):
    def ordered(v):   # the int64 order of float64 bit patterns, as Python ints (no overflow)
        i = v.view(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i).astype(object)
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(ordered(a) - ordered(b))).astype(np.float64)


SPECIAL64 = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 2.2250738585072014e-308,
                      709.782712893384, 709.7827128933841, 709.79, 710.0, -708.39, -708.4, -745.1332191019411,
                      -745.14, -746.0, -1e300, 1e300, 0.625, -0.625, 0.6249999999999999, 19.0, 20.0, -20.0, 1e-8])


@pytest.mark.parametrize(("which", "max_ulp", "dense"), [(0, 1, (-750.0, 712.0)), (1, 2, (-20.0, 20.0)),
                                                      (2, 1, (0.5, 2.0))],
                         ids=["exp_f64", "tanh_f64", "log_f64"])
def test_float64_exp_tanh_and_log_within_ulps_of_libm_and_vectorised(which, max_ulp, dense):
    """Numba's float64 np.exp/np.tanh/np.log are libm calls, which keep a loop scalar; these are not. (log: random
    bit patterns, then [0.5, 2] where log is near 0 and its split at sqrt(2)/2 lies, subnormals, and the neighbours
    of every power of two.)"""
    from tracejit.codegen.cpu.numba_math import exp_f64, log_f64, tanh_f64
    rng = np.random.default_rng(64)
    run = _loop64((exp_f64, tanh_f64, log_f64)[which])
    powers = 2.0 ** np.arange(-1074, 1024, dtype=np.float64)
    near = np.concatenate([np.nextafter(powers, 0), powers, np.nextafter(powers, np.inf)])
    tiny = rng.integers(1, 1 << 52, 1 << 14, dtype=np.uint64).view(np.float64)   # subnormals
    edges = np.array([np.sqrt(0.5), np.nextafter(np.sqrt(0.5), 0), np.nextafter(np.sqrt(0.5), 1), np.sqrt(2.0),
                      np.nextafter(1.0, 0), np.nextafter(1.0, 2), 1.7976931348623157e308])
    x = np.concatenate([rng.integers(0, 1 << 64, 1 << 18, dtype=np.uint64).view(np.float64),
                        rng.uniform(*dense, 1 << 18), rng.uniform(-1.0, 1.0, 1 << 16), SPECIAL64, -SPECIAL64,
                        *((near, tiny, edges) if which == 2 else ())])
    got, want = run(x), _libm64(x, which)
    ulp = _ulp64(got, want)
    worst = int(np.argmax(ulp))
    assert ulp[worst] <= max_ulp, f"{ulp[worst]} ulp at x={x[worst]!r}: {got[worst]!r} vs libm {want[worst]!r}"
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(want[x == 0]))   # exp(-0) = 1, tanh(-0) = -0
    llvm_ir = run.inspect_llvm(run.signatures[0])
    assert re.search(r"<\d+ x double>", llvm_ir), "the loop was not vectorised"
    assert not re.search(r"call .*@(exp|tanh|log)\(", llvm_ir)
