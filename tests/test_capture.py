"""Graph capture and replay on every device: replay equals eager for chains of kernels, with new
inputs and repeated replays; @tj.jit; the error cases; what replay does and does not repeat."""
import re

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close


@tj.kernel
def affine(x, w, b):
    return x @ w + b


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def scale(x, s):
    return x * s + 1.0


@tj.kernel
def stats(x):
    return x.mean(axis=0), x.max(axis=0)


def layer_numpy(x, w, b):
    h = x @ w + b
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def inputs(rng, n=6):
    return (rng.standard_normal((n, 5)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32),
            rng.standard_normal(7).astype(np.float32))


def test_replay_with_new_inputs_equals_eager(device, rng):
    x, w, b = inputs(rng)
    with tj.capture() as g:
        y = softmax(affine(x, w, b, device=device), device=device)
        g.outputs = y
    assert_close(np.asarray(y), layer_numpy(x, w, b), rtol=1e-5, atol=1e-6)   # the block ran for real
    for _ in range(3):
        x2, w2, b2 = inputs(rng)
        out = g(x2, w2, b2)
        assert_close(np.asarray(out), layer_numpy(x2, w2, b2), rtol=1e-5, atol=1e-6)
        eager = softmax(affine(x2, w2, b2, device=device), device=device)
        assert_close(np.asarray(out), np.asarray(eager), rtol=1e-6, atol=1e-7)


def test_a_chain_of_ten_kernels_and_repeated_replays(device, rng):
    a = rng.standard_normal(32).astype(np.float32)
    with tj.capture() as g:
        v = a
        for i in range(10):
            v = scale(v, 0.5, device=device)
        g.outputs = v
    expected = a
    for _ in range(10):
        expected = expected * np.float32(0.5) + np.float32(1.0)
    for _ in range(4):
        g.replay()
        assert_close(np.asarray(g.outputs), expected, rtol=1e-6)
    assert "10 launch(es)" in repr(g)


