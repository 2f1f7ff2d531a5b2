"""tj.set_debug through the standard logging module (TRACEJIT_DEBUG as before), progress only on a terminal,
and tj.set_num_threads: the numba device's threads and the BLAS/OpenMP pools threadpoolctl finds."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tracejit as tj
from tracejit.runtime import debug, profiler, progress
from tracejit.runtime.numba import threads

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, **env) -> subprocess.CompletedProcess:
    unset = ("TRACEJIT_DEBUG", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
    full_env = {k: v for k, v in os.environ.items() if k not in unset}
    full_env.update(PYTHONPATH=REPO, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=300)


@pytest.fixture
def debug_restored():
    """The "tracejit" logger's level and handlers and the level tj.set_debug last set, as they were."""
    level, handlers, requested = debug.LOGGER.level, list(debug.LOGGER.handlers), debug.requested()
    yield
    debug.set_debug(requested)
    debug.LOGGER.setLevel(level)
    debug.LOGGER.handlers[:] = handlers


def _messages(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_set_debug_after_import_logs_compiles_through_logging_and_zero_silences(caplog, debug_restored, rng):
    x = rng.standard_normal((16, 8)).astype(np.float32)
    tj.set_debug(1)
    f = tj.kernel(lambda a: np.exp(a).sum(axis=1) * 3)
    np.testing.assert_allclose(f(x), np.exp(x).sum(axis=1) * 3, rtol=1e-5)
    compiles = _messages(caplog, "tracejit.compile")
    assert any("1 kernel(s) for" in m and "trace" in m for m in compiles), compiles   # with its stage times
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "tracejit.compile")
    caplog.clear()
    tj.set_debug(0)
    g = tj.kernel(lambda a: np.exp(a).sum(axis=1) * 4)
    np.testing.assert_allclose(g(x), np.exp(x).sum(axis=1) * 4, rtol=1e-5)
    assert not [r for r in caplog.records if r.name.startswith("tracejit")]


def test_set_debug_2_logs_launches_of_a_kernel_compiled_before_it(caplog, debug_restored, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    f = tj.kernel(lambda a: a * 2 + 1)
    np.testing.assert_array_equal(f(x), x * 2 + 1)   # compiled with nothing logged
    tj.set_debug(2)
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    launches = _messages(caplog, "tracejit.launch")
    assert len(launches) == 1 and "GB/s" in launches[0], launches
    tj.set_debug(0)
    caplog.clear()
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert not _messages(caplog, "tracejit.launch") and not profiler.ACTIVE and not profiler.timing()


def test_set_debug_levels_3_and_4_log_the_irs_and_the_source(caplog, debug_restored):
    tj.set_debug(4)
    f = tj.kernel(lambda a: a.sum(axis=1) - 1)
    x = np.ones((8, 8), np.float32)
    np.testing.assert_array_equal(f(x), x.sum(axis=1) - 1)
    assert any("kernel k0_" in m for m in _messages(caplog, "tracejit.ir"))
    assert any("k0_reduce_sum" in m for m in _messages(caplog, "tracejit.source"))


def test_an_application_logger_level_alone_turns_compile_messages_on(caplog, debug_restored):
    caplog.set_level(logging.DEBUG, logger="tracejit")
    f = tj.kernel(lambda a: a - 7)
    f(np.ones(5, np.float32))
    assert any("kernel(s) for" in m for m in _messages(caplog, "tracejit.compile"))
    assert not _messages(caplog, "tracejit.ir")   # DEBUG is level 1: the IRs log below it


@pytest.mark.parametrize("level", [-1, 1.5, "1", True])
def test_set_debug_refuses_what_is_not_a_level(level, debug_restored):
    with pytest.raises(tj.ArgumentError, match="set_debug"):
        tj.set_debug(level)


def test_set_debug_prints_to_stderr_where_the_application_configured_no_logging():
    out = _run("""
        import numpy as np, tracejit as tj
        x = np.ones((8, 8), np.float32)
        tj.kernel(lambda a: a.sum(axis=1))(x)
        print("quiet so far", flush=True)
        tj.set_debug(1)
        tj.kernel(lambda a: a.sum(axis=0) + 1)(x)
        tj.set_debug(0)
        tj.kernel(lambda a: a.sum(axis=0) + 2)(x)
    """)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if "kernel(s) for" in line]
    assert len(lines) == 1 and lines[0].startswith("[tracejit] <lambda>: 1 kernel(s) for"), out.stderr


