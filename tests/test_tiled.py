"""Matrix products on SIMT targets (OpenCL, CUDA, Metal, WebGPU) as tiled kernels (codegen/simt/tiled.py):
values and dtypes against NumPy for shapes that do and do not divide the tile, batched, transposed and
strided operands, integers and float16; that the tiled kernel is the one chosen; that an epilogue
(bias + GELU) costs one more kernel at most; that CUDA's float16 tensor-core kernel (codegen/simt/mma.py)
compiles and assembles for sm_80 and sm_90. On numba the same products are BLAS calls (ir/library.py).

The CPU implementations here (PoCL, llvmpipe) keep the generated loops, which run faster there; these
tests switch their tiling on, so that the tiled kernel's OpenCL C and WGSL run too."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from reference import assert_close, random_array, random_dyadic, run_kernel

import tracejit as tj
from tracejit.codegen.simt import nvrtc
from tracejit.errors import DeviceError


@pytest.fixture(autouse=True)
def tiled_everywhere(request, monkeypatch):
    """The device under test tiles its products, CPU implementations of OpenCL and WebGPU included."""
    name = request.getfixturevalue("device") if "device" in request.fixturenames else None
    if name in ("opencl", "webgpu"):
        dev = tj.device(name)
        monkeypatch.setattr(dev, "layout", replace(dev.layout, tiled=True))


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
    x, w = (random_array(rng, s, "float32", low=-1, high=1) for s in ((64, 1024), (1024, 48)))
    assert_close(run_kernel(f, x, w, bias, device=device), linear_gelu(x, w, bias), rtol=1e-4, atol=1e-5)
    assert len(f.lower(x, w, bias, device=device).kernels) <= 2   # the partial products' sum fuses with it


SPLIT_CASES = {   # (a shape, b shape, body, the chunks a tiling device cuts the contraction into)
    "64 rows": ((64, 512), (512, 96), matmul, 4),
    "k of 300": ((40, 300), (300, 24), matmul, 2),
    "odd k": ((40, 257), (257, 24), matmul, 1),
    "batched": ((3, 16, 512), (512, 40), matmul, 4),
    "a.T @ b": ((512, 24), (512, 40), lambda a, b: a.T @ b, 4),
    "strided": ((48, 1100), (520, 30), lambda a, b: a[::2, 3:1027:2] @ b[4:516, ::-1], 4),
    "into a transpose": ((16, 512), (512, 40), lambda a, b: (a @ b).T + 1, 4),
}


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
@pytest.mark.parametrize("case", list(SPLIT_CASES))
def test_products_of_few_tiles_sum_chunks_of_the_contraction(device, rng, case, dtype):
    """A product of few result tiles over a long contraction (a linear layer of 64 tokens) is a batch of
    partial products over chunks of k, summed elementwise by the next kernel (ir/contraction.split_k)."""
    a_shape, b_shape, body, chunks = SPLIT_CASES[case]
    if device == "numba":
        pytest.skip("numba's products are BLAS calls or generated loops, never split (their values: the tests above)")
    if dtype == "float64" and device == "metal":
        pytest.skip("Metal has no float64")
    check(device, rng, a_shape, b_shape, dtype, prepare=body)
    specs = [tj.spec(s, dtype) for s in (a_shape, b_shape)]
    products = [c.ir.contraction for c in tj.kernel(body).lower(*specs, device=device).kernels
                if c.ir.contraction is not None]
    assert len(products) == 1 and products[0].sizes()[0] == chunks   # (a broadcast batch of a is rows)


def test_the_tiled_kernel_is_chosen(device):
    if device == "numba":
        pytest.skip("numba calls BLAS (ir/library.py)")
    kernels = tj.kernel(matmul).lower(tj.spec((70, 45), "float32"), tj.spec((45, 33), "float32"), device=device).kernels
    assert len(kernels) == 1
    assert "tj_as[" in kernels[0].source and "tj_bs[" in kernels[0].source   # the tiles in local memory


def test_float16_products_use_tensor_cores_from_sm_80():
    a, b = tj.spec((70, 45), "float16"), tj.spec((45, 33), "float16")
    sources = {arch: tj.kernel(matmul).lower(a, b, device=f"cuda:{arch}").kernels[0].source
               for arch in ("sm_75", "sm_80")}
    assert "mma.sync" not in sources["sm_75"] and "tj_as[" in sources["sm_75"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in sources["sm_80"]
    try:
        ptx = nvrtc.compile_ptx("k0_matmul", sources["sm_80"], "sm_80")
    except DeviceError as e:
        pytest.skip(f"NVRTC is not available: {e}")
    if nvrtc.ptxas() is None:
        pytest.skip("ptxas was not found")
    for arch in ("sm_80", "sm_90"):
        assert "0 bytes spill" in nvrtc.assemble(ptx, arch)
    # sizes that 16-byte copies fit: the next step's tiles arrive by cp.async while this one's products run
    source = tj.kernel(matmul).lower(tj.spec((256, 96), "float16"), tj.spec((96, 128), "float16"),
                                     device="cuda:sm_80").kernels[0].source
    ptx = nvrtc.compile_ptx("k0_matmul", source, "sm_80")
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    for arch in ("sm_80", "sm_90"):
        assert "0 bytes spill" in nvrtc.assemble(ptx, arch)


@pytest.mark.parametrize("a_shape, b_shape, b_transposed", [
    ((70, 45), (45, 33), False),      # edges everywhere: staged a half at a time
    ((128, 96), (96, 256), False),    # multiples of 8: staged 8 halves at a time
    ((64, 200), (200, 136), True),    # B read along the contraction (x @ w.T): vectors scattered by column
    ((3, 40, 24), (3, 24, 16), False),   # a batch of products
])
def test_float16_products_on_tensor_cores_match_numpy(device, rng, a_shape, b_shape, b_transposed):
    """Where the CUDA device uses tensor cores: on a GPU from sm_80, and on the CPU SIMT emulator, which
    computes mma.sync from the same fragments (the emulator's tj_cuda.h), so the layout is checked here."""
    if device != "cuda" or not tj.device("cuda").compiler.tensor_cores(tj.device("cuda").compiler.arch):
        pytest.skip("for CUDA with tensor cores (sm_80 and later, or the emulator)")
    prepare = (lambda a, b: a @ b.swapaxes(-1, -2)) if b_transposed else None
    if b_transposed:
        b_shape = b_shape[:-2] + b_shape[:-3:-1]
    a, b = random_dyadic(rng, a_shape, "float16"), random_dyadic(rng, b_shape, "float16")
    body = prepare or matmul
    source = tj.kernel(body).lower(a, b, device=device).kernels[0].source
    assert "tj_mma_m16n8k16(" in source
    result = run_kernel(tj.kernel(body), a, b, device=device)
    expected = body(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)   # one rounding, as computed
    assert_close(result, expected, rtol=1e-3, atol=1e-3)
