"""A fuzzer of sizes that depend on the data (issue 47): random programs that select with masks of random density
(none selected, everything selected, anything between) over arrays of random shapes, and use what they select as
arrays (sorted, sliced, combined with other selections, stored back one value per element, selected again), or
ask for np.nonzero, np.argwhere, np.unique, np.compress, np.extract. Each is called twice on new data (another
count: the plan of the first call goes on with the second's) and compared with NumPy on values and dtypes."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj
from reference import assert_close

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 10   # more: TRACEJIT_FUZZ_EXAMPLES=100


def _copy_store(x, m, k):
    y = x.copy()
    y[m] = x[m][::-1] * 2
    return y


# what a step does with x (float) and its mask m (x's shape, or its leading axis); each NumPy code as written
STEPS = {
    "x[m]": lambda x, m, k: x[m],
    "x[m] arithmetic": lambda x, m, k: x[m] * 2 + x[m].sum(),
    "sorted": lambda x, m, k: np.sort(x[m]),
    "every other": lambda x, m, k: x[m][::2],
    "cumsum": lambda x, m, k: np.cumsum(x[m]),
    "selected again": lambda x, m, k: x[m][x[m] > x[m].mean()] if x[m].size else x[m],
    "joined": lambda x, m, k: np.concatenate([x[m], x[~m]]),
    "outer": lambda x, m, k: x[m].reshape(-1, 1) - x[m][:5],
    "stored back": _copy_store,
    "nonzero": lambda x, m, k: np.nonzero(m),
    "argwhere": lambda x, m, k: np.argwhere(m),
    "flatnonzero": lambda x, m, k: np.flatnonzero(x > 0.5),
    "unique": lambda x, m, k: np.unique(k, return_index=True, return_inverse=True, return_counts=True),
    "compress": lambda x, m, k: np.compress(m.reshape(-1)[: x.shape[0]], x, axis=0),
    "extract": lambda x, m, k: np.extract(m, x),
}
INDEX_RESULTS = {"nonzero", "argwhere", "flatnonzero", "unique"}   # int64: not on webgpu


def _program(names):
    def program(x, m, k):
        out = []
        for name in names:
            r = STEPS[name](x, m, k)
            out += list(r) if isinstance(r, tuple) else [r]
        return tuple(out)

    return program


def _data(rng, shape, density, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    if density == "none":
        m = np.zeros(shape, bool)
    elif density == "all":
        m = np.ones(shape, bool)
    else:
        m = rng.random(shape) < density
    k = rng.integers(0, 4, shape).astype(dtype)   # (ties for np.unique)
    return x, m, k


@st.composite
def programs(draw, device):
    names = [n for n in STEPS if device != "webgpu" or n not in INDEX_RESULTS]
    steps = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    shape = draw(st.sampled_from([(1,), (9,), (40,), (3, 5), (6, 4), (2, 3, 4)]))
    densities = draw(st.lists(st.sampled_from(["none", "all", 0.1, 0.5, 0.9]), min_size=2, max_size=2))
    seed = draw(st.integers(0, 2**16))
    return steps, shape, densities, seed


def _compare(got, expected, dtype):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        if e.dtype.kind == "f":
            assert_close(g, e, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)
        else:
            np.testing.assert_array_equal(g, e)


def test_selections_of_random_density_match_numpy(device):
    dtype = np.float32 if device in ("webgpu", "metal") else np.float64

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs(device))
    def run(drawn):
        steps, shape, densities, seed = drawn
        note(f"steps {steps}, shape {shape}, densities {densities}")
        rng = np.random.default_rng(seed)
        program = _program(steps)
        kernel = tj.kernel(program)
        for density in densities:   # (a second count: the first call's plan goes on with another)
            x, m, k = _data(rng, shape, density, dtype)
            _compare(kernel(x, m, k, device=device), program(x, m, k), dtype)

    run()
