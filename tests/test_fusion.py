"""Fusion: programs the design promises as one kernel lower to exactly one, with rendered source,
and the fused kernel computes what NumPy computes."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, erf_reference, native_ir, random_array, run_kernel

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x, *, ns=np):
    return 0.5 * x * (1.0 + ns.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def gelu_erf(x, *, ns=np):
    erf = tj.erf if ns is tj else erf_reference  # NumPy has no erf
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def multiply_add(a, b, c, *, ns=np):
    return a * b + c


def row_dot(x, y, *, ns=np):
    return (x * y).sum(axis=1)


def softmax(x, *, ns=np, axis=-1):
    e = ns.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, *, ns=np):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - ns.log(ns.exp(shifted).sum(axis=-1, keepdims=True))


def layernorm(x, weight, bias, *, ns=np):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / ns.sqrt(variance + 1e-5) * weight + bias


def rmsnorm(x, weight, *, ns=np):
    return x / ns.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * weight


def layernorm_var(x, weight, bias, *, ns=np):
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5) * weight + bias


def std_last_axis(x, *, ns=np):
    return np.std(x, axis=-1)


def logsumexp_last_axis(x, *, ns=np):
    if ns is tj:
        return tj.logsumexp(x, axis=-1)
    m = x.max(axis=-1, keepdims=True)  # NumPy has no logsumexp: the textbook form as the reference
    return (np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m)[:, 0]


def argmax_last_axis(x, *, ns=np):
    return np.argmax(x, axis=-1).astype(np.int32)  # int32 so that webgpu (no int64) runs it too


def softmax_middle_axis(x, *, ns=np):
    return softmax(x, ns=ns, axis=1)


def transpose_plus_one(x, *, ns=np):
    return x.T + 1.0


def f32(rng, *shape, low=-3.0, high=3.0):
    return random_array(rng, shape, "float32", low=low, high=high)


# name: (program, inputs from a seeded rng). A program takes the namespace of its functions (np or tj)
# as keyword `ns`, so the same code is traced by tracejit and run by NumPy as the reference.
ONE_KERNEL_PROGRAMS = {
    "gelu tanh": (gelu_tanh, lambda rng: (f32(rng, 64, 128),)),
    "gelu erf": (gelu_erf, lambda rng: (f32(rng, 64, 128),)),
    "a*b+c broadcast": (multiply_add, lambda rng: (f32(rng, 64, 1), f32(rng, 1, 32), f32(rng, 32))),
    "(x*y).sum(axis=1)": (row_dot, lambda rng: (f32(rng, 64, 48), f32(rng, 64, 48))),
    "softmax": (softmax, lambda rng: (f32(rng, 64, 100),)),
    "log-softmax": (log_softmax, lambda rng: (f32(rng, 64, 100),)),
    "layernorm": (layernorm, lambda rng: (f32(rng, 64, 100), f32(rng, 100), f32(rng, 100))),
    "rmsnorm": (rmsnorm, lambda rng: (f32(rng, 64, 100), f32(rng, 100))),
    "layernorm with np.var": (layernorm_var, lambda rng: (f32(rng, 64, 100), f32(rng, 100), f32(rng, 100))),
    "np.std over the last axis": (std_last_axis, lambda rng: (f32(rng, 64, 100),)),
    "logsumexp over the last axis": (logsumexp_last_axis, lambda rng: (f32(rng, 64, 100),)),
    "argmax over the last axis": (argmax_last_axis, lambda rng: (f32(rng, 64, 100),)),
    "softmax over middle axis": (softmax_middle_axis, lambda rng: (f32(rng, 8, 16, 12),)),
    "x.T + 1": (transpose_plus_one, lambda rng: (f32(rng, 48, 40),)),
}

# Strided inputs are read in place: no copy kernel in front of the computation.
STRIDED_INPUTS = {
    "x.T": lambda base: base.T,
    "x[::2]": lambda base: base[::2],
    "x[::-1]": lambda base: base[::-1],
    "x[:, ::-1]": lambda base: base[:, ::-1],
}


def assert_one_kernel(plan) -> None:
    kernels = list(plan.kernels)
    assert len(kernels) == 1, f"expected one fused kernel, got {len(kernels)}: {[k.name for k in kernels]}"
    (kernel,) = kernels
    assert isinstance(kernel.name, str) and kernel.name
    assert isinstance(kernel.source, str) and kernel.source.strip()


def make_kernel(program):
    """A tracejit kernel of the program with tj as its namespace, keeping the program's arity."""
    arity = program.__code__.co_argcount  # positional parameters; ns is keyword-only
    if arity == 1:
        return tj.kernel(lambda a: program(a, ns=tj))
    if arity == 2:
        return tj.kernel(lambda a, b: program(a, b, ns=tj))
    return tj.kernel(lambda a, b, c: program(a, b, c, ns=tj))


