"""Contractions inside kernels against NumPy, values and dtypes: np.einsum (a table of expressions,
the sublist form, dtype=), matmul on stacks, dot, vdot, inner, outer, tensordot, np.linalg.norm; their
errors; and that they lower to the broadcast-multiply-reduce that the layout pass tiles."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import (assert_close, assert_kernel_matches_numpy, divides_indices, random_array, random_dyadic,
                       run_kernel)

DTYPES = ["float32", "float64", "int32"]
DTYPES_32 = ["float32", "int32"]   # where float64 takes the same path as float32 (the einsum table has all three)

# (subscripts, operand shapes): NumPy's einsum forms, grouped so that each group is one kernel call
EINSUM_GROUPS = {
    "one operand": [
        ("ii", [(4, 4)]),                       # trace
        ("ii->i", [(4, 4)]),                    # diagonal
        ("ij->ji", [(3, 4)]),                   # transposition
        ("ji", [(3, 4)]),                       # implicit output: sorted, so a transposition
        ("ij", [(3, 4)]),                       # implicit output: itself
        ("ij->", [(3, 4)]),                     # sum
        ("ij->j", [(3, 4)]),                    # column sums
        ("ijj->i", [(2, 3, 3)]),                # partial trace
        ("iij->ji", [(3, 3, 2)]),               # diagonal of the leading axes, moved last
        ("bii->bi", [(2, 3, 3)]),               # batched diagonal
        ("bii->b", [(2, 3, 3)]),                # batched trace
        ("i...->...", [(3, 2, 4)]),             # sum over the first axis of any rank
        ("...ii->...i", [(2, 3, 3)]),           # diagonals of a stack
        ("Ab", [(3, 2)]),                       # implicit output sorts upper case first: 'Ab'
        ("bA", [(3, 2)]),                       # ... so this is a transposition
    ],
    "two operands": [
        ("i,i", [(5,), (5,)]),                  # inner product
        ("i,i->i", [(5,), (5,)]),               # elementwise product
        ("i,j->ij", [(3,), (4,)]),              # outer product
        ("i,j", [(3,), (4,)]),                  # implicit outer product
        ("ij,jk->ik", [(3, 4), (4, 5)]),        # matmul
        ("ij,jk", [(3, 4), (4, 5)]),            # implicit matmul
        ("ij,kj->ik", [(3, 4), (5, 4)]),        # a @ b.T
        ("ji,jk->ik", [(4, 3), (4, 5)]),        # a.T @ b
        ("ij,jk->ki", [(3, 4), (4, 5)]),        # (a @ b).T
        ("ij,j->i", [(3, 4), (4,)]),            # matrix-vector
        ("i,ij->j", [(3,), (3, 4)]),            # vector-matrix
        ("ij,ij->i", [(3, 4), (3, 4)]),         # row-wise dot products
        ("ij,ij->", [(3, 4), (3, 4)]),          # Frobenius inner product
        ("ij,ji->", [(3, 4), (4, 3)]),          # trace of a product
        ("ii,i->i", [(3, 3), (3,)]),            # diagonal times a vector
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),           # batch matmul
        ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # attention scores
        ("bn,bm->bnm", [(2, 3), (2, 4)]),       # batched outer product
        ("ij,kl->ijkl", [(2, 3), (2, 2)]),      # outer product of matrices
        ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 3)]),            # two contracted labels
        ("ij,ij->ij", [(3, 4), (1, 4)]),        # a label of size 1 broadcasts, as in NumPy
        (",i->i", [(), (4,)]),                  # a 0-d operand
    ],
    "broadcasting and more operands": [
        ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),        # ellipsis broadcasting
        ("...ij,...jk", [(2, 1, 3, 4), (3, 4, 2)]),         # implicit: the broadcast axes first
        ("...i,...i->...", [(2, 1, 4), (3, 4)]),            # size-1 broadcast axes
        ("ij...,j...->i...", [(3, 4, 2), (4, 2)]),          # ellipsis last
        ("bi,ij,bj->b", [(2, 3), (3, 4), (2, 4)]),          # bilinear form
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),         # matrix chain
        ("i,i,i->", [(4,), (4,), (4,)]),                    # three-way inner product
        ("ij,jk,kl,lm->im", [(2, 3), (3, 2), (2, 4), (4, 3)]),   # four operands
        ("ij,jk->ik", [(3, 0), (0, 4)]),                    # an empty contraction: zeros
        ("ij,jk->ik", [(0, 3), (3, 4)]),                    # an empty result
    ],
}


def einsum_body(expressions):
    """One kernel for a group of expressions: the operands are consecutive pieces of one flat array,
    each reshaped (a kernel takes a fixed number of arguments)."""
    def body(flat):
        pieces, start = [], 0
        for _, shapes in expressions:
            for shape in shapes:
                size = int(np.prod(shape))
                pieces.append(flat[start:start + size].reshape(shape))
                start += size
        it = iter(pieces)
        return tuple(np.einsum(sub, *(next(it) for _ in shapes)) for sub, shapes in expressions)
    return body


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("group", list(EINSUM_GROUPS))
def test_einsum_matches_numpy(group, dtype, device, rng):
    expressions = EINSUM_GROUPS[group]
    size = sum(int(np.prod(shape)) for _, shapes in expressions for shape in shapes)
    flat = random_dyadic(rng, (size,), dtype)   # quarters: float sums are exact in any order
    assert_kernel_matches_numpy(einsum_body(expressions), flat, device=device)


def test_einsum_of_mixed_and_bool_dtypes_follows_numpy(device, rng):
    """The result dtype is NumPy's promotion of all operands (a Python scalar is an array, not weak);
    bools are the `or` of `and`s."""
    i32, f32 = random_array(rng, (3, 4), "int32"), random_dyadic(rng, (4,), "float32")
    m, v = rng.random((3, 4)) < 0.5, rng.random(4) < 0.5
    i8 = random_array(rng, (4,), "int8")

    def body(i32, f32, m, v, i8):
        return (np.einsum("ij,j->i", i32, f32), np.einsum("ij,j->i", m, v), np.einsum("ij->", m),
                np.einsum("ij,j", m, i8), np.einsum(",j->j", 2.0, f32), np.einsum("i,i", i8, i8))

    assert_kernel_matches_numpy(body, i32, f32, m, v, i8, device=device)


def test_einsum_sublist_form_dtype_and_optimize_match_numpy(device, rng):
    a, b = random_dyadic(rng, (3, 4), "float32"), random_dyadic(rng, (2, 4, 5), "float32")

    def body(a, b):
        return (np.einsum(a, [0, 1], b, [Ellipsis, 1, 2], [Ellipsis, 0, 2]), np.einsum(a, [1, 0]),
                np.einsum("ij,bjk->bik", a, b, dtype=np.float64), np.einsum("ij,bjk", a, b, optimize=True),
                np.einsum("ij,bjk->bki", a, b, optimize="greedy"), np.einsum("ij,bjk->", a, b, casting="same_kind",
                                                                              dtype=np.float32))

    assert_kernel_matches_numpy(body, a, b, device=device)


def test_einsum_reads_non_contiguous_inputs_in_place(device, rng):
    a = random_dyadic(rng, (6, 5), "float32")
    assert_kernel_matches_numpy(lambda a, b, c: (np.einsum("ij,jk->ik", a, b), np.einsum("ii->i", c),
                                                 np.einsum("ij->", a)),
                                a[::2], a.T[:, ::-1], a[:5], device=device)


def test_einsum_matmul_is_the_same_kernel_as_the_operator(device, rng):
    a, b = random_array(rng, (64, 48), "float32"), random_array(rng, (48, 32), "float32")
    operator = tj.kernel(lambda a, b: a @ b).lower(a, b, device=device)
    einsum = tj.kernel(lambda a, b: np.einsum("ij,jk->ik", a, b)).lower(a, b, device=device)
    assert len(einsum.kernels) == len(operator.kernels) == 1
    assert [k.source for k in einsum.kernels] == [k.source for k in operator.kernels]


def test_attention_scores_with_softmax_are_two_kernels(rng):
    """The contraction is one kernel, the softmax over its rows another: nothing else is materialised."""
    q, k = (random_array(rng, (2, 4, 8, 16), "float32", low=-1, high=1) for _ in range(2))

    def body(q, k):
        s = np.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    assert len(tj.kernel(body).lower(q, k, device="numba").kernels) == 2
    assert_kernel_matches_numpy(body, q, k, device="numba")


def test_diagonal_reads_with_a_stride_not_a_division():
    x = np.ones((8, 8), np.float32)
    source = tj.kernel(lambda x: np.einsum("ii->i", x)).lower(x, device="numba").kernels[0].source
    assert "//" not in source, source


# --- matmul, dot, inner, vdot, outer, tensordot ---------------------------------------------------

def matmul_forms(s, m, v):
    return (s @ m.T, m @ s[0, 0], v[:4] @ s, s @ v[:3], np.matmul(s[:, None], s[0].T), m @ m.T,
            s.swapaxes(-1, -2) @ s[0], np.matmul(v[:3], m[:3, :3]) @ v[:3])


def dot_forms(s, m, v):
    return (np.dot(s, m.T), np.dot(s, v[:3]), np.dot(m, s[0].T), np.dot(v[:3], s[1].T), np.dot(v, v),
            np.dot(m, m.dtype.type(2)), np.dot(v.dtype.type(3), v), np.dot(s, s.transpose(0, 2, 1)), s.dot(m.T),
            m.dot(v[:3]))


def product_forms(s, m, v):
    return (np.inner(s, m), np.inner(v[:3], s), np.inner(m, m.dtype.type(2)), np.vdot(s, s), np.vdot(m, v[:12].reshape(3, 4)),
            np.outer(s[0], v), np.outer(m, v[:2]),
            np.tensordot(s, m.T, 1), np.tensordot(s, s.transpose(1, 2, 0), 2), np.tensordot(s, s, ([1, 2], [1, 2])),
            np.tensordot(m, v[:4], 0), np.tensordot(s, m, axes=([2, 1], [1, 0])), np.tensordot(s, m, (-1, 1)),
            np.tensordot(m, m, ([], [])))


@pytest.mark.parametrize("dtype", DTYPES_32)
@pytest.mark.parametrize("forms", [matmul_forms, dot_forms, product_forms], ids=lambda f: f.__name__)
def test_products_match_numpy(forms, dtype, device, rng):
    s, m, v = (random_dyadic(rng, shape, dtype) for shape in ((2, 4, 3), (4, 3), (12,)))
    assert_kernel_matches_numpy(forms, s, m, v, device=device)


def test_matmul_broadcasts_stacks_of_matrices_like_numpy(device, rng):
    a, b = random_dyadic(rng, (2, 1, 3, 4), "float32"), random_dyadic(rng, (5, 4, 2), "float32")
    assert_kernel_matches_numpy(lambda a, b: (a @ b, np.matmul(b[:, :3].swapaxes(1, 2), a), a[0, 0, 0] @ b,
                                              b.swapaxes(1, 2) @ b[0, :, 0]),
                                a, b, device=device)


def test_products_of_bools_and_mixed_dtypes_follow_numpy(device, rng):
    m, i8 = rng.random((3, 4)) < 0.5, random_array(rng, (4, 3), "int8")
    f32 = random_dyadic(rng, (4,), "float32")
    assert_kernel_matches_numpy(lambda m, i8, f32: (m @ m.T, np.dot(m, i8), np.inner(m, f32 > 0), np.vdot(m, m),
                                                    np.tensordot(i8, f32, (0, 0)), np.outer(m[0], f32)),
                                m, i8, f32, device=device)


# --- np.linalg.norm -------------------------------------------------------------------------------

def norm_forms(x, v):
    return (np.linalg.norm(v), np.linalg.norm(v, 1), np.linalg.norm(v, np.inf), np.linalg.norm(v, -np.inf),
            np.linalg.norm(v, 0), np.linalg.norm(v, 3), np.linalg.norm(v, -1), np.linalg.norm(v, 0.5),
            np.linalg.norm(x, 2, axis=-1), np.linalg.norm(x, 1, axis=0, keepdims=True), np.linalg.norm(x),
            np.linalg.norm(x[0], "fro"), np.linalg.norm(x[0], -1), np.linalg.norm(x[0], np.inf),
            np.linalg.norm(x[0], -np.inf), np.linalg.norm(x, "fro", axis=(1, 2)),
            np.linalg.norm(x, 1, axis=(-1, 0), keepdims=True))


@pytest.mark.parametrize("dtype", DTYPES_32)
def test_norms_match_numpy(dtype, device, rng):
    x = random_array(rng, (2, 3, 4), dtype, low=-5, high=5)
    v = random_array(rng, (5,), dtype, low=1, high=5) * np.array([1, -1, 1, -1, 1], dtype)   # no zeros: ord < 1
    assert_close(run_kernel(tj.kernel(norm_forms), x, v, device=device), norm_forms(x, v))


@pytest.mark.slow_emulated("metal")
@pytest.mark.parametrize("ord_", [2, -2, "nuc"])
def test_matrix_norms_from_singular_values_on_every_device(device, rng, ord_):
    dt = np.float32 if device in ("webgpu", "metal") else np.float64
    x = rng.standard_normal((2, 4, 5)).astype(dt)
    program = lambda x: (np.linalg.norm(x, ord_, axis=(1, 2)), np.linalg.norm(x[0], ord_, keepdims=True),  # noqa: E731
                         np.linalg.norm(x, ord_, axis=(2, 0)))
    got = tj.kernel(program)(x, device=device)
    for g, e in zip(got, program(x)):
        assert_close(np.asarray(g), e, **(dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-11)))


# --- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "shapes"), [
    (lambda a, b: np.einsum("ij,jk->ik", a, b), [(2, 3), (4, 5)]),
    (lambda a, b: np.einsum("...i,...i", a, b), [(2, 3), (4, 3)]),
    (lambda a, b: np.tensordot(a, b, 1), [(2, 3), (4, 2)]),
    (lambda a, b: np.dot(a, b), [(2, 3), (4, 2)]),
    (lambda a, b: np.inner(a, b), [(2, 3), (4, 2)]),
    (lambda a, b: np.vdot(a, b), [(2, 3), (4, 2)]),
    (lambda a, b: a @ b, [(2, 3), (4, 2)]),
    (lambda a, b: a @ b, [(2, 2, 3), (4, 3, 2)]),
], ids=["einsum", "einsum ellipsis", "tensordot", "dot", "inner", "vdot", "matmul", "matmul batch"])
def test_mismatched_dimensions_raise_shape_error_naming_both_shapes(body, shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
    with pytest.raises(tj.ShapeError) as caught:
        tj.kernel(body).trace(a, b)
    message = str(caught.value).replace(" ", "")
    assert all(str(s).replace(" ", "") in message for s in shapes), message
    with pytest.raises(ValueError):
        body(a, b)   # NumPy refuses it too


@pytest.mark.parametrize(("subscripts", "match"), [
    ("ij,jk", "name 2 operand"),
    ("i1", "invalid subscript '1'"),
    ("i.j", "not part of an ellipsis"),
    ("ijk", "has shape \\(2, 3\\)"),
    ("ij->k", "'k' appears in no operand"),
    ("ij->ii", "more than once"),
    ("...j->j", "broadcast"),
    ("ij->i->j", "'->' only once"),
    ("...i...", "more than one ellipsis"),
])
def test_bad_subscripts_raise_shape_error(subscripts, match):
    with pytest.raises(tj.ShapeError, match=match):
        tj.kernel(lambda a: np.einsum(subscripts, a)).trace(np.ones((2, 3)))
    with pytest.raises(ValueError):
        np.einsum(subscripts, np.ones((2, 3)))


def test_einsum_unsafe_dtype_is_refused_and_out_writes_into_its_array():
    with pytest.raises(tj.UnsupportedError, match="casting='unsafe'"):
        tj.kernel(lambda a: np.einsum("ij->", a, dtype=np.int32)).trace(np.ones((2, 3)))
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3)
    np.einsum("ij->j", b, out=b[0])
    tj.kernel(lambda a: np.einsum("ij->j", a, out=a[0]))(a)   # the out= of every NumPy function: test_assignment.py
    np.testing.assert_array_equal(a, b)


def test_diagonal_of_unequal_axes_is_refused():
    with pytest.raises(tj.ShapeError, match="collapsing index 'i'"):
        tj.kernel(lambda a: np.einsum("ii->i", a)).trace(np.ones((2, 3)))


# --- matrix products as BLAS calls on the numba device (ir/library.py) --------------------------------
BLAS_PROGRAMS = {   # name -> (body, operand shapes, kernels on numba, of which BLAS calls)
    "linear": (lambda x, w, b: x @ w + b, [(64, 256), (256, 96), (96,)], 2, 1),
    "linear, weight transposed": (lambda x, w, b: x @ w.T + b, [(64, 256), (96, 256), (96,)], 2, 1),
    "FFN with GELU": (lambda x, w, b: _gelu(x @ w + b), [(64, 128), (128, 96), (96,)], 2, 1),
    "attention scores": (lambda q, k: q @ k.transpose(0, 2, 1) / 8.0, [(4, 48, 32), (4, 48, 32)], 2, 1),
    "broadcast stack": (lambda a, b: a @ b, [(2, 3, 32, 40), (40, 24)], 1, 1),
    "einsum, permuted output": (lambda a, b: np.einsum("ij,kj->ki", a, b), [(128, 64), (96, 64)], 1, 1),
    "written by hand": (lambda a, b: (a[:, :, None] * b[None, :, :]).sum(1), [(64, 48), (48, 40)], 1, 1),
    "computed operand": (lambda a, b: (a * 2 - 1) @ b, [(64, 48), (48, 40)], 2, 1),
    "padded operand": (lambda a, b: np.pad(a, ((0, 0), (1, 1))) @ b, [(64, 46), (48, 40)], 2, 1),
    "chain": (lambda a, b, c: a @ b @ c, [(64, 48), (48, 40), (40, 32)], 2, 2),
    # a matrix read from memory times a vector: BLAS's gemv (y @ A along the columns: 5x the generated loops)
    "vector @ matrix": (lambda v, m: v @ m, [(256,), (256, 512)], 1, 1),
    "matrix @ vector": (lambda m, v: m @ v + 1, [(512, 256), (256,)], 2, 1),
    # ... but a matrix the kernel computes, or a small one, stays fused (no pass to write it first)
    "vector @ computed matrix": (lambda v, m: v @ (m * 2), [(256,), (256, 512)], 1, 0),
    "vector @ small matrix": (lambda v, m: v @ m, [(64,), (64, 128)], 1, 0),
    "row sums of squares": (lambda x: ((x - x.mean(1, keepdims=True)) ** 2).sum(1), [(256, 512)], 1, 0),
}


def _gelu(h):
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


@pytest.mark.parametrize("name", BLAS_PROGRAMS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_products_match_numpy_with_blas_on_numba_and_loops_elsewhere(name, dtype, device, rng):
    body, shapes, _, _ = BLAS_PROGRAMS[name]
    args = [random_array(rng, s, dtype, low=-1, high=1) for s in shapes]
    assert_kernel_matches_numpy(body, *args, device=device, rtol=1e-4 if dtype == "float32" else 1e-10,
                                atol=1e-4 if dtype == "float32" else 1e-10)


@pytest.mark.parametrize("name", BLAS_PROGRAMS, ids=str)
def test_numba_runs_matrix_products_as_blas_calls_with_one_kernel_for_the_epilogue(name, rng):
    body, shapes, kernels, calls = BLAS_PROGRAMS[name]
    plan = tj.kernel(body).lower(*[random_array(rng, s, "float32") for s in shapes], device="numba")
    assert len(plan.kernels) == kernels
    assert sum("matmul (BLAS)" in k.source for k in plan.kernels) == calls


@pytest.mark.parametrize("dtype, shapes", [("int32", [(64, 64), (64, 64)]), ("float16", [(64, 64), (64, 64)]),
                                           ("float32", [(8, 8), (8, 8)])], ids=["int32", "float16", "small"])
def test_products_without_a_blas_dtype_or_too_small_stay_generated_loops(dtype, shapes, rng):
    args = [random_array(rng, s, dtype, low=-2, high=2) for s in shapes]
    plan = tj.kernel(lambda a, b: a @ b).lower(*args, device="numba")
    assert not any("matmul (BLAS)" in k.source for k in plan.kernels)
    # NumPy's float16 product rounds to float16 after every step; tracejit accumulates in float32
    assert_kernel_matches_numpy(lambda a, b: a @ b, *args, device="numba", rtol=1e-2 if dtype == "float16" else None,
                                atol=0.1 if dtype == "float16" else None)


def test_blas_products_read_strided_and_reversed_arguments_in_place(rng):
    a, b = random_array(rng, (128, 256), "float64"), random_array(rng, (128, 64), "float64")
    assert_kernel_matches_numpy(lambda a, b: a @ b, a[:, ::2], b[::-1], device="numba")


def test_blas_products_replay_in_a_capture_and_write_into_out(rng):
    x, w, b = (random_array(rng, s, "float32", low=-1, high=1) for s in [(64, 128), (128, 96), (96,)])
    f = tj.kernel(lambda x, w, b: _gelu(x @ w + b))
    with tj.capture() as graph:
        graph.outputs = f(x, w, b)
    x2 = random_array(rng, x.shape, "float32", low=-1, high=1)
    assert_close(graph(x2, w, b), _gelu(x2 @ w + b), rtol=1e-4, atol=1e-4)
    out = np.empty((64, 96), np.float32)
    f(x, w, b, out=out)
    assert_close(out, _gelu(x @ w + b), rtol=1e-4, atol=1e-4)


def test_a_cast_weight_is_cast_in_its_own_layout_before_a_blas_product(rng):
    """float64 activations times float32 weights transposed (GPT-2's tied projection `h @ wte.T`, where
    NumPy scalars made h float64): the weight is cast whole, in its layout, then read transposed."""
    h, wte = random_array(rng, (16, 64), "float64"), random_array(rng, (300, 64), "float32")
    body = lambda h, wte: h @ wte.T   # noqa: E731
    plan = tj.kernel(body).lower(h, wte, device="numba")
    cast = next(k for k in plan.kernels if "numpy.matmul" not in k.source)
    assert not divides_indices(cast.source)   # a plain streaming loop, no transposed index
    assert_kernel_matches_numpy(body, h, wte, device="numba")


@pytest.mark.parametrize("rows, k, n, by", [(3, 2048, 2048, "a few rows"), (8, 1024, 1024, "a few rows"),
                                            (3, 512, 512, None), (32, 1024, 1024, "cblas")])
def test_a_few_rows_through_a_large_matrix_stream_it_through_numpys_blas(rows, k, n, by, rng):
    """x @ W with 2-16 rows of x and a large W read from memory (an MLP's 8 x 30000 @ 30000 x 2000): the matrix is
    streamed once by NumPy's matmul, where 2-7 rows were a generated sum down W's columns (81 ms against 17 for
    2 x 30000 x 2000) and 8-16 MKL's gemm (29 against 18, AMD EPYC); a small W stays fused, 32 rows stay MKL's."""
    x, w = random_array(rng, (rows, k), "float32", low=-1, high=1), random_array(rng, (k, n), "float32", low=-1, high=1)
    f = tj.kernel(lambda x, w: np.maximum(x @ w, 0))
    sources = [s.source for s in f.lower(x, w, device="numba").kernels]
    blas_calls = [s for s in sources if "matmul (BLAS)" in s]
    if by is None:
        assert not blas_calls
    elif by == "cblas":   # (MKL's gemm where the mkl extra is installed, else NumPy's matmul as for any product)
        assert len(blas_calls) == 1 and "a few rows" not in blas_calls[0]
    else:
        assert len(blas_calls) == 1 and by in blas_calls[0]
    assert_kernel_matches_numpy(lambda x, w: np.maximum(x @ w, 0), x, w, device="numba", rtol=1e-4, atol=1e-3)