def test_the_messages_go_to_stderr_as_it_is_when_they_come_as_a_notebook_replaces_it_per_cell():
    out = _run("""
        import io, sys
        import numpy as np, tracejit as tj
        tj.set_debug(1)
        cell = sys.stderr = io.StringIO()   # as ipykernel's stream per cell
        tj.kernel(lambda a: a + 5)(np.ones(4, np.float32))
        sys.stderr = sys.__stderr__
        print(cell.getvalue())
    """)
    assert out.returncode == 0, out.stderr
    assert "[tracejit] <lambda>: 1 kernel(s) for" in out.stdout and "kernel(s) for" not in out.stderr


def test_an_application_handler_takes_the_messages_and_tracejit_adds_none():
    out = _run("""
        import logging
        logging.basicConfig(format="APP %(name)s %(levelname)s %(message)s")
        import numpy as np, tracejit as tj
        tj.set_debug(1)
        tj.kernel(lambda a: a * 3)(np.ones(4, np.float32))
    """)
    assert out.returncode == 0, out.stderr
    assert "APP tracejit.compile DEBUG <lambda>: 1 kernel(s) for" in out.stderr
    assert "[tracejit]" not in out.stderr   # printed once, by the application's handler


def test_tracejit_debug_environment_variable_still_prints_at_import():
    out = _run("""
        import numpy as np, tracejit as tj
        tj.kernel(lambda a: a.sum(axis=1))(np.ones((8, 8), np.float32))
    """, TRACEJIT_DEBUG="2")
    assert out.returncode == 0, out.stderr
    assert "kernel(s) for" in out.stderr and "GB/s" in out.stderr


def test_progress_is_off_where_stderr_is_not_a_terminal(monkeypatch):
    assert not progress.wanted()   # pytest: stderr captured, PYTEST_CURRENT_TEST set
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys, "stderr", open(os.devnull, "w"))
    try:
        assert not progress.wanted()
        with progress.task("work", total=2) as shown:
            shown.advance()
            assert not progress.OPEN   # nothing recorded, no display thread asked for
    finally:
        sys.stderr.close()


def test_progress_is_off_in_ci_and_with_tracejit_progress_0_even_on_a_terminal(monkeypatch):
    class Terminal:
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRACEJIT_PROGRESS", raising=False)
    assert progress.wanted()
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TRACEJIT_PROGRESS", "0")
    assert not progress.wanted()


