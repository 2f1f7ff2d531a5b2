"""The corpus of real-world NumPy programs (tests/corpus), each decorated unchanged with tj.kernel and
compared with NumPy on every device: values and dtypes. What does not run today is listed in XFAIL
below, with the missing feature or the wrong answer; tests/corpus_report.py runs without that table."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from corpus import all_programs, run_program

# Fidelity I (issue 14) and II features these programs need, and the wrong answers they find.
# Key: "module.program", "module.program[dtype]" or either with "@device"; the most specific key wins.
# Value: (the exception the test raises today, why). strict: when the feature lands the test XPASSes
# and fails, so its entry must go - that is intended.
NEEDS = tj.UnsupportedError
TRACE = tj.TraceError
XFAIL: dict[str, tuple[type[BaseException], str]] = {
    # transformer pieces
    # numexpr's expression lists
    # Numba's examples
    # numpy-benchmarks
    # NPBench
    "complex_numbers.mandelbrot2": (TRACE, "NumPy's own Xi[I] of np.mgrid's array by a traced mask: np.mgrid stays "
                                    "NumPy's, whose results fold into constants (stockham_fft's twiddle factors)"),
    # everyday science
    # numbers and loops
    # loop-style programs
}


def expected_failure(name: str, dtype: str, device: str) -> tuple[type[BaseException], str] | None:
    for key in (f"{name}[{dtype}]@{device}", f"{name}@{device}", f"{name}[{dtype}]", name):
        if key in XFAIL:
            return XFAIL[key]
    return None


PROGRAMS = {p.name: p for p in all_programs()}
CASES = [(p.name, dtype) for p in PROGRAMS.values() for dtype in p.dtypes]


WIDE = ("a wide dtype beside a narrower one of its kind: on emulated cuda the program runs in the narrower "
        "(make test's budget); TRACEJIT_EMULATE_ALL=1 runs it too")


def _case(name: str, dtype: str):
    """On the emulated devices (make test's budget), a program's wide dtype does not run where it has a narrower one
    of the same kind (float64 beside float32, complex128 beside complex64): the same SIMT code in another dtype,
    whose rendering test_ops checks op by op. Emulated metal runs no program: emulated cuda runs the same SIMT
    lowering, and the numba run checks the program's MSL. TRACEJIT_EMULATE_ALL=1 runs every case everywhere."""
    kind = np.dtype(dtype).kind
    wide = any(np.dtype(d).kind == kind and np.dtype(d).itemsize < np.dtype(dtype).itemsize
               for d in PROGRAMS[name].dtypes)
    marks = [pytest.mark.slow_emulated("cuda", "metal", reason=WIDE) if wide else pytest.mark.slow_emulated("metal")]
    return pytest.param(name, dtype, marks=marks, id=f"{name}[{dtype}]")


@pytest.mark.parametrize("name, dtype", [_case(n, d) for n, d in CASES])
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
