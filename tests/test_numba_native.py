"""The numba device's native renderer (codegen/cpu/native.py): which kernels it takes, and that what it
compiles gives the same bits as the Python source Numba compiled before it, on special values too."""
from __future__ import annotations

import contextlib

import cuda_check
import numpy as np
import pytest

import tracejit as tj
from reference import assert_close
from tracejit.codegen.cpu import llvm_math
from tracejit.codegen.cpu.llvm_values import host_scalef

FLOATS = (np.float32, np.float64)
ALL_FLOATS = (np.float16, np.float32, np.float64)   # float16: computed in float32 and rounded, both ways
INTS = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64)


def _special(dtype, n: int = 64) -> np.ndarray:
    """n values of dtype, its edge cases first (NaN, +-0, +-inf, extremes), then random ones."""
    rng = np.random.default_rng(np.dtype(dtype).num)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(n) < 0.5
    if dt.kind == "f":
        info = np.finfo(dt)
        edge = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, info.max, -info.max, info.tiny, info.smallest_subnormal,
                1.0, -1.0, 0.5, -2.5]
        rest = rng.standard_normal(n - len(edge)) * 4
    else:
        info = np.iinfo(dt)
        edge = [info.min, info.max, 0, 1, info.max - 1, info.min + 1]
        rest = rng.integers(info.min, info.max, n - len(edge), dtype=dt, endpoint=True)
    return np.concatenate([np.array(edge, dtype=dt), np.asarray(rest).astype(dt)])


def _source(fn, *args) -> str:
    (k,) = fn.lower(*args, device="numba").kernels
    return k.source


def _both(monkeypatch, body, *args, static=None):
    """body's results with each numba kernel rendered natively, and with every kernel Python for Numba."""
    out = []
    for native in ("1", "0"):
        monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", native)
        kernel = tj.kernel(body) if static is None else tj.kernel(static=static)(body)
        out.append(kernel(*args, device="numba"))
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "1")
    return out


def _same_bits(a, b) -> None:
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))


def test_the_benchmark_kernels_are_native_and_others_stay_python(monkeypatch):
    x = np.zeros((4096, 1024), np.float32)

    @tj.kernel
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    assert "tracejit.codegen.cpu.native_call" in _source(softmax, x)
    small = np.zeros(64, np.float32)
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda x: np.sin(x)), small)   # libm's sinf
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda x: (x * 255).astype(np.uint8)), small)
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda x: (x // 0.25, x % 2.0)), small)
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda x: x.astype(np.float16) * 2), small)
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda x: np.sort(x)), small)   # llvm_sort
    assert "tracejit.codegen.cpu.native_call" not in _source(tj.kernel(lambda x: np.cbrt(x)), small)   # Numba's
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")
    assert "tracejit.codegen.cpu.native_call" not in _source(tj.kernel(lambda x: x.max(axis=-1)), x)


@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_float_ops_give_the_python_renderings_bits(dtype, monkeypatch):
    x = _special(dtype)
    y = np.roll(x, 5)

    def body(x, y):
        return (x + y, x - y, x * y, x / y, -x, np.abs(x), np.sqrt(np.abs(y)), np.floor(x), np.ceil(y), np.trunc(x),
                np.rint(y), np.maximum(x, y), np.minimum(x, y), np.copysign(x, y), 1 / x, np.exp(x), np.tanh(y),
                np.where(x < y, x, y), x <= y, x == y, x != y, np.isnan(x), np.isinf(y), np.signbit(x),
                x.astype(np.float64 if x.dtype == np.float32 else np.float32), (x != 0) & (y > 1), np.sign(x),
                x ** y, np.power(np.abs(x), 0.5), x ** 2, np.power(y, x - 1), x // y, x % y, *np.divmod(y, x),
                np.fmod(x, y), np.ldexp(x, np.arange(x.size, dtype=np.int32) % 300 - 150), np.ldexp(y, 3))

    with np.errstate(all="ignore"):
        native, python = _both(monkeypatch, body, x, y)
        _same_bits(native, python)
        assert_close(native, body(x, y))


