"""Integer-array indexing (gather) against NumPy on every device: x[idx] in NumPy's forms, np.take,
np.take_along_axis, np.searchsorted; out-of-bounds indices raise NumPy's IndexError on every device
(cuda and metal: tests/test_cuda_runtime.py, tests/test_metal.py); gathers fuse with their neighbours."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, assert_kernel_matches_numpy, random_array, run_kernel


def _indexing_forms(x, i, j, k):
    """NumPy's forms: arrays alone, among slices, ints, None and ..., broadcast together, adjacent (their
    dimensions in place) or not (first), lists, ranges and constant masks."""
    return (x[i], x[:, j], x[i, j], x[i, :, k], x[..., k], x[None, i, None], x[1:4, j, ::-2], x[0, :, k],
            x[:, 1, k], x[[0, -2], 1], x[range(3)], x[np.array([True, False, True, False, True])],
            x[:, np.arange(42).reshape(6, 7) % 3 == 0], x[i.reshape(3, 1), :, k.reshape(1, 3)])


@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "float64"])
def test_indexing_forms_match_numpy(device, dtype, rng):
    x = random_array(rng, (5, 6, 7), dtype)
    i = np.array([4, -1, 0], np.int32)
    j = np.array([[0, -6, 5], [2, 3, -1]], np.int32)
    k = np.array([6, 0, -7], np.int32)
    assert_kernel_matches_numpy(_indexing_forms, x, i, j, k, device=device)


@pytest.mark.parametrize("index_dtype", ["int32", "int64", "uint8", "int8", "uint16"])
def test_index_arrays_of_every_integer_dtype_are_kernel_inputs(device, index_dtype, rng):
    x = random_array(rng, (40, 3), "float32")
    index = rng.integers(0 if index_dtype[0] == "u" else -40, 40, (5, 4)).astype(index_dtype)
    f = tj.kernel(lambda x, i: (x[i], x[:, 1][i] * 2))
    assert_close(run_kernel(f, x, index, device=device), (x[index], x[:, 1][index] * 2))
    info = np.iinfo(index_dtype)
    for extreme in {info.max, info.min} - {0}:   # beyond the axis however the kernel holds the value
        index[2, 1] = extreme
        with pytest.raises(IndexError, match=f"^index {extreme} is out of bounds for axis 0 with size 40$"):
            f(x, index, device=device)


def test_non_contiguous_data_and_index_arrays_are_read_in_place(device, rng):
    x = random_array(rng, (12, 10), "float32")[::2, ::-1]
    index = np.arange(-6, 6, dtype=np.int32)[::-3]
    assert_kernel_matches_numpy(lambda x, i: (x[i], x[:, i], x.T[i, i]), x, index, device=device)


def test_zero_size_index_arrays_give_empty_results(device, rng):
    x = random_array(rng, (5, 4), "float32")
    empty = np.zeros((0, 2), np.int32)
    assert_kernel_matches_numpy(lambda x, e: (x[e], x[:, e], np.take(x, e[:, 0]), x[[]]), x, empty, device=device)


def test_a_zero_d_traced_index_reads_one_row(device, rng):
    x = random_array(rng, (5, 4), "float32")
    assert_kernel_matches_numpy(lambda x, i: x[i[1]] + x[i[0], i[1]], x, np.array([-1, 2], np.int32), device=device)


def test_take_with_every_mode_axis_and_the_method(device, rng):
    x = random_array(rng, (4, 5, 6), "float32")
    index = np.array([[7, -1], [0, -9]], np.int32)
    assert_kernel_matches_numpy(
        lambda x, i: (np.take(x, i % 5, axis=1), np.take(x, i % 120), np.take(x, i, axis=-1, mode="wrap"),
                      np.take(x, i, axis=0, mode="clip"), x.take(i % 4, axis=0), np.take(x, 3, axis=2),
                      np.take(x, [5, -6], axis=2)),
        x, index, device=device)


def test_take_along_axis_with_argmax_argmin_and_broadcasting(device, rng):
    x = random_array(rng, (6, 50), "float32")
    index = np.array([[3, -1, 0]], np.int32)
    assert_kernel_matches_numpy(
        lambda x, i: (np.take_along_axis(x, np.argmax(x, axis=1, keepdims=True), axis=1),
                      np.take_along_axis(x, np.argmin(x, axis=0, keepdims=True), axis=0),
                      np.take_along_axis(x, i, axis=-1), np.take_along_axis(x, i.reshape(-1), axis=None)),
        x, index, device=device)


def test_an_argmax_gathered_row_fuses_into_one_kernel():
    x = np.random.default_rng(0).random((40, 300)).astype(np.float32)
    plan = tj.kernel(lambda x: np.take_along_axis(x, np.argmax(x, axis=1, keepdims=True), axis=1)).lower(x)
    assert len(plan.kernels) == 1


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_searchsorted_left_right_and_sorter(device, dtype, rng):
    a = np.sort(random_array(rng, (30,), dtype, low=-5, high=5))
    v = random_array(rng, (4, 6), dtype, low=-6, high=6)
    v[0, :3] = a[[0, 7, -1]]                            # ties with elements of a
    order = rng.permutation(30)
    shuffled = a[np.argsort(order)]                     # a == shuffled[order]
    assert_kernel_matches_numpy(
        lambda a, v, s, order: (np.searchsorted(a, v), np.searchsorted(a, v, side="right"), a.searchsorted(v[0, 0]),
                                np.searchsorted(s, v, sorter=order)),
        a, v, shuffled, order.astype(np.int32), device=device)


def test_searchsorted_puts_nan_last_as_numpy_sorts_it(device):
    a = np.array([-1.0, 0.0, 2.0, np.nan, np.nan], np.float32)
    v = np.array([np.nan, 2.0, -np.inf, np.inf], np.float32)
    assert_kernel_matches_numpy(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")),
                                a, v, device=device)


@pytest.mark.parametrize("bad", [7, -6], ids=["past_the_end", "too_negative"])
def test_an_index_out_of_bounds_raises_numpys_index_error_and_the_kernel_works_after(device, bad):
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    f = tj.kernel(lambda x, i: (x[i] + 1, x[:, i % 4]))
    index = np.array([1, bad, 2], np.int32)
    with pytest.raises(IndexError) as numpy_error:
        x[index]
    with pytest.raises(tj.IndexOutOfBoundsError) as ours:
        f(x, index, device=device)
    assert str(ours.value) == str(numpy_error.value) == f"index {bad} is out of bounds for axis 0 with size 5"
    good = np.array([1, -5, 4], np.int32)
    assert_close(run_kernel(f, x, good, device=device), (x[good] + 1, x[:, good % 4]))


def test_out_of_bounds_on_a_later_axis_names_it(device):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        tj.kernel(lambda x, i: np.take_along_axis(x, i, axis=1))(x, np.array([[0], [3]], np.int32), device=device)
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 1 with size 3"):
        tj.kernel(lambda x, i: x[:, i])(x, np.array([-4], np.int32), device=device)


def test_an_index_into_an_empty_axis_raises(device):
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        tj.kernel(lambda x, i: x[i])(np.zeros((0, 3), np.float32), np.array([0], np.int32), device=device)


def test_a_constant_index_out_of_bounds_raises_while_tracing():
    x = np.zeros((4, 3), np.float32)
    for body in (lambda x: x[[0, 9]], lambda x: x[np.array([1, -5])], lambda x: np.take(x, [12])):
        with pytest.raises(tj.IndexOutOfBoundsError, match="out of bounds for axis 0 with size (4|12)"):
            tj.kernel(body).trace(x)


def test_indices_numpy_refuses_are_refused_with_its_error():
    x = np.zeros((4, 3), np.float32)
    cases = [(lambda x, i: x[i.astype(np.float32)], tj.InvalidIndexError, "integer"),
             (lambda x, i: x[i, np.zeros((2, 2), np.int32)], tj.InvalidIndexError, "could not be broadcast"),
             (lambda x, i: x[np.array([True, False])], tj.InvalidIndexError, "boolean index did not match"),
             (lambda x, i: x[x > 0], tj.UnsupportedError, "size that depends on the data.*call it"),
             (lambda x, i: np.take_along_axis(x, i, axis=0), tj.ShapeError, "same number of dimensions")]
    for body, error, message in cases:
        with pytest.raises(error, match=message):
            tj.kernel(body).trace(x, np.array([0, 1, 2], np.int32))
    assert issubclass(tj.InvalidIndexError, IndexError)


def test_an_embedding_lookup_plus_positions_is_one_kernel(device, rng):
    wte = random_array(rng, (50, 8), "float32")
    wpe = random_array(rng, (16, 8), "float32")
    tokens = rng.integers(0, 50, 10).astype(np.int32)
    f = tj.kernel(lambda tokens, wte, wpe: wte[tokens] + wpe[range(len(tokens))])
    assert len(f.lower(tokens, wte, wpe, device=device).kernels) == 1
    assert_close(run_kernel(f, tokens, wte, wpe, device=device), wte[tokens] + wpe[range(10)])


def test_gathers_fuse_with_producers_and_reductions():
    x = np.random.default_rng(1).random((64, 32)).astype(np.float32)
    index = np.arange(0, 64, 3, dtype=np.int32)
    plan = tj.kernel(lambda x, i: np.exp(x * 2)[i].sum(axis=1) + x[i[::-1], 0]).lower(x, index)
    assert len(plan.kernels) == 1


def test_a_captured_graph_on_numba_replays_and_raises():
    f = tj.kernel(lambda x, i: x[i] * 2)
    x, good = np.arange(5.0), np.array([4, 0])
    with tj.capture() as graph:
        y = f(x, good, device="numba")
    graph.replay()
    np.testing.assert_array_equal(np.asarray(y), x[good] * 2)
    good[0] = 9
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        graph(x, good)