@pytest.mark.parametrize("name", list(ONE_KERNEL_PROGRAMS))
def test_program_lowers_to_one_kernel(name, device, rng):
    program, make_inputs = ONE_KERNEL_PROGRAMS[name]
    assert_one_kernel(make_kernel(program).lower(*make_inputs(rng), device=device))


@pytest.mark.parametrize("name", list(ONE_KERNEL_PROGRAMS))
def test_fused_program_matches_numpy(name, device, rng):
    program, make_inputs = ONE_KERNEL_PROGRAMS[name]
    inputs = make_inputs(rng)
    with np.errstate(all="raise"):
        expected = program(*inputs, ns=np)
    assert_close(run_kernel(make_kernel(program), *inputs, device=device), expected, atol=1e-5)


@pytest.mark.parametrize("view", list(STRIDED_INPUTS))
def test_strided_input_is_read_in_place_by_one_kernel(view, device, rng):
    x = STRIDED_INPUTS[view](f32(rng, 32, 24))
    assert not x.flags.c_contiguous

    @tj.kernel
    def plus_one(x):
        return x + 1.0

    assert_one_kernel(plus_one.lower(x, device=device))
    assert_close(run_kernel(plus_one, x, device=device), x + 1.0)


def test_numba_row_loops_take_the_shapes_llvm_vectorises(monkeypatch):
    """Performance pins of the Python rendering (benchmarks/bench.py measures the speed): every computed index
    is unsigned (a signed one made the row loops gathers and scatters), a float sum's step is the one
    reassociable operation, and max keeps NaN in a flag of its own, out of the select."""
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")
    x = np.zeros((64, 1024), np.float32)

    @tj.kernel
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    (k,) = softmax.lower(x, device="numba").kernels
    assert "numba.uint64(" in k.source and "reassoc_add(" in k.source and "_nan |=" in k.source
    assert " or " not in k.source


@pytest.mark.parametrize("width", [8, 32, 64, 1024, 4096])
def test_numba_row_sums_stay_vector_loops_at_every_row_length(width, rng, numba_renderer):
    """Performance pins (benchmarks/rows.py measures the speed): a row loop of 16-2048 elements whose body
    calls no math function hides its constant length from LLVM (opaque_extent), which otherwise unrolled it
    whole first and left the sum a chain of scalar adds (layernorm on rows of 32: 4.5x slower); a longer
    row is summed in float32 blocks of 1024 (no float64 conversion per element); the exp loop of a softmax
    keeps its known length. Checked in the LLVM IR of the kernel compiled as the device compiles it."""
    import numba

    from tracejit.codegen.cpu.numba import BLOCKED_ROW_MAX
    from tracejit.runtime.numba.cache import FASTMATH

    x = random_array(rng, (64, width), np.float32)

    @tj.kernel(dynamic=False)
    def layernorm(x):
        mean = x.mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

    assert_close(layernorm(x), (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5))
    (k,) = layernorm.lower(x, device="numba").kernels
    native = native_ir(k.source)
    assert native is None or numba_renderer == "native"   # (a prange loop stays Python: Numba's parfor)
    # both sums' loops, and below 64 the elementwise loop too
    hidden = native.count('asm  "", "=r,0"') if native else k.source.count("opaque_extent(")
    assert hidden == (0 if width < 16 else 3 if width < 64 else 2), k.source
    if width > BLOCKED_ROW_MAX and not native:
        assert "_block = np.float32(0.0)" in k.source and "np.float64(v" not in k.source.split("_block")[0]
    if width > BLOCKED_ROW_MAX and native:   # float32 blocks, each block's total widened once: no fpext in the loop
        assert native.count("fpext float") == 2, native
    module: dict = {}
    exec(compile(k.source, "<kernel>", "exec"), module)
    fn = numba.njit(nogil=True, fastmath=FASTMATH, error_model="numpy")(module[k.name])
    flat = x.reshape(-1)
    fn(*((0, 64) if "tj_start" in k.source else (64,)), np.empty_like(flat), flat)
    llvm_ir = fn.inspect_llvm(fn.signatures[0])
    if width >= 16:
        assert re.search(r"fadd reassoc contract <\d+ x float>", llvm_ir), "the row sum was not vectorised"

    @tj.kernel(dynamic=False)
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    (k,) = softmax.lower(x, device="numba").kernels
    native = native_ir(k.source)
    if native:   # the exp loop: the one whose body calls exp_f32
        exp_loop = native.split('call float @"tracejit.exp_f32"')[0].rsplit("\nloop", 1)[1]
        assert 'asm  "", "=r,0"' not in exp_loop.split("\nbody")[0] or width > BLOCKED_ROW_MAX
    else:
        exp_loop = k.source.split("exp_f32(")[0].rsplit("for ", 1)[1]
        assert "opaque_extent" not in exp_loop or width > BLOCKED_ROW_MAX


