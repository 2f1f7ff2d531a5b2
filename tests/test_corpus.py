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
    # transformer pieces
    "transformer.gpt2_gelu": (WRONG, NEP50),
    "transformer.gpt2_ffn": (WRONG, NEP50),
    "transformer.gpt2_attention": (WRONG, NEP50),
    "transformer.gpt2_layer_norm": (NEEDS, "needs np.var"),
    "transformer.gpt2_transformer_block": (NEEDS, "needs np.var (then np.split, np.tri, np.hstack)"),
    "transformer.gpt2_mha": (NEEDS, "needs np.split, np.tri, np.hstack (fidelity II: split/concatenate)"),
    "transformer.gpt2_forward": (NEEDS, "needs integer-array indexing wte[inputs] (fidelity II)"),
    "transformer.gpt2_greedy_token": (NEEDS, "needs np.argmax"),
    "transformer.llama_rotary_embedding": (NEEDS, "needs np.split, squeeze, np.expand_dims, np.stack (fidelity II)"),
    "transformer.llama_attention": (NEEDS, "needs np.split/np.stack (fidelity II), item assignment into the KV cache"),
    "transformer.llama_causal_mask_softmax": (NEEDS, "needs np.full/np.triu/np.zeros made in the kernel, np.concatenate"),
    "transformer.llama_rope_tables": (NEEDS, "needs np.outer, np.arange inside the kernel"),
    "transformer.llama_greedy_token": (AttributeError, "needs Tensor.argmax"),
    # numexpr's expression lists
    "numexpr_exprs.misc_arithmetic": (NEEDS, "needs np.sinh"),
    "numexpr_exprs.misc_where": (AttributeError, "needs Tensor.real"),
    "numexpr_exprs.misc_arctan2": (NEEDS, "needs np.arctan2"),
    "numexpr_exprs.funcs_basic": (NEEDS, "needs np.copy, np.ones_like, np.conj"),
    "numexpr_exprs.funcs_trigonometric": (NEEDS, "needs np.arcsin, np.arccos, np.arctan"),
    "numexpr_exprs.funcs_hyperbolic": (NEEDS, "needs np.sinh, np.cosh, np.arcsinh, np.arccosh, np.arctanh"),
    "numexpr_exprs.funcs_exp_log": (NEEDS, "needs np.log1p, np.log10, np.expm1"),
    "numexpr_exprs.funcs_rounding": (TypeError, "needs round() of a tensor (__round__), np.trunc, np.sign"),
    "numexpr_exprs.funcs_arctan2": (NEEDS, "needs np.arctan2"),
    "numexpr_exprs.funcs_fmod": (NEEDS, "needs np.fmod"),
    "numexpr_exprs.funcs_hypot": (NEEDS, "needs np.hypot"),
    "numexpr_exprs.funcs_nextafter": (NEEDS, "needs np.nextafter"),
    "numexpr_exprs.funcs_copysign": (NEEDS, "needs np.copysign"),
    "numexpr_exprs.operations_divide[float32]@webgpu": (
        WRONG, "WRONG ANSWER: on webgpu (Vulkan/lavapipe) a kernel dividing by a constant 0 (x / 0, x // 0.0) "
               "never writes its output: the result is whatever the pooled buffer held (0.0 when fresh, an "
               "earlier kernel's data otherwise); NumPy gives inf/-inf/nan"),
    "numexpr_exprs.operations_remainder[float32]@webgpu": (
        WRONG, "WRONG ANSWER (accuracy): on webgpu float32 x % y is x - y * floor(x / y), off by up to half an "
               "ulp of x (7e-6 on 155 % 3.77 = 0.43); NumPy's remainder is exact"),
    # Numba's examples
    "numba_examples.gaussian_kde_broadcast[float32]": (WRONG, NEP50),
    "numba_examples.jacobi_relax_core": (AttributeError, "needs Tensor.copy, then item assignment (fidelity II)"),
    "numba_examples.zero_crossings": (NEEDS, "needs np.diff"),
    "numba_examples.kde": (NEEDS, "needs np.zeros_like, iteration over a tensor, item assignment (fidelity II)"),
    # numpy-benchmarks
    "benchmarks.arc_distance": (NEEDS, "needs np.arctan2"),
    "benchmarks.multiple_sum": (TRACE, "needs item assignment into np.zeros (fidelity II)"),
    "benchmarks.laplacien": (TRACE, "Python's max(1., traced) needs the value while tracing (use np.maximum)"),
    "benchmarks.euclidean_distance_square": (NEEDS, "needs np.dot"),
    "benchmarks.wdist": (ValueError, "needs item assignment into np.zeros (fidelity II)"),
    "benchmarks.cronbach": (AttributeError, "needs Tensor.var(ddof=), len()"),
    "benchmarks.grayscott": (NEEDS, "needs in-place updates of views (u += ..., fidelity II item assignment)"),
    "benchmarks.diffusion_result": (NEEDS, "needs item assignment (fidelity II)"),
    "benchmarks.allpairs_distances": (TRACE, "needs iteration over a tensor, np.array of traced values"),
    "benchmarks.reverse_cumsum": (NEEDS, "needs np.cumsum (fidelity II)"),
    "benchmarks.smoothing": (AttributeError, "needs Tensor.copy, len(), item assignment (fidelity II)"),
    "benchmarks.check_mask": (TRACE, "needs iteration over a tensor; `if` on a traced value stays an error"),
    "benchmarks.wave_step": (TRACE, "needs iteration (tuple unpacking) of a tensor, item assignment (fidelity II)"),
    "benchmarks.growcut": (TRACE, "math.sqrt / `if` on traced scalars stay errors: the program is scalar loop code"),
    # science
    "science.cosine_similarity": (NEEDS, "needs np.linalg.norm"),
    "science.rbf_kernel": (NEEDS, "needs np.einsum (fidelity II), np.maximum(..., out=)"),
    "science.sobel": (NEEDS, "needs np.hypot"),
    "science.rgb2gray": (NEEDS, "needs np.dot with a list operand"),
    "science.zscore": (AttributeError, "needs Tensor.std"),
    "science.covariance": (NEEDS, "needs np.cov"),
    "science.pearson": (NEEDS, "needs np.corrcoef"),
    "science.logistic_regression_step": (TRACE, "needs len()"),
    "science.two_layer_net": (NEEDS, "needs np.dot"),
    "science.kmeans_assign": (NEEDS, "needs np.argmin"),
    "science.trapezoid": (NEEDS, "needs np.diff, np.trapezoid"),
    "science.moving_average": (NEEDS, "needs np.cumsum, item assignment (fidelity II)"),
    "science.horner": (NEEDS, "needs np.zeros_like, iteration over a tensor"),
    "science.nbody_acc": (NEEDS, "needs boolean-mask assignment, np.hstack (fidelity II)"),
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
