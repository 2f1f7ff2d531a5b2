"""Index arithmetic the kernel IR bounds (ir/index_ranges.py), and the numba device's 32-bit floor divisions of
indices in [0, 2**31) by constants, which LLVM vectorises where it leaves a 64-bit one scalar. The results are
compared with NumPy on every device; the analysis is checked on hand-built IR for what it must not narrow."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir.index_ranges import divides_in_32_bits, index_ranges
from tracejit.ir.kernel_ir import Instr, KOp

from corpus.complex_numbers import mandelbrot1
from reference import assert_close, run_kernel

I64 = np.dtype(np.int64)


def _divisions(size=10_000, divisor=100, symbolic=None, offset=0):
    """0 global, 1 const divisor, 2 const offset, 3 global + offset, 4 idiv, 5 mod: the ranges and whether each
    division is 32-bit."""
    ins = [Instr(KOp.GLOBAL, I64, (), size), Instr(KOp.CONST, I64, (), divisor), Instr(KOp.CONST, I64, (), offset),
           Instr(KOp.ADD, I64, (0, 2)), Instr(KOp.IDIV, I64, (3, 1)), Instr(KOp.MOD, I64, (3, 1))]
    ranges = index_ranges(ins, symbolic)
    return ranges, [divides_in_32_bits(ins, ranges, ins[i]) for i in (4, 5)]


def test_the_ranges_of_a_flat_index_divided_into_rows_and_columns():
    ranges, small = _divisions()
    assert ranges[0] == (0, 9_999) and ranges[4] == (0, 99) and ranges[5] == (0, 99)
    assert small == [True, True]


@pytest.mark.parametrize(("case", "kwargs"), [
    ("a negative index", {"offset": -1}),
    ("an index past 2**31", {"size": 2**31 + 1}),
    ("a negative divisor", {"divisor": -3}),
    ("a zero divisor", {"divisor": 0}),
    ("a symbolic size", {"symbolic": {(0, 0): "n"}}),
    ("a symbolic divisor", {"symbolic": {(1, -1): "m"}}),
])
def test_what_may_be_negative_large_or_unknown_divides_in_64_bits(case, kwargs):
    assert _divisions(**kwargs)[1] == [False, False], case


def test_mandelbrots_step_divides_in_32_bits_and_vectorises():
    # (numpy-benchmarks' mandelbrot: its step reads C's constant table at i // 100 and i % 100; in 64 bits LLVM
    # judged the loop not worth vectorising, 46 us a step of 100 x 100 against 14.5 now)
    from llvmlite import binding as llvm

    from tracejit.codegen.cpu import native
    from tracejit.runtime.numba import llvm_jit

    plan = tj.kernel(mandelbrot1).lower(0.0, 100.0, 0.0, 100.0, 100, 100, 30, 50.0, device="numba")
    bodies = [b for found in plan.executable._loops.values() for b in found]
    (kernel,) = bodies[0].executable.program.kernels
    text = native.render(kernel, "serial")
    assert re.search(r"udiv i32", text) and re.search(r"urem i32", text), text
    module = llvm.parse_assembly(text)
    llvm_jit._optimize(module, llvm_jit._machine()[0])
    assert re.search(r"<\d+ x double>", str(module)), "the step's loop was not vectorised"


@pytest.mark.parametrize("size", [(100, 100), (7, 13), (1, 5)])
def test_mandelbrot_with_its_table_indexed_by_rows_and_columns_matches_numpy(device, size):
    if device == "webgpu":
        pytest.skip("complex128 needs float64, which WGSL lacks")
    args = (-2.0, 1.0, -1.5, 1.5, size[1], size[0], 20, 2.0)
    # (an escape-time loop grows an ulp's difference each step: the GPU-API devices' fused multiply-adds)
    assert_close(run_kernel(tj.kernel(mandelbrot1), *args, device=device), mandelbrot1(*args),
                 rtol=None if device == "numba" else 1e-9)


def rows_of_a_flipped_table(x):   # an index counted back from the end: its floor division keeps 64 bits
    t = np.linspace(0.0, 1.0, x.shape[1])[::-1]
    return x * t + np.arange(x.shape[0])[::-1, None]


def test_tables_read_backwards_and_by_rows_match_numpy(device, rng):
    x = rng.random((9, 11)).astype(np.float32 if device == "webgpu" else np.float64)
    assert_close(run_kernel(tj.kernel(rows_of_a_flipped_table), x, device=device), rows_of_a_flipped_table(x))