@pytest.mark.parametrize("dtype", (*ALL_FLOATS, *INTS, np.bool_))
def test_row_sorts_give_the_python_renderings_bits_and_numpys_stable_order(dtype, monkeypatch):
    # codegen/cpu/llvm_sort.py: runs of 16 by insertion, merges of doubling width through a malloc'd copy, a
    # counting sort for one-byte keys; NaN last; rows on the stack and (past 64 KiB) on the heap, whose size a
    # symbolic size gives at run time
    def body(x):
        return np.sort(x), np.argsort(x, kind="stable"), np.sort(x.reshape(4, -1), axis=1)

    def reference(x):   # (NumPy 2.4's default float16 sort of 32,768 elements or more is out of order on AVX-512)
        return np.sort(x, kind="stable"), np.argsort(x, kind="stable"), np.sort(x.reshape(4, -1), axis=1, kind="stable")

    native_kernel, python_kernel = tj.kernel(body), tj.kernel(body)   # (after two sizes, one code for any size)
    # (a run and a merge; merges; heap rows; a symbolic size: the same code for every dtype but its comparison, which
    # the other sizes check, so for keys of each width (one-byte keys: the counting sort) in make test's budget)
    symbolic = dtype in (np.float16, np.float64, np.int32, np.int8, np.bool_)
    for n in (20, 1000, 40_000, 40_004) if symbolic else (20, 1000, 40_000):
        x = np.resize(_special(dtype), n)
        np.random.default_rng(n).shuffle(x)   # (equal keys far apart: the order that stays is the stable one)
        # (the CUDA and MSL checks on the rows CUDA sorts in blocks, of 2- and 8-byte keys: they found float16's
        # shared memory; the positions, exactly NumPy's stable ones, show any other order of equal keys)
        checked = n == 40_000 and dtype in (np.float16, np.float64)
        with contextlib.nullcontext() if checked else cuda_check.checks_paused():
            native = native_kernel(x, device="numba")
        for a, b in zip(native, reference(x)):   # (NumPy's SIMD sort writes its NaNs as one NaN: values)
            assert np.asarray(a).dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a), b)
        if n != 20 or np.dtype(dtype).kind != "f":   # (the Python rendering, compiled by Numba: NaNs' bits)
            continue
        monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")
        with cuda_check.checks_paused():
            python = python_kernel(x, device="numba")
        monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "1")
        if dtype == np.float16:   # (the Python rendering's float16 NaN loses its sign and payload on the way)
            for a, b in zip(native, python):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            _same_bits(native, python)
    assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(np.sort), np.resize(_special(dtype), 40_000))


@pytest.mark.skipif(not host_scalef(), reason="no AVX-512 here: exp scales by two factors, the only way it runs")
def test_exp_scaled_in_one_instruction_gives_the_two_factors_bits(monkeypatch):
    """On AVX-512, exp's final y * 2**n is LLVM's ldexp (one vscalefps/pd, rounding once) instead of two
    exact factors: the same bits everywhere, subnormal results and overflow included."""
    bits = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([bits, np.linspace(-110, -80, 200_001, dtype=np.float32),
                        np.linspace(80, 89.5, 100_001, dtype=np.float32)])
    wide = np.concatenate([x.astype(np.float64), np.linspace(-746, -700, 100_001), np.linspace(700, 710, 100_001)])
    out = []
    for scalef in (True, False):
        monkeypatch.setattr(llvm_math, "host_scalef", lambda scalef=scalef: scalef)
        with np.errstate(all="ignore"):
            out.append(tj.kernel(lambda a, b: (np.exp(a), np.exp(b), np.tanh(a)))(x, wide, device="numba"))
    _same_bits(out[0], out[1])


@pytest.mark.parametrize("dtype", ALL_FLOATS)
def test_float_to_integer_casts_give_the_python_renderings_bits_and_numpys(dtype, monkeypatch):
    """In range or not (NaN, infinities, past the type): the same bits both ways, and NumPy's 0-d answers."""
    x = np.concatenate([_special(dtype), np.array([300.7, -300.7, -1.5, 70000.5, 3e9, -3e9, 1e10, 2.0 ** 63,
                                                   -2.0 ** 63, 2.0 ** 64, 1e30], dtype)])
    targets = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)

    def body(x):
        return tuple(x.astype(t) for t in targets)

    with np.errstate(all="ignore"):
        native, python = _both(monkeypatch, body, x)
        _same_bits(native, python)
        for t, got in zip(targets, native):
            assert_close(got, np.array([np.asarray(v).astype(t) for v in x]))