@pytest.mark.parametrize("shape", [(64, 768), (3, 1024), (2, 3, 512), (5, 7), (1, 4096), (16, 3, 5)])
def test_numba_broadcast_rows_loop_over_columns_without_a_division_per_element(shape, rng, numba_renderer):
    """x @ w + b's bias: the dimensions cannot merge, and a flat index paid an integer modulo per element
    to find its column (a 64x768 GELU epilogue 594 -> ~60 us once the columns were an inner loop)."""
    x = random_array(rng, shape, np.float32)
    b = random_array(rng, shape[-1:], np.float32)
    f = tj.kernel(lambda x, b: np.tanh(x + b) * 2)
    assert_close(f(x, b), np.tanh(x + b) * 2)
    (k,) = f.lower(x, b, device="numba").kernels
    if math.prod(shape[:-1]) * shape[-1] >= 16 * 64 and shape[-1] % 64 == 0:
        native = native_ir(k.source)
        if native:   # the last loop opened: its body block, up to the next block
            innermost = re.split(r"\n[\w.]+:\n", native.rsplit("\nbody", 1)[1], maxsplit=1)[0]
            assert "sdiv" not in innermost and "srem" not in innermost, native
        else:
            innermost = k.source.rsplit("for ", 1)[1]     # the column loop: no index division left in it
            assert "%" not in innermost and "//" not in innermost


def test_numba_float64_exp_and_tanh_are_tracejits_vectorisable_ones_beside_ldexp(rng, monkeypatch):
    """Float64 exp/tanh call numba_math's exp_f64/tanh_f64 (libm keeps a loop scalar); with more calls
    than MATH_INLINE_MAX they become the *_called versions, which must not rename ldexp_f64. The same in
    the Python rendering and in the LLVM IR of the native one."""
    def f(x):
        return np.ldexp(x, 3) + sum(np.exp(x * k) for k in range(1, 6)) + np.tanh(x)

    x = random_array(rng, (300,), np.float64, low=-3, high=3)
    assert_close(tj.kernel(f)(x), f(x))
    (k,) = tj.kernel(f).lower(x, device="numba").kernels
    assert '@"tracejit.exp_f64.called"' in k.source and '@"tracejit.tanh_f64"' in k.source
    assert '@"tracejit.ldexp_f64"' in k.source
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")
    (k,) = tj.kernel(f).lower(x, device="numba").kernels
    assert "exp_f64_called(" in k.source and "tanh_f64(" in k.source and "ldexp_f64(" in k.source
    assert "np.exp(" not in k.source and "np.tanh(" not in k.source


