"""NumPy 2's functions for the array API standard (numpy/standard.py: np.vecdot, np.matvec, np.cumulative_sum,
np.unique_*, np.linalg.matrix_norm, vector_norm, svdvals, ...) inside kernels, on every device, against NumPy."""
import numpy as np
import pytest

import tracejit as tj
from reference import assert_close

# make test's budget: emulated metal runs the SIMT lowering emulated cuda runs (its MSL is checked on numba's run)
pytestmark = pytest.mark.slow_emulated("metal")

rng = np.random.default_rng(3)
X = rng.standard_normal((3, 4)).astype(np.float32)
I = rng.integers(0, 4, (3, 4)).astype(np.int32)
M = rng.standard_normal((2, 3, 4)).astype(np.float32)
V4, V3 = rng.standard_normal(4).astype(np.float32), rng.standard_normal(3).astype(np.float32)
C = (X + 1j * X[::-1]).astype(np.complex64)

CASES = {
    "vecdot": (lambda a: np.vecdot(a, a), (X,)),
    "vecdot_axis0": (lambda a, b: np.vecdot(a, b, axis=0), (X, X[::-1])),
    "vecdot_complex": (lambda a, b: np.vecdot(a, b), (C, C[::-1])),
    "vecdot_uint8": (lambda a: np.vecdot(a, a), (I.astype(np.uint8),)),
    "matvec": (lambda a, b: np.matvec(a, b), (M, V4)),
    "vecmat": (lambda a, b: np.vecmat(a, b), (V3, M)),
    "matrix_transpose": (lambda a: np.matrix_transpose(a), (M,)),
    "linalg_matrix_transpose": (lambda a: np.linalg.matrix_transpose(a) * 2, (X,)),
    "cumulative_sum": (lambda a: np.cumulative_sum(a, axis=1, include_initial=True), (X,)),
    "cumulative_prod": (lambda a: np.cumulative_prod(a[0]), (X,)),
    "cumulative_sum_int": (lambda a: np.cumulative_sum(a, axis=0, dtype=np.int32), (I,)),
    "matrix_norm": (lambda a: np.linalg.matrix_norm(a), (X,)),
    "matrix_norm_inf": (lambda a: np.linalg.matrix_norm(a, ord=np.inf, keepdims=True), (M,)),
    "vector_norm_axes": (lambda a: np.linalg.vector_norm(a, axis=(0, 1), ord=3), (X,)),
    "vector_norm_inf": (lambda a: np.linalg.vector_norm(a, ord=-np.inf, keepdims=True), (X,)),
    "vector_norm_0": (lambda a: np.linalg.vector_norm(a, axis=1, ord=0), (I,)),
    "svdvals": (lambda a: np.linalg.svdvals(a), (X,)),
    "unique_values": (lambda a: np.sort(np.unique_values(a)), (I,)),
    "unique_all": (lambda a: tuple(np.unique_all(a)), (I,)),
    "unique_counts": (lambda a: tuple(np.unique_counts(a)), (I,)),
    "unique_inverse": (lambda a: tuple(np.unique_inverse(a)), (I,)),
    "astype": (lambda a: np.astype(a, np.int32), (X,)),
    "linalg_trace": (lambda a: np.linalg.trace(a), (M,)),
    "linalg_diagonal": (lambda a: np.linalg.diagonal(a, offset=1), (X,)),
    "linalg_outer": (lambda a, b: np.linalg.outer(a, b), (V4, V3)),
    "linalg_cross": (lambda a: np.linalg.cross(a[:, :3], a[::-1, 1:]), (X,)),
    "linalg_tensordot": (lambda a, b: np.linalg.tensordot(a, b, axes=1), (X, M[0].T)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_array_api_functions_as_numpys(device, name):
    f, args = CASES[name]
    if device == "webgpu" and any(a.dtype.kind == "c" for a in args):
        pytest.skip("webgpu computes no complex values")
    want = f(*args)
    try:
        got = tj.kernel(f)(*args, device=device)
    except tj.DtypeError as e:  # webgpu: no int64 (unique's counts and indices, NumPy's int sums)
        assert device == "webgpu" and "int64" in str(e) or "float64" in str(e), e
        return
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        assert_close(g, w, rtol=1e-5)


def test_named_results_keep_their_names(device):
    r = tj.kernel(lambda a: np.unique_counts(a))(I, device=device) if device != "webgpu" else None
    if r is not None:
        assert type(r).__name__ == "UniqueCountsResult" and np.array_equal(np.asarray(r.values), np.unique(I))
    s = tj.kernel(lambda a: np.linalg.svd(a))(X, device=device)
    assert type(s).__name__ == "SVDResult"
    assert_close(np.asarray(s.S), np.linalg.svd(X).S, rtol=1e-4)


def test_mismatched_vecdot_is_numpys_error():
    with pytest.raises(tj.ShapeError, match="vecdot"):
        tj.kernel(lambda a, b: np.linalg.vecdot(a, b))(X, V3)


@pytest.mark.parametrize("func", [np.broadcast_arrays, np.atleast_2d, np.atleast_3d], ids=lambda f: f.__name__)
def test_functions_of_several_arrays_keep_each_ones_dtype_beside_complex(device, func):
    """np.broadcast_arrays(real, complex) keeps the real one real (it was made complex with the other)."""
    if device == "webgpu":
        pytest.skip("webgpu computes no complex values")
    args = (X[:, :1], C[0], I[0].astype(np.float32))
    want = func(*args)
    got = tj.kernel(lambda *a: func(*a))(*args, device=device)
    assert [np.asarray(g).dtype for g in got] == [w.dtype for w in want]
    for g, w in zip(got, want):
        assert_close(np.asarray(g), w)