def test_a_progress_bar_shows_on_a_terminal_for_work_past_the_delay_and_is_erased(tmp_path):
    """In a pseudo-terminal (`script`): the bar appears for work longer than DELAY, none for short work."""
    import shutil
    if shutil.which("script") is None:
        pytest.skip("no `script` to run a pseudo-terminal")
    program = tmp_path / "p.py"
    program.write_text(textwrap.dedent("""
        import time
        from tracejit.runtime import progress
        progress.DELAY = 0.2
        with progress.task("short work", total=1):
            pass
        with progress.task("long work", total=3) as shown:
            for _ in range(3):
                time.sleep(0.3)
                shown.advance()
        print("done")
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_CURRENT_TEST", "TRACEJIT_PROGRESS")}
    env["PYTHONPATH"] = REPO
    log = tmp_path / "typescript"
    done = subprocess.run(["script", "-qec", f"stty cols 100 rows 20; {sys.executable} {program}", str(log)],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120)
    text = log.read_bytes().decode(errors="replace")
    assert done.returncode == 0 and "done" in text, text
    assert "long work:" in text and "/3" in text and "short work" not in text, text


# -- threads --

@pytest.fixture
def threads_restored():
    """tracejit's thread count, Numba's in this thread and the BLAS/OpenMP pools' limits as they were."""
    from threadpoolctl import threadpool_limits
    pools = threadpool_limits(limits=None)   # (records the pools' limits now, changes nothing)
    yield
    threads._requested = None
    from tracejit.runtime.numba import llvm_jit
    llvm_jit.set_omp_threads(threads.thread_count())
    if "numba" in sys.modules:
        import numba
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    pools.restore_original_limits()


@pytest.mark.parametrize("n", [1, 3])
def test_set_num_threads_splits_a_chunked_kernel_into_that_many_parts_across_threads(n, threads_restored):
    seen, lock = [], threading.Lock()

    def chunk(start, stop, out):
        with lock:
            seen.append((start, stop, threading.get_ident()))
        out[start:stop] = np.arange(start, stop)

    run = threads.chunked(chunk, 1000, 2)   # compiled for 2 parts
    tj.set_num_threads(n)
    out = np.zeros(1000)
    run(out)
    np.testing.assert_array_equal(out, np.arange(1000))
    assert sorted(s[:2] for s in seen) == [(1000 * c // n, 1000 * (c + 1) // n) for c in range(n)]
    assert (seen[0][2] == threading.get_ident()) if n == 1 else len({s[2] for s in seen}) >= 2


def test_set_num_threads_sets_the_numba_device_threads_and_results_stay_numpys(threads_restored, rng):
    from tracejit.runtime.numba import device as numba_device, llvm_jit
    big = rng.standard_normal(numba_device.CHUNKS_MIN_WORK + 5).astype(np.float32)   # chunked or OpenMP's
    mid = rng.standard_normal((512, 300)).astype(np.float32)                          # a parallel loop
    f = tj.kernel(lambda a: np.tanh(a) * 2 + 1)
    g = tj.kernel(lambda a: np.exp(a - a.max(axis=-1, keepdims=True)).sum(axis=-1))
    expected_f, expected_g = np.tanh(big) * 2 + 1, np.exp(mid - mid.max(axis=-1, keepdims=True)).sum(axis=-1)
    for n in (1, 2, 3):
        tj.set_num_threads(n)
        assert tj.device("numba").info.compute_units == n == threads.thread_count()
        np.testing.assert_allclose(f(big, device="numba"), expected_f, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g(mid, device="numba"), expected_g, rtol=1e-5)
        if llvm_jit._omp_threads.value:   # OpenMP's parallel entry points ask for n threads
            assert llvm_jit._omp_threads.value == n


def test_set_num_threads_limits_the_blas_pools_threadpoolctl_finds(threads_restored, rng):
    from threadpoolctl import threadpool_info
    tj.set_num_threads(1)
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas), blas
    a, b = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((48, 32)).astype(np.float32)
    np.testing.assert_allclose(tj.kernel(lambda x, y: x @ y)(a, b, device="numba"), a @ b, rtol=1e-4, atol=1e-4)
    after = [p for p in threadpool_info() if p["user_api"] in ("blas", "openmp")]   # MKL's, loaded by the product
    assert all(p["num_threads"] == 1 for p in after), after


def test_set_num_threads_in_a_with_block_puts_the_counts_back_at_its_end(threads_restored):
    from threadpoolctl import threadpool_info
    before = threads.thread_count()
    pools = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    with tj.set_num_threads(1) as count:
        assert threads.thread_count() == tj.device("numba").info.compute_units == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["filepath"] in pools)
        with tj.set_num_threads(2):
            assert threads.thread_count() == 2
        assert threads.thread_count() == 1 and count.previous is None
    assert threads.thread_count() == before and threads._requested is None
    assert {p["filepath"]: p["num_threads"] for p in threadpool_info() if p["filepath"] in pools} == pools


@pytest.mark.parametrize("n", [0, -2, 2.0, "4", True])
def test_set_num_threads_refuses_what_is_not_a_count(n):
    with pytest.raises(tj.ArgumentError, match="set_num_threads"):
        tj.set_num_threads(n)


def test_numba_num_threads_then_omp_num_threads_set_the_default():
    code = """
        import tracejit as tj
        from tracejit.runtime.numba import threads
        print(threads.thread_count(), tj.device("numba").info.compute_units)
    """
    assert _run(code, OMP_NUM_THREADS="1").stdout.split() == ["1", "1"]
    assert _run(code, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="2").stdout.split() == ["2", "2"]


def test_numbas_own_parallel_loops_follow_set_num_threads_in_the_calling_thread():
    """TRACEJIT_NUMBA_NATIVE=0: a parallel loop Numba compiles (prange); set before Numba was imported."""
    out = _run("""
        import sys
        import numpy as np, tracejit as tj
        tj.set_num_threads(1)
        assert "numba" not in sys.modules
        x = np.ones((512, 300), np.float32)
        y = tj.kernel(lambda a: np.exp(a) * 2)(x, device="numba")
        import numba
        print(numba.get_num_threads(), bool(np.allclose(y, np.exp(x) * 2)))
    """, TRACEJIT_NUMBA_NATIVE="0", NUMBA_NUM_THREADS="2")
    assert out.stdout.split() == ["1", "True"], out.stderr
