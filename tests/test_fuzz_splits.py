"""Random 1-d programs of shifted reads, pads, rolls and tests of positions (what ir/split_loops.py cuts a kernel's
loops at), run on the numba device at several sizes of the same program (the second makes the sizes arguments of
the code, where the cut points are computed when it runs), on one thread and on two, and compared with NumPy.
TRACEJIT_FUZZ_EXAMPLES sets the number of programs (more by hand: TRACEJIT_FUZZ_EXAMPLES=300)."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj

EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 6
MODES = ("edge", "reflect", "constant", "wrap", "symmetric")


def _shift(x, k: int, mode: str):
    """x moved k places (right for k > 0), the places it leaves filled as np.pad's mode fills them."""
    if k == 0 or x.shape[0] <= abs(k) and mode in ("reflect", "symmetric"):
        return x
    if k > 0:
        return np.pad(x, (k, 0), mode=mode)[: x.shape[0]]
    return np.pad(x, (0, -k), mode=mode)[-k:]


def _apply(step, x, y):
    kind, a, b = step
    n = x.shape[0]
    if kind == "shift":
        return _shift(x, a, MODES[b])
    if kind == "roll":
        return np.roll(x, a)
    if kind == "low":   # the first places kept, the rest changed
        return np.where(np.arange(n) < a, x, y * 0.5)
    if kind == "high":
        return np.where(np.arange(n) >= n - a, x, -y)
    if kind == "stencil":
        return 0.5 * x + 0.25 * (_shift(x, 1, MODES[b]) + _shift(x, -1, MODES[b]))
    if kind == "interior":   # u[a:-a] = f(u), the rest kept
        out = x.copy()
        if n > 2 * a:
            out[a : n - a] = x[a : n - a] * 0.75 + y[a : n - a] * 0.25
        return out
    return x + y


STEP = st.tuples(
    st.sampled_from(["shift", "roll", "low", "high", "stencil", "interior", "add"]),
    st.integers(-4, 4).filter(bool) | st.integers(1, 6),
    st.integers(0, len(MODES) - 1),
).map(lambda s: (s[0], abs(s[1]) if s[0] in ("low", "high", "interior") else s[1], s[2]))


def _program(steps):
    def f(x, y):
        for step in steps:
            x, y = _apply(step, x, y), x
        return x + y

    return f


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=1, max_size=4), st.lists(st.integers(1, 3000), min_size=2, max_size=3),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_split_1d_programs_match_numpy_at_every_size(steps, sizes, large, seed):
    note(f"steps={steps} sizes={sizes}")
    f = _program(steps)
    k = tj.kernel(f)
    rng = np.random.default_rng(seed)
    # (the first size decides whether the kernel is split: from split_loops.GLOBAL_MIN places; a large size runs it in
    # parts on both threads)
    for n in sizes + ([70_001] if large else []):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        expected = f(x, y)
        for threads in (1, 2):
            with tj.set_num_threads(threads):
                got = k(x, y, device="numba")
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"n={n} threads={threads}")
