"""np.random.* and Generator methods inside kernels: Philox-4x32-10 draws computed on the device, checked against
a NumPy reference of the generator (Random123's known answers), distribution tests, independence, and the same
stream on every device."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracejit as tj
from tracejit.numpy import philox
from tracejit.ir import build
from tracejit.ir.evaluate import constant_value

N = 20000
KS_CRITICAL = 1.95   # sqrt(n) * D at the 0.1% level (Kolmogorov's distribution)

# --- a NumPy reference of Philox-4x32-10 (64-bit products), checked against Random123's kat_vectors ------

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
KNOWN = [  # counter, key -> output (Random123 kat_vectors, philox4x32 10)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def reference_philox(counter, key):
    c = [np.asarray(w, np.uint64) for w in counter]
    k0, k1 = (np.uint64(w) for w in key)
    mask = np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(W0)) & mask, (k1 + np.uint64(W1)) & mask
        p0, p1 = np.uint64(M0) * c[0], np.uint64(M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & mask]
    return [w.astype(np.uint32) for w in c]


def expected_words(seed: int, n: int, draw: int = 0, call: int = 0):
    """The words tracejit's global stream gives element i of the `draw`-th draw of the `call`-th call after
    tj.random.seed(seed) (the layout README's "Random numbers in kernels" states)."""
    key = np.random.SeedSequence(seed).generate_state(2, np.uint32)
    counter = (np.arange(n, dtype=np.uint64), draw, call & 0xFFFFFFFF, call >> 32)
    return reference_philox(counter, (int(key[0]), int(key[1])))


def expected_uniform(words, dtype):
    w = [x.astype(np.uint64) for x in words]
    if dtype == np.float64:
        return ((w[0] >> np.uint64(5)).astype(np.float64) * 2.0 ** 26 + (w[1] >> np.uint64(6))) * 2.0 ** -53
    return ((w[0] >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)


@pytest.mark.parametrize("counter, key, output", KNOWN)
def test_reference_and_graph_philox_give_random123s_known_answers(counter, key, output):
    assert [int(w) for w in reference_philox(counter, key)] == list(output)
    nodes = philox.philox4x32(tuple(build.const(c, np.uint32, ()) for c in counter),
                              tuple(build.const(k, np.uint32, ()) for k in key))
    assert [int(constant_value(n)) for n in nodes] == list(output)   # the graph ops, as the IR defines them


# --- devices ----------------------------------------------------------------------------------------------

def float_dtype(device):
    """float64 where the device has it; webgpu and metal have no float64 (their draws are float32)."""
    return np.float32 if device in ("webgpu", "metal") else np.float64


def ks_statistic(x, cdf) -> float:
    """sqrt(n) * the Kolmogorov-Smirnov distance between the sample and the CDF."""
    x = np.sort(np.asarray(x, np.float64))
    f = cdf(x)
    n = len(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    return math.sqrt(n) * d


_erf = np.vectorize(math.erf)
NORMAL_CDF = lambda x: 0.5 * (1 + _erf(x / math.sqrt(2)))   # noqa: E731
EXPONENTIAL_CDF = lambda x: 1 - np.exp(-x)                   # noqa: E731
UNIFORM_CDF = lambda x: np.clip(x, 0, 1)                     # noqa: E731


def draws(device):
    dt = float_dtype(device)

    @tj.kernel
    def f(x, g):
        return (x + g.random(x.shape, dtype=dt), g.standard_normal(x.shape, dtype=dt),
                g.standard_exponential(x.shape, dtype=dt), g.integers(-3, 4, size=x.shape, dtype=np.int32))
    return f, dt


def test_generator_draws_have_their_distributions(device):
    f, dt = draws(device)
    u, z, e, k = (np.asarray(v) for v in f(np.zeros(N, dt), np.random.default_rng(1), device=device))
    assert u.dtype == z.dtype == e.dtype == dt and k.dtype == np.int32 and u.shape == (N,)
    assert 0 <= u.min() and u.max() < 1 and e.min() >= 0 and -3 <= k.min() and k.max() <= 3
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.003
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.05
    assert abs(e.mean() - 1) < 0.03 and abs(e.var() - 1) < 0.08
    for sample, cdf in ((u, UNIFORM_CDF), (z, NORMAL_CDF), (e, EXPONENTIAL_CDF)):
        assert ks_statistic(sample, cdf) < KS_CRITICAL
    counts = np.bincount(k + 3, minlength=7)
    chi2 = ((counts - N / 7) ** 2 / (N / 7)).sum()
    assert chi2 < 22.5   # 6 degrees of freedom, 0.1% level


def test_draws_are_the_documented_philox_stream_on_every_device(device):
    dt = float_dtype(device)
    f = tj.kernel(lambda x: (np.random.default_rng().random(x.shape, dtype=dt),
                             np.random.default_rng().integers(0, 10, size=x.shape, dtype=np.int32)))
    tj.random.seed(11)
    x = np.zeros(1000, dt)
    first = f(x, device=device)
    second = f(x, device=device)
    for call, (u, k) in enumerate((first, second)):
        w = expected_words(11, 1000, draw=0, call=call)
        np.testing.assert_array_equal(np.asarray(u), expected_uniform(w, dt))
        w = expected_words(11, 1000, draw=1, call=call)
        np.testing.assert_array_equal(np.asarray(k), ((w[0].astype(np.uint64) * 10) >> np.uint64(32)).astype(np.int32))


def test_each_call_draws_fresh_numbers_without_recompiling(device):
    dt = float_dtype(device)
    f = tj.kernel(lambda x: x + np.random.default_rng().random(x.shape, dtype=dt))
    x = np.zeros(N, dt)
    a, b = np.asarray(f(x, device=device)), np.asarray(f(x, device=device))
    assert f.cache_info()["traces"] == 1 and f.cache_info()["hits"] == 1
    assert not np.array_equal(a, b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.03             # between calls
    assert abs(np.corrcoef(a[1:], a[:-1])[0, 1]) < 0.03    # between adjacent elements
    assert abs(np.corrcoef(a[::2], a[1::2])[0, 1]) < 0.04


def test_seed_gives_the_same_draws_on_every_device():
    devices = [d.name for d in tj.devices() if d.available]
    f = tj.kernel(lambda x, g: (x + np.random.default_rng().random(x.shape, dtype=np.float32),
                                g.standard_normal(x.shape, dtype=np.float32)))
    x = np.zeros(500, np.float32)
    results = {}
    for d in devices:
        tj.random.seed(5)
        results[d] = [np.asarray(v) for v in f(x, np.random.default_rng(9), device=d)]
    for d, (u, z) in results.items():
        np.testing.assert_array_equal(u, results["numba"][0])   # the bits: integer ops and exact conversions
        # log, sqrt and cos come from each device's math library: a few ulps apart
        np.testing.assert_allclose(z, results["numba"][1], rtol=2e-6, atol=2e-6)


def test_numpy_random_functions_give_numpys_shapes_and_dtypes(device):
    @tj.kernel
    def f(x):
        return (np.random.rand(*x.shape), np.random.randn(3), np.random.random((2, 3)), np.random.random_sample(4),
                np.random.uniform(-1, 2, size=5), np.random.normal(x, 0.1), np.random.standard_normal((2, 2)),
                np.random.exponential(2.0, size=3), np.random.standard_exponential(3), np.random.randint(5, size=4),
                np.random.randint(-2, 2, size=(2, 2)), np.random.random(x.shape) < 0.25, np.random.choice(7, 3),
                np.random.choice(x, 6), np.random.rand())

    x = np.arange(8, dtype=np.float64)
    if float_dtype(device) != np.float64:
        with pytest.raises(tj.DtypeError):   # rand & co. are float64: refused where the device has none
            f(x, device=device)
        return
    got = [np.asarray(v) for v in f(x, device=device)]
    np.random.seed(0)
    want = [np.asarray(v) for v in f.fn(x)]
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    uniform, normal_x, ints, picks = got[4], got[5], got[10], got[13]
    assert ((-1 <= uniform) & (uniform < 2)).all() and ((-2 <= ints) & (ints < 2)).all()
    assert np.abs(normal_x - x).max() < 1 and set(picks) <= set(x)


def test_generator_captured_or_passed_draws_its_own_reproducible_stream():
    x = np.zeros(64, np.float32)
    rng = np.random.default_rng(3)

    @tj.kernel
    def captured(x):
        return x + rng.random(x.shape, dtype=np.float32)

    @tj.kernel
    def passed(x, g):
        return x + g.random(x.shape, dtype=np.float32)

    a1, a2 = np.asarray(captured(x)), np.asarray(captured(x))
    assert not np.array_equal(a1, a2)   # the generator advances
    b1, b2 = (np.asarray(passed(x, g)) for g in (np.random.default_rng(3),) * 2)
    np.testing.assert_array_equal(a1, b1)   # the same seed: the same stream, captured or passed
    np.testing.assert_array_equal(a2, b2)
    # a seeded generator made inside the kernel starts over on every call, as NumPy's does
    inside = tj.kernel(lambda x: np.random.default_rng(4).random(x.shape))
    np.testing.assert_array_equal(inside(x), inside(x))


def test_choice_of_an_array_argument_picks_its_elements(device):
    dt = float_dtype(device)
    f = tj.kernel(lambda a, g: g.choice(a, size=(50, 40)))
    a = np.array([2.5, -1.0, 7.0], dt)
    picks = np.asarray(f(a, np.random.default_rng(0), device=device))
    assert picks.shape == (50, 40) and picks.dtype == dt
    counts = np.array([(picks == v).sum() for v in a])
    assert counts.sum() == picks.size and (np.abs(counts - picks.size / 3) < 120).all()


def test_unsupported_random_functions_raise_naming_what_is_supported():
    x = np.zeros(4, np.float32)
    with pytest.raises(tj.UnsupportedError, match=r"np\.random\.poisson is not supported.*np\.random\.rand"):
        tj.kernel(lambda x: x + np.random.poisson(3.0, x.shape))(x)
    with pytest.raises(tj.UnsupportedError, match=r"Generator\.permutation is not supported.*integers"):
        tj.kernel(lambda x, g: g.permutation(x))(x, np.random.default_rng())
    with pytest.raises(tj.UnsupportedError, match="replacement"):
        tj.kernel(lambda x: np.random.choice(x, 2, replace=False))(x)


def test_seed_rejects_what_is_not_a_seed():
    with pytest.raises(tj.ArgumentValueError):
        tj.random.seed(-1)


CRASH_REPRO = """
import numpy as np
{preimport}
import tracejit as tj

@tj.kernel
def f(x):
    return x + np.random.rand(*x.shape) + np.random.default_rng(0).random(x.shape) + np.random.standard_normal(x.shape)

y = f(np.zeros((4, 3)))
assert y.shape == (4, 3) and y.dtype == np.float64
"""


@pytest.mark.parametrize("preimport", ["import numpy.random", ""])
def test_numpy_random_in_a_kernel_no_longer_crashes_the_interpreter(preimport):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CRASH_REPRO.format(preimport=preimport))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


FIRST_IMPORT = """
import sys
import numpy as np
import tracejit as tj
assert "numpy.random" not in sys.modules   # (tracejit does not import it: 7 ms of a first call)

@tj.kernel
def noisy(x):
    return x + np.random.rand(*x.shape)   # the trace imports numpy.random: it is traced again, drawing from tracejit

a, b = noisy(np.zeros(64)), noisy(np.zeros(64))
assert not np.array_equal(a, b), "the draws of the first trace were NumPy's numbers as constants"
assert ((0 <= a) & (a < 1)).all() and noisy.cache_info()["traces"] == 1
"""


def test_a_trace_that_imports_numpy_random_is_traced_again():
    done = subprocess.run([sys.executable, "-c", FIRST_IMPORT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_random_kernels_are_refused_where_draws_would_repeat_or_split():
    f = tj.kernel(lambda x: x + np.random.rand(*x.shape))
    with tj.capture():
        with pytest.raises(tj.UnsupportedError, match="replay"):
            f(np.zeros(3))
    da = pytest.importorskip("dask.array")
    with pytest.raises(tj.UnsupportedError, match="Dask"):
        f(da.zeros(4, chunks=2))


# ---- the fuzzer: a random draw of a random distribution, shape and dtype, in a small program ----

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ_EXAMPLES = int(__import__("os").environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 10   # per device

_DRAWS = {   # method -> (arguments strategy, support check of the values)
    "random": (st.just(()), lambda v, a: (0 <= v).all() and (v < 1).all()),
    "uniform": (st.tuples(st.sampled_from([-2.0, 0.0, 1.5]), st.sampled_from([2.0, 3.5])),
                lambda v, a: (a[0] <= v).all() and (v <= a[1]).all()),
    "integers": (st.tuples(st.integers(-5, 3), st.integers(4, 40)), lambda v, a: (a[0] <= v).all() and (v < a[1]).all()),
    "standard_normal": (st.just(()), lambda v, a: np.isfinite(v).all()),
    "exponential": (st.tuples(st.sampled_from([0.5, 2.0])), lambda v, a: (v >= 0).all() and np.isfinite(v).all()),
    "choice": (st.tuples(st.integers(1, 9)), lambda v, a: (0 <= v).all() and (v < a[0]).all()),
}


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(method=st.sampled_from(sorted(_DRAWS)), data=st.data(),
       shape=st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple), seed=st.integers(0, 2**31))
def test_random_draws_fuzz(method, data, shape, seed, device):
    strategy, within = _DRAWS[method]
    args = data.draw(strategy, label="arguments")
    dt = float_dtype(device)
    floats = method in ("random", "standard_normal", "exponential")
    extra = {"dtype": dt} if method in ("random", "standard_normal") else {"dtype": np.int32} \
        if method == "integers" else {}

    def program(x, g):
        draw = getattr(g, method)(*args, size=shape, **extra) if method not in ("random", "standard_normal") \
            else getattr(g, method)(shape, **extra)
        return draw, x + draw * 0

    k = tj.kernel(program)
    x = np.zeros(shape, dt)
    expected = program(x, np.random.default_rng(seed))
    if device in ("webgpu", "metal") and any(np.asarray(e).dtype.itemsize == 8 for e in expected):
        with pytest.raises(tj.DtypeError):   # NumPy's float64 / int64 results, which these devices lack
            k(x, np.random.default_rng(seed), device=device)
        return
    first = [np.asarray(v) for v in k(x, np.random.default_rng(seed), device=device)]
    again = [np.asarray(v) for v in k(x, np.random.default_rng(seed), device=device)]
    for got, want in zip(first, expected):
        assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    assert within(first[0], args), (method, args, first[0])
    np.testing.assert_array_equal(first[0], again[0])        # a Generator's seed gives its stream again
    if floats and first[0].size >= 64:
        assert np.unique(first[0]).size > first[0].size // 2  # not a constant nor a short cycle