def test_float32_log_and_erf_give_the_python_renderings_bits(monkeypatch):
    x = _special(np.float32)
    with np.errstate(all="ignore"):
        _same_bits(*_both(monkeypatch, lambda x: (np.log(x), tj.erf(x)), x))


@pytest.mark.parametrize("dtype", INTS)
def test_integer_ops_wrap_and_compare_as_the_python_rendering_does(dtype, monkeypatch):
    x = _special(dtype)
    y = np.roll(x, 3)

    def body(x, y):
        return (x + y, x - y, x * y, -x, ~x, x & y, x | y, x ^ y, np.maximum(x, y), np.minimum(x, y),
                x < y, x <= y, x == y, x != y, np.where(x > y, x, y), x.astype(np.float32), x.astype(np.int16),
                x.astype(bool), x.sum(), x.max(), x.min(), np.cumsum(x), x // y, x % y, x // np.roll(y, 1) % 7,
                x // (y & 3), x % (y & 3),   # (divisors 0 and, signed, -1: 0, wrapping, 0)
                np.fmod(x, y), np.fmod(x, y & 3), np.sign(x), x << (y & 15), x >> (y & 15), x << (y % 70),
                x >> (y % 70))   # (shifts by the width or more, and by negative counts: 0, or -1)

    with np.errstate(all="ignore"):
        native, python = _both(monkeypatch, body, x, y)
        _same_bits(native, python)
        assert_close(native, body(x, y))


def test_row_reductions_keep_nan_and_signed_zero_as_numpy(monkeypatch):
    x = np.random.default_rng(0).standard_normal((40, 300)).astype(np.float32)
    x[3, 17], x[5, 0], x[7, -1] = np.nan, np.nan, np.inf
    x[9] = -0.0
    x[11, :] = -np.inf
    x[13, :] = 1.001   # a product that stays in float32's range (NumPy's float32 product underflows where
                       # tracejit's float64 accumulator does not)

    def body(x):
        return (x.max(axis=1), x.min(axis=1), x.sum(axis=1), x[9:14].prod(axis=1), x.mean(axis=1), x.var(axis=1),
                np.argmax(x, axis=1), (x > 0).all(axis=1), (x > 0).any(axis=1))

    with np.errstate(all="ignore"):
        native, python = _both(monkeypatch, body, x)
        assert_close(native, body(x))
        assert_close(python, body(x))
        # no reassociated sum in max, min, prod's NaNs, argmax, all or any: the same bits
        for i in (0, 1, 6, 7, 8):
            _same_bits(native[i], python[i])


@pytest.mark.parametrize("n", [3, 7, 8, 9, 1000, 3000])
def test_sums_over_rows_of_any_length_match_numpy(n, monkeypatch):
    """Rows shorter than 8 add in NumPy's order, longer ones in float32 blocks with float64 totals."""
    x = np.random.default_rng(n).standard_normal((33, n)).astype(np.float32)
    f = tj.kernel(lambda x: (x.sum(axis=1), (x * x).mean(axis=1)))
    got = f(x, device="numba")
    if n < 8:
        _same_bits(got[0], x.sum(axis=1))
    exact = x.astype(np.float64).sum(axis=1)   # NumPy's float32 sum is itself this far from it
    bound = 4 * np.finfo(np.float32).eps * np.abs(x).sum(axis=1)
    assert (np.abs(got[0] - exact) <= bound).all() and got[0].dtype == np.float32
    assert_close(got[1], (x * x).mean(axis=1))


