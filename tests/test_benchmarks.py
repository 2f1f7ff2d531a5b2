"""Every benchmark case, at --quick sizes, gives NumPy's answer: the layouts the benchmarks exercise
(tiles, row streaming, two-stage sums, parallel loops) only appear at such sizes."""
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"


def _load_bench():
    sys.path.insert(0, str(BENCH.parent))  # bench.py imports its sibling modules (hand_numba, models, ...)
    spec = importlib.util.spec_from_file_location("tracejit_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


pytest.importorskip("numexpr", reason="benchmarks/bench.py compares with numexpr (the dev extra installs it)")
bench = _load_bench()


COLUMNS = [c for c in ("tracejit", "opencl", "webgpu") if c in bench.CASES[0].impls]
# The model rows are built from corpus programs, which tests/test_corpus.py runs on every device at small
# sizes; here the numba device runs them at the benchmark's. Not gpt2_block: its cold compile takes ~24 s here,
# and the corpus runs picoGPT's block unchanged (gpt2_transformer_block).
CASES = [(case, column) for case in bench.KERNEL_CASES for column in COLUMNS] + [
    (case, "tracejit") for case in bench.MODEL_CASES if case.name != "gpt2_block"]


@pytest.mark.parametrize("case, column", CASES, ids=[f"{case.name}-{column}" for case, column in CASES])
def test_benchmark_case_matches_numpy_at_quick_size(case, column):
    inputs = case.setup(16)
    expected = np.asarray(case.impls["numpy"](*inputs))
    got = np.asarray(case.impls[column](*inputs))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    rtol, atol = case.tolerance
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def test_the_replay_benchmark_runs_and_checks_its_results(capsys):
    spec = importlib.util.spec_from_file_location("tracejit_replay_bench", BENCH.parent / "replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "eager/replay" in out and "numba" in out


def test_the_program_benchmarks_build_their_cases_from_the_corpus():
    # (benchmarks/programs.py and loops.py read programs of tests/corpus by name: a rename there broke
    # programs.py unnoticed once; building the cases checks the names, running them is the benchmarks' job)
    spec = importlib.util.spec_from_file_location("tracejit_programs_bench", BENCH.parent / "programs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = module.stencil_cases(quick=True)
    assert [name for name, *_ in cases] == ["diffusion", "grayscott"]
    for _, fn, args, keywords in cases:
        assert callable(fn) and args and keywords
    spec = importlib.util.spec_from_file_location("tracejit_loops_bench", BENCH.parent / "loops.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))   # (its programs are the corpus's, by name)


def _quick_run_prints(script: str, capsys) -> str:
    """benchmarks/<script> --quick on numba (each script checks its results against NumPy first): its output."""
    spec = importlib.util.spec_from_file_location(f"tracejit_{script[:-3]}_bench", BENCH.parent / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--devices", "numba"]) == 0
    return capsys.readouterr().out


def test_the_breaks_benchmark_runs_and_checks_its_results(capsys):
    out = _quick_run_prints("breaks.py", capsys)
    assert "break/hand" in out and "numpy/same" in out


def test_the_toolbox_benchmark_runs_and_checks_its_results(capsys):
    out = _quick_run_prints("toolbox.py", capsys)
    assert "numpy/tj" in out and "scipy" in out