def test_several_outputs_and_a_value_read_by_two_calls(device, rng):
    x = rng.standard_normal((9, 4)).astype(np.float32)
    with tj.capture() as g:
        s = scale(x, 2.0, device=device)
        mean, top = stats(s, device=device)
        g.outputs = (mean, softmax(s, device=device), top)
    x2 = rng.standard_normal((9, 4)).astype(np.float32)
    mean, soft, top = g(x2)
    s2 = x2 * np.float32(2) + np.float32(1)
    assert_close(np.asarray(mean), s2.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert_close(np.asarray(top), s2.max(axis=0))
    assert_close(np.asarray(soft), np.asarray(softmax(s2, device=device)), rtol=1e-6, atol=1e-7)


def test_inputs_are_the_arrays_read_and_not_produced_in_first_read_order(device, rng):
    x, w, b = inputs(rng)
    with tj.capture() as g:
        h = affine(x, w, b, device=device)
        g.outputs = scale(h, 3.0, device=device)
    assert [(i.shape, i.where) for i in g.inputs] == [((6, 5), "host"), ((5, 7), "host"), ((7,), "host")]


def test_feeding_new_inputs_never_writes_to_the_callers_arrays(device, rng):
    x = rng.standard_normal(8).astype(np.float32)
    kept = x.copy()
    with tj.capture() as g:
        g.outputs = scale(x, 2.0, device=device)
    g(np.zeros(8, np.float32))
    np.testing.assert_array_equal(x, kept)


def test_outputs_are_overwritten_by_the_next_replay_unless_copied(device, rng):
    x = rng.standard_normal(8).astype(np.float32)
    with tj.capture() as g:
        g.outputs = scale(x, 2.0, device=device)
    first = g(np.ones(8, np.float32))
    held = np.asarray(first).copy()
    copied = g(np.ones(8, np.float32), copy=True)
    second = g(np.zeros(8, np.float32))
    assert second is first                                   # the graph's buffer, now holding new values
    assert_close(np.asarray(first), np.ones(8, np.float32))  # 0 * 2 + 1
    assert_close(np.asarray(copied), held)                   # a copy keeps its values
    assert np.asarray(copied) is not np.asarray(first)


def test_replay_with_another_shape_dtype_or_device_raises(device, rng):
    x = rng.standard_normal(8).astype(np.float32)
    with tj.capture() as g:
        g.outputs = scale(x, 2.0, device=device)
    with pytest.raises(tj.ArgumentError, match=r"float32\[8\] on host; got float32\[9\]"):
        g(np.ones(9, np.float32))
    with pytest.raises(tj.ArgumentError, match="float64"):
        g(np.ones(8, np.float64))
    with pytest.raises(tj.ArgumentError, match="on host; got float32.* on " + device):
        g(tj.asarray(np.ones(8, np.float32), device=device))
    with pytest.raises(tj.ArgumentError, match="reads 1 input"):
        g(x, x)


def test_python_side_effects_are_not_replayed_and_kernels_stay_cached(device, rng):
    f = tj.kernel(lambda a: a - 1.0)
    seen = []
    x = rng.standard_normal(4).astype(np.float32)
    with tj.capture() as g:
        seen.append("ran")
        g.outputs = f(x, device=device)
    g.replay()
    g.replay()
    assert seen == ["ran"]
    compiles = f.cache_info()["compiles"]
    assert_close(np.asarray(f(x, device=device)), x - 1)     # outside the graph: nothing compiles again
    assert f.cache_info()["compiles"] == compiles


def test_misuse_of_a_graph_is_a_clear_error(device, rng):
    x = rng.standard_normal(4).astype(np.float32)
    with pytest.raises(tj.TracejitError, match="captured nothing"):
        tj.capture().replay()
    g = tj.capture()
    with pytest.raises(ZeroDivisionError):
        with g:
            scale(x, 2.0, device=device)
            1 / 0
    with pytest.raises(tj.TracejitError, match="raised, so the graph is incomplete"):
        g.replay()
    with tj.capture() as g:
        g.outputs = x * 2                                    # NumPy's result, not a kernel's
    with pytest.raises(tj.ArgumentError, match="g.outputs must be values"):
        g.replay() or g.results()


def test_jit_captures_on_the_first_call_and_replays_afterwards(device, rng):
    calls = []

    @tj.jit
    def layer(x, w, b):
        calls.append(1)
        return softmax(affine(x, w, b, device=device), device=device)

    for _ in range(3):
        x, w, b = inputs(rng)
        assert_close(np.asarray(layer(x, w, b)), layer_numpy(x, w, b), rtol=1e-5, atol=1e-6)
    assert len(calls) == 1                                   # one capture, then replays
    x, w, b = inputs(rng, n=3)
    assert_close(np.asarray(layer(x, w, b)), layer_numpy(x, w, b), rtol=1e-5, atol=1e-6)
    assert len(calls) == 2 and "2 graph(s)" in repr(layer)   # a new shape captures anew


def test_jit_scalars_are_part_of_the_signature_and_copy_gives_fresh_arrays(device, rng):
    @tj.jit(copy=True)
    def shifted(x, s):
        return scale(x, s, device=device)

    x = rng.standard_normal(5).astype(np.float32)
    first = shifted(x, 2.0)
    second = shifted(x, 3.0)
    assert_close(np.asarray(first), x * np.float32(2) + 1)
    assert_close(np.asarray(second), x * np.float32(3) + 1)
    assert_close(np.asarray(shifted(x, 2.0)), np.asarray(first))
    assert np.asarray(shifted(x, 2.0)) is not np.asarray(first)


def test_a_value_cannot_cross_devices_inside_a_capture(rng):
    if len([i for i in tj.devices() if i.available]) < 2:
        pytest.skip("needs two devices")
    x = rng.standard_normal(4).astype(np.float32)
    with pytest.raises(tj.UnsupportedError, match="each value stays on its device"):
        with tj.capture():
            scale(scale(x, 2.0, device="numba"), 2.0, device="opencl")


def test_intermediates_share_memory_when_their_lifetimes_allow(device, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    with tj.capture() as g:
        v = a
        held = []
        for _ in range(10):
            v = scale(v, 0.5, device=device)
            held.append(v)
        g.outputs = v
    at_capture = np.asarray(held[3]).copy()
    g(np.zeros(1000, np.float32))
    # nine intermediates of 4000 bytes each alternate between two shared blocks (which a device's
    # allocator may round up a little)
    assert 0 < g.scratch_bytes <= 2.5 * a.nbytes
    assert_close(np.asarray(held[3]), at_capture)            # a held intermediate is not overwritten
    expected = np.zeros(1000, np.float32)
    for _ in range(10):
        expected = expected * np.float32(0.5) + np.float32(1)
    assert_close(np.asarray(g.outputs), expected, rtol=1e-6)


@tj.kernel
def total(x):
    return x.sum()


def test_a_0d_array_fed_or_computed_in_the_graph_is_read_on_every_replay(device, rng):
    # (a 0-d input is passed to kernels by value, read when a call starts: a replay must not repeat that number)
    x = rng.standard_normal(50).astype(np.float32)
    with tj.capture() as g:
        g.outputs = scale(x, np.array(2.0, np.float32), device=device)
    assert_close(np.asarray(g(x, np.array(-3.0, np.float32))), x * np.float32(-3) + 1, rtol=1e-6)
    with tj.capture() as g:
        g.outputs = scale(x, total(x, device=device), device=device)
    x2 = rng.standard_normal(50).astype(np.float32)
    assert_close(np.asarray(g(x2)), x2 * x2.sum() + 1, rtol=1e-5, atol=1e-5)


@tj.kernel
def counts(labels, weights):
    total = np.zeros(1000, np.float32)
    np.add.at(total, labels, weights)   # 10^5 updates: the scatter op (a copy kernel, then the updates)
    return total


def test_a_scatter_replays_its_copy_before_its_updates_every_time(device, rng):
    def data():
        return rng.integers(0, 1000, 100_000).astype(np.int32), rng.random(100_000).astype(np.float32)

    def expected(labels, weights):
        out = np.zeros(1000, np.float32)
        np.add.at(out, labels, weights)
        return out
    try:
        with tj.capture() as g:
            g.outputs = counts(*data(), device=device)
    except tj.UnsupportedError as e:   # an index out of bounds cannot be reported from a replay there
        pytest.skip(str(e))
    for _ in range(3):   # the updates would pile up if the target were not written afresh
        labels, weights = data()
        assert_close(np.asarray(g(labels, weights)), expected(labels, weights), rtol=1e-4, atol=1e-3)


# --- loops compiled as loops: each step's launches recorded, the whole loop replayed ------------------------------

@tj.kernel
def diffuse(u, steps: int):
    for t in range(steps):
        u = u + 0.1 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def diffuse_numpy(u, steps):
    for t in range(steps):
        u = u + np.float32(0.1) * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


@tj.kernel
def smooth_and_center(u, outer: int, inner: int):
    for t in range(outer):
        for s in range(inner):
            u = 0.5 * (u + np.roll(u, 1))
        u = u - u.mean()
    return u


def smooth_and_center_numpy(u, outer, inner):
    for t in range(outer):
        for s in range(inner):
            u = np.float32(0.5) * (u + np.roll(u, 1))
        u = u - u.mean()
    return u


def test_a_time_step_loop_replays_every_step_with_new_inputs(device, rng):
    u = rng.standard_normal(300).astype(np.float32)
    with tj.capture() as g:
        g.outputs = diffuse(u, 40, device=device)
    assert_close(np.asarray(g.outputs), diffuse_numpy(u, 40), rtol=1e-5, atol=1e-6)   # the block ran for real
    for _ in range(2):
        u2 = rng.standard_normal(300).astype(np.float32)
        out = g(u2)
        assert out.dtype == np.float32
        assert_close(np.asarray(out), diffuse_numpy(u2, 40), rtol=1e-5, atol=1e-6)


def test_a_replayed_loop_keeps_two_steps_of_memory_whatever_its_length(device, rng):
    u = rng.standard_normal(1000).astype(np.float32)
    scratch = []
    for steps in (5, 60):
        with tj.capture() as g:
            g.outputs = diffuse(u, steps, device=device)
        g(u)
        scratch.append(g.scratch_bytes)
    assert scratch[0] == scratch[1]
    assert scratch[1] <= 6 * u.nbytes


def test_nested_loops_and_jit_replay(device, rng):
    @tj.jit
    def block(u):
        return smooth_and_center(u, 3, 4, device=device)

    for _ in range(3):   # the first call captures, the others replay
        u = rng.standard_normal(64).astype(np.float32)
        assert_close(np.asarray(block(u)), smooth_and_center_numpy(u, 3, 4), rtol=1e-4, atol=1e-5)


def test_zero_steps_replay_the_first_values(device, rng):
    u = rng.standard_normal(32).astype(np.float32)
    with tj.capture() as g:
        g.outputs = diffuse(u, 0, device=device)
    u2 = rng.standard_normal(32).astype(np.float32)
    assert_close(np.asarray(g(u2)), u2)


@tj.kernel
def edit_distance(a, b):
    n, m = len(a), len(b)
    D = np.zeros((n + 1, m + 1), np.int32)
    for i in range(n + 1):
        D[i, 0] = i
    for j in range(m + 1):
        D[0, j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return D[n, m]


def test_a_loop_over_elements_replays_on_numba_and_is_refused_where_it_runs_on_the_host(device, rng):
    a, b = rng.integers(0, 3, 20).astype(np.int32), rng.integers(0, 3, 25).astype(np.int32)
    if device != "numba":
        with pytest.raises(tj.UnsupportedError, match=r"the loop at test_capture.py:\d+ cannot be captured.*"
                           r"loop over elements"):
            with tj.capture():
                edit_distance(a, b, device=device)
        return
    with tj.capture() as g:
        g.outputs = edit_distance(a, b, device=device)
    for _ in range(2):   # (the table starts from zeros again on every replay)
        a2, b2 = rng.integers(0, 3, 20).astype(np.int32), rng.integers(0, 3, 25).astype(np.int32)
        assert int(np.asarray(g(a2, b2))) == int(edit_distance.__wrapped__(a2, b2))


@tj.kernel
def relax_until(u, tol):
    err = 1.0
    while err > tol:
        v = 0.5 * (u + np.roll(u, 1))
        err = np.abs(v - u).max()
        u = v
    return u


@tj.kernel
def steps_from_data(u, counts):
    for t in range(counts[0]):
        u = 0.5 * (u + np.roll(u, 1))
    return u


@tj.kernel
def eliminate(A):
    n = A.shape[0]
    for k in range(n - 1):
        A = A - np.outer(np.where(np.arange(n, dtype=np.int32) > k, A[:, k] / A[k, k], 0.0), A[k])
    return A


def test_what_a_replay_cannot_repeat_is_refused_naming_the_loop(device, rng):
    u = rng.standard_normal(64).astype(np.float32)
    cases = [(relax_until, (u, 1e-3), "a `while` reads its test"),
             (steps_from_data, (u, np.array([3], np.int32)), "its bounds are read back")]
    for kernel, args, why in cases:
        with pytest.raises(tj.UnsupportedError, match=r"the loop at test_capture.py:\d+ cannot be captured.*" + why):
            with tj.capture():
                kernel(*args, device=device)
        kernel(*args, device=device)   # (called outside a capture it runs)


def test_a_loop_whose_index_picks_a_column_replays(device, rng):
    def matrix():
        return rng.standard_normal((8, 8)).astype(np.float32) + 8 * np.eye(8, dtype=np.float32)
    try:
        with tj.capture() as g:
            g.outputs = eliminate(matrix(), device=device)
    except tj.UnsupportedError as e:   # (webgpu checks the index when the body runs: a replay cannot report it)
        assert device == "webgpu"
        assert re.search(rf"the loop at test_capture.py:\d+ cannot be captured.*cannot report on {device}", str(e))
        return
    # the index, clamped to the loop's bounds, is proven inside the axis: no check (webgpu has no int64 to clamp)
    assert device != "webgpu"
    A = matrix()
    assert_close(np.asarray(g(A)), eliminate.__wrapped__(A), rtol=1e-4, atol=1e-5)
