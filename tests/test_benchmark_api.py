"""tj.benchmark(f, *args): a robust time of a call (DESIGN.md's contract; issue 50 item 4)."""
import numpy as np
import pytest

import tracejit as tj


def test_benchmark_of_a_kernel_gives_a_median_with_its_spread(device):
    f = tj.kernel(lambda x: np.tanh(x) * 2)
    x = np.random.default_rng(0).random(10_000).astype(np.float32)
    result = tj.benchmark(f, x, device=device, seconds=0.05, warmup=0.01)
    assert isinstance(result, tj.Benchmark)
    assert result.device == device
    assert 0 < result.min <= result.q1 <= result.median <= result.q3 <= result.max
    assert result.rounds >= 5 and result.calls >= 1 and result.first > 0
    assert result.ms == pytest.approx(result.median * 1e3)
    assert "per call" in str(result) and "rounds of" in str(result)


def test_benchmark_of_any_function_and_bad_arguments():
    result = tj.benchmark(np.sum, np.ones(1000), seconds=0.02, warmup=0.0)
    assert result.name == "sum" and result.median > 0
    with pytest.raises(tj.ArgumentError, match="needs a function"):
        tj.benchmark(3)
    with pytest.raises(tj.ArgumentError, match="seconds must be > 0"):
        tj.benchmark(np.sum, np.ones(3), seconds=0)
