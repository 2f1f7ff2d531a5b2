"""Matrix products on SIMT targets (OpenCL, CUDA, Metal, WebGPU) as tiled kernels (codegen/tiled.py):
values and dtypes against NumPy for shapes that do and do not divide the tile, batched, transposed and
strided operands, integers and float16; that the tiled kernel is the one chosen; that an epilogue
(bias + GELU) costs one more kernel at most. On numba the same products are BLAS calls (ir/library.py)."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, random_array, random_dyadic, run_kernel

SIMT = ("opencl", "cuda", "metal", "webgpu")


def matmul(a, b):
    return a @ b


def tolerance(dtype, k: int) -> dict:
    """float16 results are rounded once from a float32 sum, NumPy's from its own order of half additions
    (other float sums of these inputs are exact)."""
    return {"rtol": 1e-2, "atol": 0.05 * k} if np.dtype(dtype) == np.float16 else {}


def check(device, rng, a_shape, b_shape, dtype="float32", prepare=None):
    a, b = random_dyadic(rng, a_shape, dtype), random_dyadic(rng, b_shape, dtype)   # float sums are exact
    body = prepare or matmul
    result = run_kernel(tj.kernel(body), a, b, device=device)
    assert_close(result, body(a, b), **tolerance(dtype, a_shape[-1]))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "uint16", "float16"])
def test_tiled_product_matches_numpy_across_dtypes(device, rng, dtype):
    check(device, rng, (70, 45), (45, 33), dtype)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((1, 1), (1, 1)),                 # too small to tile: generated loops
    ((7, 13), (13, 5)),
    ((1000, 3), (3, 17)),             # k of 3
    ((17, 1000), (1000, 3)),          # 3 columns: a matrix-vector product, not tiled
    ((9, 130), (130, 65)),            # one row of tiles, edges in m and n, k past several steps
    ((0, 5), (5, 9)),                 # empty
])
def test_odd_shapes_match_numpy(device, rng, a_shape, b_shape):
    check(device, rng, a_shape, b_shape)


@pytest.mark.parametrize("case", ["batched", "broadcast batch", "a.T @ b", "a @ b.T", "strided", "einsum ki,kj"])
def test_batched_transposed_and_strided_operands(device, rng, case):
    bodies = {
        "batched": ((3, 20, 17), (3, 17, 40), matmul),
        "broadcast batch": ((2, 3, 24, 16), (16, 40), matmul),
        "a.T @ b": ((45, 70), (45, 33), lambda a, b: a.T @ b),
        "a @ b.T": ((70, 45), (33, 45), lambda a, b: a @ b.T),
        "strided": ((80, 100), (50, 70), lambda a, b: a[::2, 1:51] @ b[:, ::-2]),
        "einsum ki,kj": ((45, 70), (45, 33), lambda a, b: np.einsum("ki,kj->ji", a, b)),
    }
    a_shape, b_shape, body = bodies[case]
    check(device, rng, a_shape, b_shape, prepare=body)


def test_non_contiguous_arguments(device, rng):
    a = random_dyadic(rng, (90, 64), "float32")[::3]     # a strided view passed in
    b = np.asfortranarray(random_dyadic(rng, (64, 40), "float32"))
    assert_close(run_kernel(tj.kernel(matmul), a, b, device=device), a @ b)


def test_bias_and_gelu_epilogue_is_one_more_kernel(device, rng):
    def linear_gelu(x, w, bias):
        h = x @ w + bias
        return 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    x, w, bias = (random_array(rng, s, "float32", low=-1, high=1) for s in ((24, 64), (64, 48), (48,)))
    f = tj.kernel(linear_gelu)
    assert_close(run_kernel(f, x, w, bias, device=device), linear_gelu(x, w, bias), rtol=1e-4, atol=1e-5)
    assert len(f.lower(x, w, bias, device=device).kernels) <= 2


@pytest.mark.parametrize("target", SIMT)
def test_the_tiled_kernel_is_chosen(target):
    a, b = tj.spec((70, 45), "float32"), tj.spec((45, 33), "float32")
    try:
        kernels = tj.kernel(matmul).lower(a, b, device=target).kernels
    except tj.DeviceError as e:
        pytest.skip(f"{target} cannot compile here: {e}")
    assert len(kernels) == 1
    assert "tj_as[" in kernels[0].source and "tj_bs[" in kernels[0].source   # the tiles in local memory
