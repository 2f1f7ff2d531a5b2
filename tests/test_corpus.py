"""The corpus of real-world NumPy programs (tests/corpus), each decorated unchanged with tj.kernel and
compared with NumPy on every device: values and dtypes. What does not run today is listed in XFAIL
below, with the missing feature or the wrong answer; tests/corpus_report.py runs without that table."""
from __future__ import annotations

import pytest

import tracejit as tj
from corpus import all_programs, run_program

# Fidelity I (issue 14) and II features these programs need, and the wrong answers they find.
# Key: "module.program", "module.program[dtype]" or either with "@device"; the most specific key wins.
# Value: (the exception the test raises today, why). strict: when the feature lands the test XPASSes
# and fails, so its entry must go - that is intended.
NEEDS = tj.UnsupportedError
TRACE = tj.TraceError
WRONG = AssertionError
NEP50 = ("WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong "
         "float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32")
XFAIL: dict[str, tuple[type[BaseException], str]] = {
    # benchmarks
    'benchmarks.allpairs_distances': (TRACE, 'needs iteration over a tensor, np.array of traced values'),
    'benchmarks.check_mask': (TRACE, 'needs iteration over a tensor; `if` on a traced value stays an error'),
    'benchmarks.diffusion_result': (NEEDS, 'needs item assignment (fidelity II)'),
    'benchmarks.grayscott': (NEEDS, 'needs in-place updates of views (u += ..., fidelity II item assignment)'),
    'benchmarks.growcut': (TRACE, 'math.sqrt / `if` on traced scalars stay errors: the program is scalar loop code'),
    'benchmarks.laplacien': (TRACE, "Python's max(1., traced) needs the value while tracing (use np.maximum)"),
    'benchmarks.log_likelihood[float32]@numba': (WRONG, 'AssertionError: result: dtype float64, NumPy gives float32'),
    'benchmarks.log_likelihood[float32]@opencl': (WRONG, 'AssertionError: result: dtype float64, NumPy gives float32'),
    'benchmarks.multiple_sum': (TRACE, 'needs item assignment into np.zeros (fidelity II)'),
    'benchmarks.reverse_cumsum': (NEEDS, 'needs np.cumsum (fidelity II)'),
    'benchmarks.smoothing': (NEEDS, 'UnsupportedError: /work/main/tests/corpus/benchmarks.py:170: item assignment on a traced value; build the result with tj.where instead'),
    'benchmarks.wave_step': (TRACE, 'needs iteration (tuple unpacking) of a tensor, item assignment (fidelity II)'),
    'benchmarks.wdist': (ValueError, 'needs item assignment into np.zeros (fidelity II)'),
    # numba_examples
    'numba_examples.gaussian_kde_broadcast[float32]@numba': (WRONG, 'WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32'),
    'numba_examples.gaussian_kde_broadcast[float32]@opencl': (WRONG, 'WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32'),
    'numba_examples.jacobi_relax_core': (NEEDS, 'UnsupportedError: /work/main/tests/corpus/numba_examples.py:60: item assignment on a traced value; build the result with tj.where instead'),
    'numba_examples.kde': (NEEDS, 'needs np.zeros_like, iteration over a tensor, item assignment (fidelity II)'),
    'numba_examples.zero_crossings': (NEEDS, 'needs np.diff'),
    # numexpr_exprs
    'numexpr_exprs.funcs_exp_log[float32]@webgpu': (WRONG, 'AssertionError: Not equal to tolerance rtol=1e-05, atol=1e-06'),
    'numexpr_exprs.funcs_hyperbolic[float32]@webgpu': (WRONG, 'AssertionError: Not equal to tolerance rtol=1e-05, atol=1e-06'),
    'numexpr_exprs.funcs_nextafter': (NEEDS, 'needs np.nextafter'),
    'numexpr_exprs.funcs_rounding': (TypeError, 'needs round() of a tensor (__round__), np.trunc, np.sign'),
    'numexpr_exprs.misc_arithmetic[float32]@numba': (WRONG, 'AssertionError: Not equal to tolerance rtol=1e-12, atol=1e-12'),
    'numexpr_exprs.misc_arithmetic[float32]@opencl': (WRONG, 'AssertionError: Not equal to tolerance rtol=1e-12, atol=1e-12'),
    # science
    'science.cosine_similarity': (NEEDS, 'needs np.linalg.norm'),
    'science.covariance': (NEEDS, 'needs np.cov'),
    'science.moving_average': (NEEDS, 'needs np.cumsum, item assignment (fidelity II)'),
    'science.nbody_acc': (NEEDS, 'needs boolean-mask assignment, np.hstack (fidelity II)'),
    'science.pearson': (NEEDS, 'needs np.corrcoef'),
    'science.rbf_kernel': (NEEDS, 'needs np.einsum (fidelity II), np.maximum(..., out=)'),
    'science.trapezoid': (NEEDS, 'needs np.diff, np.trapezoid'),
    # transformer
    'transformer.gpt2_attention': (WRONG, 'WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32'),
    'transformer.gpt2_ffn': (WRONG, 'WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32'),
    'transformer.gpt2_forward': (NEEDS, 'needs integer-array indexing wte[inputs] (fidelity II)'),
    'transformer.gpt2_gelu': (WRONG, 'WRONG ANSWER (dtype): a NumPy scalar (np.sqrt(2 / np.pi), np.sqrt(n), np.cos(3)) is a strong float64 under NEP 50; tracejit treats it as a weak Python scalar and stays in float32'),
    'transformer.gpt2_mha': (NEEDS, 'needs np.split, np.tri, np.hstack (fidelity II: split/concatenate)'),
    'transformer.gpt2_transformer_block': (NEEDS, 'needs np.var (then np.split, np.tri, np.hstack)'),
    'transformer.llama_attention': (NEEDS, 'needs np.split/np.stack (fidelity II), item assignment into the KV cache'),
    'transformer.llama_rope_tables': (NEEDS, 'needs np.outer, np.arange inside the kernel'),
    'transformer.llama_rotary_embedding': (NEEDS, 'needs np.split, squeeze, np.expand_dims, np.stack (fidelity II)'),
}


def expected_failure(name: str, dtype: str, device: str) -> tuple[type[BaseException], str] | None:
    for key in (f"{name}[{dtype}]@{device}", f"{name}@{device}", f"{name}[{dtype}]", name):
        if key in XFAIL:
            return XFAIL[key]
    return None


PROGRAMS = {p.name: p for p in all_programs()}
CASES = [(p.name, dtype) for p in PROGRAMS.values() for dtype in p.dtypes]


@pytest.mark.parametrize("name, dtype", CASES, ids=[f"{n}[{d}]" for n, d in CASES])
def test_corpus_program_matches_numpy(name: str, dtype: str, device: str, request: pytest.FixtureRequest) -> None:
    failure = expected_failure(name, dtype, device)
    if failure is not None:
        raises, reason = failure
        request.applymarker(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    run_program(PROGRAMS[name], dtype, device)


def test_corpus_names_are_unique_and_xfail_entries_name_programs() -> None:
    """A renamed program must not leave a stale entry behind (it would silently stop applying), and
    two programs must not share a name (one would hide the other)."""
    assert len(PROGRAMS) == len(all_programs()), "two corpus programs share a module.function name"
    for key in XFAIL:
        name = key.split("@")[0].split("[")[0]
        assert name in PROGRAMS, f"XFAIL entry {key!r} names no corpus program"