def test_numba_kernels_beside_a_blas_product_run_on_tracejits_threads_not_openmps(monkeypatch):
    """OpenMP's threads (prange) spin after their loop as OpenBLAS's do after a product: on 2 cores each
    kept the other from running (a Llama block 8.0 -> 1.75 ms once its kernels used tracejit's threads).
    Not where MKL's libgomp threads spin long after each product (tests/test_blas.py): a process whose
    libgomp something loaded before the numba device opened."""
    from tracejit.runtime.numba import blas
    monkeypatch.setattr(blas, "products_spin_long", lambda: False)
    def attention(q, k, v):
        s = q @ k.T / np.sqrt(q.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((512, 256), dtype=np.float32) for _ in range(3))
    f = tj.kernel(attention)
    np.testing.assert_allclose(f(q, k, v), attention(q, k, v), rtol=1e-4, atol=1e-5)
    sources = [kern.source for kern in f.lower(q, k, v, device="numba").kernels]
    assert any("matmul (BLAS)" in s for s in sources)
    generated = [s for s in sources if "def k" in s]
    assert generated and all("prange" not in s for s in generated)
    assert any("tj_start" in s for s in generated)   # the softmax, 512 rows of 512, runs in chunks
    # without a product the same softmax still runs on OpenMP's threads (Numba's prange, or the entry point of
    # a kernel LLVM compiles directly)
    soft = tj.kernel(lambda s: np.exp(s - s.max(axis=-1, keepdims=True)))
    source = soft.lower(q, device="numba").kernels[0].source
    assert "prange" in source or "OpenMP's threads" in source


@pytest.mark.parametrize("dtype, cols", [(np.float32, 1024), (np.float64, 12000)])
def test_numba_scratch_rows_are_on_the_stack_up_to_64kb_and_on_the_heap_beyond(rng, dtype, cols, monkeypatch):
    """A softmax keeps its row of exps in scratch: a stack array (numba_math.stack_empty, no Numba compile
    of np.empty's overload) while it fits in STACK_SCRATCH_MAX bytes, np.empty beyond; both match NumPy,
    also when the rows run on several threads. (The Python rendering's; the IR's rows are allocas.)"""
    from tracejit.codegen.cpu.numba import STACK_SCRATCH_MAX
    monkeypatch.setenv("TRACEJIT_NUMBA_NATIVE", "0")

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = random_array(rng, (64, cols), dtype, low=-5, high=5)
    f = tj.kernel(softmax)
    got = f(x, device="numba")
    assert got.dtype == dtype
    np.testing.assert_allclose(got, softmax(x), rtol=2e-6, atol=1e-12)
    (k,) = f.lower(x, device="numba").kernels
    on_stack = cols * x.itemsize <= STACK_SCRATCH_MAX
    assert ("stack_empty(" in k.source) == on_stack
    assert (" empty(" in k.source) != on_stack


def test_numba_kernel_compile_is_one_numba_compile_without_helpers_compiled_apart(tmp_path):
    """exp, tanh, log and scratch rows are emitted into the kernel's own module (numba_ir intrinsics):
    a new process's first softmax once spent half its compile on Numba compiles of exp_f32 and of
    np.empty's overload. Counted in a fresh process, where nothing was compiled before."""
    code = textwrap.dedent("""
        import json
        import numpy as np
        from numba.core import event
        import tracejit as tj

        compiles = []

        class Count(event.Listener):
            def on_start(self, ev):
                compiles.append(ev.data["dispatcher"].py_func.__name__)

            def on_end(self, ev):
                pass

        def f(x, w):
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return np.tanh(e * w) + np.log(x * x + 1) + np.exp(x.astype(np.float64))

        x = np.random.default_rng(0).uniform(-3, 3, (64, 1024)).astype(np.float32)
        w = np.linspace(-1, 1, 1024, dtype=np.float32)
        with event.install_listener("numba:compile", Count()):
            got = tj.kernel(f)(x, w, device="numba")
        want = f(x, w)
        print(json.dumps({"compiles": compiles, "dtype": [str(got.dtype), str(want.dtype)],
                          "error": float(np.max(np.abs(got - want) / np.abs(want)))}))
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), TRACEJIT_CACHE_DIR=str(tmp_path),
               TRACEJIT_NUMBA_NATIVE="0")   # Numba's compiles of the Python rendering
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["dtype"][0] == report["dtype"][1] == "float64"
    assert report["error"] < 1e-6
    # kernels are compiled under one shared name (cache_key.SHARED_NAME), helpers under their own
    assert report["compiles"] and set(report["compiles"]) == {"tj_kernel"}, report["compiles"]