def test_gathers_powers_and_tables_record_faults_and_give_the_python_renderings_bits(monkeypatch):
    rng = np.random.default_rng(5)
    table = rng.standard_normal(50).astype(np.float32)
    for dtype in (np.int8, np.uint8, np.int32, np.int64):
        index = rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, 200).astype(dtype)
        base = rng.integers(-4, 5, 200).astype(dtype)
        exponent = rng.integers(0, 9, 200).astype(dtype)

        def body(t, i, a, e):
            return t[i] * 2, a ** e, np.take(np.arange(10.0), np.abs(i.astype(np.int64)) % 10)

        with np.errstate(all="ignore"):
            native, python = _both(monkeypatch, body, table, index, base, exponent)
            _same_bits(native, python)
            assert_close(native, body(table, index, base, exponent))
        assert "tracejit.codegen.cpu.native_call" in _source(tj.kernel(lambda t, i: t[i] * 2), table, index)
    bad = np.array([3, 50, 1])
    with pytest.raises(tj.IndexOutOfBoundsError, match="index 50 is out of bounds for axis 0 with size 50"):
        tj.kernel(lambda t, i: t[i] * 2)(table, bad, device="numba")
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        tj.kernel(lambda a, e: a ** e)(np.arange(4), np.array([1, 2, -1, 0]), device="numba")
    base, exponent = np.array([2, 3, 7], np.uint32), np.array([2**31 + 1, 5, 2**32 - 1], np.uint32)   # wraps
    np.testing.assert_array_equal(tj.kernel(lambda a, e: a ** e)(base, exponent, device="numba"), base ** exponent)


# ---- LLVM directly (runtime/numba/llvm_jit.py): object code, its entry point, the cache's payload ----

ADD_ONE = """define void @"tj_native"(i64 %start, i64 %stop, i64 %scale, float* %out, float* %x) nounwind {
entry:
  br label %loop
loop:
  %i = phi i64 [%start, %entry], [%next, %body]
  %more = icmp slt i64 %i, %stop
  br i1 %more, label %body, label %done
body:
  %p = getelementptr inbounds float, float* %x, i64 %i
  %v = load float, float* %p
  %s = sitofp i64 %scale to float
  %w = fmul float %v, %s
  %q = getelementptr inbounds float, float* %out, i64 %i
  store float %w, float* %q
  %next = add i64 %i, 1
  br label %loop
done:
  ret void
}
"""


@pytest.fixture(scope="module")
def scale_entry():
    """out[i] = x[i] * scale over [0, size), through llvm_jit's object code and entry point."""
    from tracejit.runtime.numba import llvm_jit
    obj = llvm_jit.compile_object(ADD_ONE, "tj_native", "tracejit.test.scale", serial=True)
    return llvm_jit.load(obj, "tracejit.test.scale", "scale"), obj


def test_the_entry_point_takes_the_python_functions_arguments_and_refuses_what_it_cannot_read(scale_entry):
    """Sizes as Python or NumPy integers, writable or read-only contiguous arrays (an ndarray subclass too);
    a wrong count, a non-integer size, a non-array and a strided or unaligned array are a TypeError, after
    Numba's import too (which gives PyExc_TypeError's C name another meaning in LLVM's symbol table)."""
    import numba   # noqa: F401 - the order that crashed: Numba imported and compiling, then a refusal
    numba.njit(lambda a: a + 1)(1)
    from tracejit.runtime.numba import llvm_jit
    entry, _ = scale_entry
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    assert entry(np.int32(5), 3, out, x) is None
    np.testing.assert_array_equal(out, np.r_[x[:5] * 3, np.zeros(3, np.float32)])
    frozen = x.copy()
    frozen.flags.writeable = False
    entry(8, 2, out, frozen.view(np.recarray))   # a read-only ndarray subclass
    np.testing.assert_array_equal(out, x * 2)
    unaligned = np.frombuffer(b"\0" + x.tobytes(), np.float32, 8, 1)
    for args in [(8, 2, out), (8, 2, out, x, x), (8, 2.5, out, x), (8, 2, out, list(x)),
                 (4, 2, out, np.arange(8.0, dtype=np.float32)[::2]), (8, 2, out, unaligned)]:
        with pytest.raises(TypeError):
            entry(*args)
    fallback = llvm_jit.fallback(entry)
    strided_out = np.zeros(16, np.float32)[::2]
    fallback(8, 3, strided_out, unaligned)   # copies in, the written copy back
    np.testing.assert_array_equal(strided_out, x * 3)


def test_a_payload_that_is_not_object_code_of_this_machine_is_refused_before_llvm_reads_it(scale_entry):
    from tracejit.runtime.numba import llvm_jit
    _, obj = scale_entry
    llvm_jit.check_object(obj)
    foreign = bytearray(obj)
    foreign[18] ^= 0xFF   # e_machine
    for bad in (b"", b"garbage" * 20, obj[:40], obj[: len(obj) // 2], bytes(foreign)):
        with pytest.raises(llvm_jit.BadObject):
            llvm_jit.check_object(bad)


def test_a_first_call_compiles_with_llvm_directly_and_keeps_numba_s_results(monkeypatch):
    """The default (TRACEJIT_NUMBA_NATIVE=1) and Numba compiling the same IR (=numba) give the same bits."""
    x = _special(np.float32, 300).reshape(3, 100)
    out = []
    for mode in ("1", "numba"):
        monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", mode)
        with np.errstate(all="ignore"):
            out.append(tj.kernel(lambda x: (np.exp(x - x.max(axis=-1, keepdims=True)), np.tanh(x) * 2))(
                x, device="numba"))
    _same_bits(out[0], out[1])


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_c_librarys_functions_give_the_python_renderings_bits(dtype, monkeypatch):
    """The ufuncs both renderings compute with libm (codegen/llvm_ops.LIBM): the same calls, the same bits,
    on NaN, signed zeros, infinities, extremes and random values, inside and outside each domain."""
    from tracejit.codegen.cpu.llvm_ops import LIBM
    x = _special(dtype, 96)
    y = np.roll(x, 7)
    unary = sorted(op for dt, op in LIBM if dt == dtype and op not in ("arctan2", "hypot"))
    functions = {"erf": None, **{op: getattr(np, op) for op in unary if op != "erf"}}
    assert "sin" in functions and ("log" in functions) == (dtype == np.float64)

    def body(x, y):
        out = [functions[op](x) for op in unary if functions[op] is not None]
        return (*out, np.arctan2(x, y), np.hypot(x, y), np.log1p(np.abs(y)) * 2)

    source = _source(tj.kernel(body), x, y)
    assert "tracejit.codegen.cpu.native_call" in source
    with np.errstate(all="ignore"):
        native, python = _both(monkeypatch, body, x, y)
        _same_bits(native, python)


FORKED_CHILD = """
import os, signal, numpy as np, tracejit as tj
from tracejit.runtime.numba import llvm_jit
f = tj.kernel(lambda x: np.exp(x - x.max(axis=-1, keepdims=True)))
x = np.random.default_rng(3).standard_normal((300, 1001)).astype(np.float32)
(k,) = f.lower(x, device="numba").kernels
assert k.parallel and "OpenMP's threads" in k.source, k.source
expected = np.exp(x - x.max(axis=-1, keepdims=True))
assert np.allclose(f(x, device="numba"), expected, rtol=1e-6)
pid = os.fork()
if pid == 0:   # the child: exit status 0 only for the right answer, killed if it hangs
    signal.alarm(60)
    ok = False
    try:
        ok = np.allclose(f(x, device="numba"), expected, rtol=1e-6) and llvm_jit._omp_threads.value == 0
    finally:
        os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
assert np.allclose(f(x, device="numba"), expected, rtol=1e-6)
print("ok")
"""


def test_a_mid_sized_kernel_runs_on_openmp_threads_and_serially_in_a_forked_child(tmp_path):
    """A kernel looped in parallel (64K to 4M element-operations) that LLVM compiles directly runs its parts on
    OpenMP's threads; libgomp's pool does not survive fork, so in a forked child the same kernel runs
    serially, with the same result, instead of hanging. (In a process of its own: a fork of the test
    worker would copy its threads' state.)"""
    import os
    import subprocess
    import sys
    from pathlib import Path
    from tracejit.runtime.numba import llvm_jit
    if not llvm_jit.openmp():
        pytest.skip("no libgomp here: such kernels are Numba's prange loops")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), TRACEJIT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", FORKED_CHILD], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
