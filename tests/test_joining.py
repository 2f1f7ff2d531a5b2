"""Joining, splitting, padding and rearranging (np.concatenate ... np.diff) against NumPy on every device:
values and dtypes, negative axes, non-contiguous inputs, zero-size pieces, mixed-dtype joins; and the
kernel counts that show the pieces are index arithmetic, never written to memory on their own."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, random_array, run_kernel

# One kernel per device runs a set of forms on several dtypes at once (outputs of one shape share a
# kernel, so this keeps compiles few); 64-bit dtypes apart, so webgpu (no float64/int64) runs the rest.
DTYPES = {"32-bit": ("float32", "int32", "bool"), "64-bit": ("float64", "int64")}


def assert_matches(body, *args, device, static=None, **kwargs):
    kernel = tj.kernel(body) if static is None else tj.kernel(static=tuple(static))(body)
    result = run_kernel(kernel, *args, device=device, **(static or {}))
    with np.errstate(all="raise"):
        expected = body(*args, **(static or {}))
    assert_close(result, expected, **kwargs)


def on_each(forms, groups: int):
    """A kernel body applying forms to each of `groups` groups of arguments (one group per dtype). Kernel
    functions take no *args, so the body's parameters are spelled out."""
    arity = forms.__code__.co_argcount

    def apply(args):
        return tuple(out for i in range(0, len(args), arity) for out in forms(*args[i:i + arity]))
    names = ", ".join(f"a{i}" for i in range(arity * groups))
    return eval(f"lambda {names}: apply(({names},))", {"apply": apply})


def arrays(rng, dtypes, *shapes):
    """Random arguments per dtype and shape, each a non-contiguous view (a transpose of every other
    column), which the kernel reads in place."""
    def strided(shape, dt):
        return random_array(rng, tuple(reversed(shape[1:])) + (2 * shape[0],), dt)[..., ::2].T
    return [strided(shape, dt) for dt in dtypes for shape in shapes]


def flat(*results):
    """Lists (what np.split returns) flattened into one tuple of outputs."""
    out = []
    for r in results:
        out.extend(r if isinstance(r, (list, tuple)) else [r])
    return tuple(out)


# =============================================================================================
# Joining and splitting


def joins(x, v):
    """x: (3, 4), v: (4,); x.T and x[:, ::-1] are non-contiguous views of the argument."""
    t = x.T
    return (np.concatenate([x, x[::-1], x[:0]]), np.concatenate((x, x[:, ::-1]), axis=-1),
            np.concatenate([x, t.T], axis=None), np.concatenate([x[:, :0], x[:, :1]], axis=1),
            np.stack([x, x[::-1]]), np.stack([x, x, x], axis=-1), np.stack((v, v), axis=1), np.stack([x[0, 0], v[1]]),
            np.hstack([x, x[:, :1]]), np.hstack([v, v[:2], v[:0]]), np.vstack([x, v, x[:1]]), np.vstack([v, v]),
            np.dstack([x, x]), np.dstack([v, v]), np.column_stack([v, x.T, v]), np.concatenate(list(x)),
            np.append(x, v), np.append(x, x[:1], axis=0), np.append(t, t[:, :1], axis=-1), *np.unstack(x, axis=-1))


def splits(x, y):
    """x: (6, 4), y: (2, 4, 6)."""
    return flat(np.split(x, 3), np.split(x, [1, 4], axis=-1), np.split(x, [2, 10, -1, 1]), np.array_split(x, 4),
                np.array_split(y, 4, axis=-1), np.hsplit(x, 2), np.vsplit(x, [5]), np.dsplit(y, 3),
                np.hsplit(y[0, 0], [1]), np.split(x.T, 2, axis=-1))


def joins_and_splits(x, v):
    return joins(x, v) + splits(np.tile(x, (2, 1)), np.tile(x, (2, 1, 2)).reshape(2, 4, 6))


@pytest.mark.slow_emulated
@pytest.mark.parametrize("dtypes", list(DTYPES))
def test_joins_and_splits_match_numpy(dtypes, device, rng):
    args = arrays(rng, DTYPES[dtypes], (3, 4), (4,))
    assert_matches(on_each(joins_and_splits, len(DTYPES[dtypes])), *args, device=device)


def mixed_joins_32(i8, u8, b, i32, f16, f32):
    return (np.concatenate([i8, u8]), np.stack([b, i32]), np.hstack([f16, i8]), np.vstack([u8, f32]),
            np.concatenate([b, b]), np.column_stack([f16, f32]), np.concatenate([i8, u8], dtype=np.float32),
            np.stack([f32, i8], dtype=np.int16, casting="unsafe"), np.append(u8, [True, False]))


def mixed_joins_64(i32, u32, f32):
    return (np.concatenate([i32, u32]), np.stack([f32, i32]), np.stack([f32, 1.0 * np.ones(3)]),
            np.hstack([u32, np.arange(3)]), np.concatenate([f32, [1.5, 2.5, 3.5]]))


def test_mixed_dtype_joins_promote_as_numpy(device, rng):
    args = [random_array(rng, (3,), dt) for dt in ("int8", "uint8", "bool", "int32", "float16", "float32")]
    assert_matches(mixed_joins_32, *args, device=device)


def test_mixed_dtype_joins_promote_to_64_bit_as_numpy(device, rng):
    args = [random_array(rng, (3,), dt) for dt in ("int32", "uint32", "float32")]
    assert_matches(mixed_joins_64, *args, device=device)


def test_python_scalars_in_a_join_are_arrays_not_weak_values():
    # np.stack([1.0, x32]) is float64: NumPy makes each element an array first
    def body(x):
        return np.stack([1.0, x]), np.hstack([x, 2]), np.concatenate([x[None], [True]])
    traced = tj.kernel(body).trace(np.float32(1))
    assert [o.dtype for o in traced.outputs] == [o.dtype for o in body(np.float32(1))]


def test_joins_of_zero_size_arrays_are_empty(device):
    x = np.zeros((0, 3), np.float32)

    def body(x):
        return np.concatenate([x, x]), np.stack([x, x], axis=1), np.vstack([x, x]), np.split(x, 3, axis=1)[0]
    assert_matches(body, x, device=device)


# =============================================================================================
# Padding


def pads(x):
    """x: (3, 4); pads wider than the axis repeat the reflection as NumPy does."""
    return (np.pad(x, 1), np.pad(x, (2, 0)), np.pad(x, ((1, 2), (0, 3)), constant_values=5),
            np.pad(x, ((1, 0), (2, 1)), constant_values=((1, 2), (3, 4))), np.pad(x, {1: (2, 1)}),
            np.pad(x, 2, mode="edge"), np.pad(x, ((0, 5), (1, 1)), mode="edge"),
            np.pad(x, 2, mode="reflect"), np.pad(x, ((7, 1), (9, 4)), mode="reflect"),
            np.pad(x, 3, mode="symmetric"), np.pad(x, ((8, 0), (1, 9)), mode="symmetric"),
            np.pad(x, 2, mode="wrap"), np.pad(x, ((7, 4), (0, 9)), mode="wrap"), np.pad(x[:1], 2, mode="reflect"),
            np.pad(x.T, (1, 2), mode="reflect"), np.pad(x[::-1], 1, mode="symmetric"))


@pytest.mark.parametrize("dtypes", list(DTYPES))
def test_pad_modes_match_numpy(dtypes, device, rng):
    assert_matches(on_each(pads, len(DTYPES[dtypes])), *arrays(rng, DTYPES[dtypes], (3, 4)), device=device)


def odd_pads(x):
    return (np.pad(x, 2, mode="reflect", reflect_type="odd"), np.pad(x, (1, 3), mode="symmetric", reflect_type="odd"),
            np.pad(x, ((0, 2), (3, 0)), mode="reflect", reflect_type="odd"))


def test_pad_reflect_type_odd_matches_numpy(device, rng):
    assert_matches(on_each(odd_pads, 3), *arrays(rng, ("float32", "int32", "uint8"), (3, 4)), device=device)


def test_pad_constant_values_are_stored_as_numpy_stores_them(device):
    x = np.arange(6, dtype=np.int8).reshape(2, 3)

    def body(x):
        return np.pad(x, 1, constant_values=1.7), np.pad(x, 1, constant_values=-128), np.pad(x, (0, 0)), np.pad(x, 0)
    assert_matches(body, x, device=device)


def test_pad_of_zero_size_and_0_d_arrays(device):
    def body(e, s):
        return np.pad(e, 1), np.pad(e, ((0, 0), (1, 1)), mode="edge"), np.pad(s, 3), np.pad(s, 2, mode="wrap")
    assert_matches(body, np.zeros((0, 2), np.float32), np.float32(2.5), device=device)


# =============================================================================================
# Rearranging, tiling, axes


def rearranged(x, v):
    """x: (3, 4), v: (4,)."""
    t = x.T
    return (np.roll(x, 1), np.roll(x, -2, axis=-1), np.roll(x, (1, 5), axis=(0, 1)), np.roll(x, (1, 1), axis=(1, 1)),
            np.roll(t, 2, axis=0), np.roll(v, 9), np.flip(x), np.flip(x, -1), np.flip(x, (0, 1)), np.fliplr(x),
            np.flipud(v), np.rot90(x), np.rot90(x, 2), np.rot90(x, -1), np.rot90(x, 5, axes=(1, 0)),
            np.tile(v, 2), np.tile(x, (2, 1, 2)), np.tile(t, (1, 0)), np.repeat(x, 2), np.repeat(x, 3, axis=-1),
            np.repeat(x, [1, 0, 2], axis=0), np.repeat(v, [2, 2, 1, 1]), x.repeat(2, axis=0), np.repeat(x, [2], 1),
            np.moveaxis(x[None], 0, -1), np.moveaxis(x[None], [0, 1], [2, 0]), np.swapaxes(x, 0, -1), x.swapaxes(1, 0),
            np.expand_dims(x, -1), np.expand_dims(v, (0, 2)), np.squeeze(x[:1, None]), x[:, :1].squeeze(-1),
            np.ravel(t), t.ravel(), t.flatten(), np.ravel(x, order="F"), np.atleast_1d(x[0, 0]), np.atleast_2d(v),
            np.atleast_3d(v), np.atleast_3d(x), *np.atleast_2d(v, x), *np.broadcast_arrays(x, v[None], x[0, 0]),
            np.copy(t), t.copy())


@pytest.mark.parametrize("dtypes", list(DTYPES))
def test_rearranging_and_axes_match_numpy(dtypes, device, rng):
    assert_matches(on_each(rearranged, len(DTYPES[dtypes])), *arrays(rng, DTYPES[dtypes], (3, 4), (4,)), device=device)


def differences(x, v):
    return (np.diff(v), np.diff(x), np.diff(x, axis=0), np.diff(x, n=2, axis=-1), np.diff(x, 0), np.diff(v, 5),
            np.diff(x.T), np.diff(x, prepend=x[:, :1]), np.diff(v, append=v[:2], prepend=v[3]), np.diff(x, n=3))


@pytest.mark.parametrize("dtypes", [("float32", "int32", "uint8", "bool"), ("float64", "int64")], ids=list(DTYPES))
def test_diff_matches_numpy(dtypes, device, rng):
    assert_matches(on_each(differences, len(dtypes)), *arrays(rng, dtypes, (3, 5), (4,)), device=device)


def integrals(y, x):
    return (np.trapezoid(y), np.trapezoid(y, dx=0.5, axis=0), np.trapezoid(y, x), np.trapezoid(y.T, x, axis=0),
            np.trapezoid(y, np.tile(x, (3, 1)), axis=-1))


@pytest.mark.parametrize("dtypes", [("float32",), ("float64", "int32")], ids=["float32", "float64-int32"])
def test_trapezoid_matches_numpy(dtypes, device, rng):
    assert_matches(on_each(integrals, len(dtypes)), *arrays(rng, dtypes, (3, 5), (5,)), device=device)


def test_diff_prepend_of_a_python_scalar_promotes_as_numpy():
    # NumPy turns prepend=0 into an int64 array: float32 data becomes float64
    traced = tj.kernel(lambda x: (np.diff(x, prepend=0), np.diff(x, append=np.float32(0)))).trace(
        np.ones(3, np.float32))
    assert [o.dtype for o in traced.outputs] == [np.diff(np.ones(3, np.float32), prepend=0).dtype, np.float32]


def test_0_d_values_through_the_movement_functions(device):
    def body(s):
        return (np.stack([s, s]), np.atleast_1d(s), np.atleast_3d(s), np.expand_dims(s, 0), np.flip(s),
                np.tile(s, (2, 2)), np.repeat(s, 3), np.roll(s, 2), np.broadcast_arrays(s, np.ones(2, s.dtype))[0])
    assert_matches(body, np.float32(1.5), device=device)


# =============================================================================================
# Errors at the user's line, as NumPy raises them


# tracejit raises the built-in class NumPy raises (a tracejit subclass of it), at the user's line
NUMPY_ERRORS = {
    "concatenate ranks": (lambda x: np.concatenate([x, x[0]]), tj.ShapeError, "same number of dimensions"),
    "concatenate shapes": (lambda x: np.concatenate([x, x[:, :2]]), tj.ShapeError, "along dimension 1"),
    "concatenate 0-d": (lambda x: np.concatenate([x[0, 0], x[0, 1]]), tj.ShapeError, "zero-dimensional"),
    "concatenate axis": (lambda x: np.concatenate([x, x], axis=2), tj.ShapeError, "out of bounds"),
    "concatenate casting": (lambda x: np.concatenate([x, x], dtype=np.int32), tj.UnsupportedError, "same_kind"),
    "stack shapes": (lambda x: np.stack([x, x[:1]]), tj.ShapeError, "same shape"),
    "split unequal": (lambda x: np.split(x, 2), tj.ShapeError, "equal division"),
    "array_split zero": (lambda x: np.array_split(x, 0), tj.ShapeError, "larger than 0"),
    "vsplit 1-d": (lambda x: np.vsplit(x[0], 2), tj.ShapeError, "2 or more dimensions"),
    "pad negative": (lambda x: np.pad(x, -1), tj.ShapeError, "negative"),
    "pad float width": (lambda x: np.pad(x, 1.5), tj.UnsupportedError, "integral"),
    "pad mode": (lambda x: np.pad(x, 1, mode="nearest"), tj.ShapeError, "not supported"),
    "pad keyword": (lambda x: np.pad(x, 1, mode="edge", constant_values=1), tj.ShapeError, "unsupported keyword"),
    "pad empty axis": (lambda x: np.pad(x[:0], 1, mode="wrap"), tj.ShapeError, "empty axis"),
    "pad fill overflow": (lambda x: np.pad(x.astype(np.int8), 1, constant_values=300), tj.ScalarOverflowError,
                          "int8"),
    "repeat negative": (lambda x: np.repeat(x, -1), tj.ShapeError, "negative"),
    "repeat counts": (lambda x: np.repeat(x, [1, 2], axis=0), tj.ShapeError, "broadcast"),
    "moveaxis lengths": (lambda x: np.moveaxis(x, [0, 1], [0]), tj.ShapeError, "same number of elements"),
    "expand_dims repeated": (lambda x: np.expand_dims(x, (0, 0)), tj.ShapeError, "repeated axis"),
    "rot90 axes": (lambda x: np.rot90(x, axes=(1, 1)), tj.ShapeError, "different"),
    "fliplr 1-d": (lambda x: np.fliplr(x[0]), tj.ShapeError, ">= 2-d"),
    "diff order": (lambda x: np.diff(x, -1), tj.ShapeError, "non-negative"),
    "diff 0-d": (lambda x: np.diff(x[0, 0]), tj.ShapeError, "at least one dimensional"),
}


@pytest.mark.parametrize("name", list(NUMPY_ERRORS))
def test_mistakes_raise_numpys_exception_class(name):
    body, error, words = NUMPY_ERRORS[name]
    x = np.ones((3, 4), np.float32)
    builtin = next(c for c in error.__mro__ if c.__module__ == "builtins")
    with pytest.raises(builtin):
        body(x)   # NumPy refuses the same call with that class
    with pytest.raises(error, match=words) as info:
        tj.kernel(body).trace(x)
    if isinstance(info.value, tj.TraceError):
        assert "test_joining.py" in str(info.value)


# what NumPy does and tracejit cannot: a clear tj.UnsupportedError (or TraceError) naming the alternative
REFUSALS = {
    "pad statistic": (lambda x: np.pad(x, 1, mode="mean"), tj.UnsupportedError, "supported modes"),
    "pad function": (lambda x: np.pad(x, 1, mode=lambda *a: None), tj.UnsupportedError, "supports the modes"),
    "pad traced fill": (lambda x: np.pad(x, 1, constant_values=x[0, 0]), tj.UnsupportedError, "np.where"),
    "pad odd too wide": (lambda x: np.pad(x, 5, mode="reflect", reflect_type="odd"), tj.UnsupportedError, "steps"),
    "pad odd bool": (lambda x: np.pad(x > 0, 1, mode="reflect", reflect_type="odd"), tj.UnsupportedError, "bool"),
    "roll traced shift": (lambda x: np.roll(x, x[0, 0]), tj.TraceError, "static"),
    "split traced": (lambda x: np.split(x, x[0, 0]), tj.TraceError, "static"),
    "repeat many runs": (lambda x: np.repeat(x.ravel().repeat(8), np.arange(96) % 2 + 1), tj.UnsupportedError,
                         "at most 64"),
    "ravel K": (lambda x: np.ravel(x, order="K"), tj.UnsupportedError, "order='C' or 'F'"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_what_tracejit_cannot_do_is_refused_clearly(name):
    body, error, words = REFUSALS[name]
    with pytest.raises(error, match=words) as info:
        tj.kernel(body).trace(np.ones((3, 4), np.float32))
    assert "test_joining.py" in str(info.value)


# =============================================================================================
# Fusion: the pieces are index arithmetic


def rotary(x, freqs_cos, freqs_sin):
    """Llama's rotary embedding (llama3.np's apply_rotary_emb for one tensor): pairs split into real and
    imaginary parts, rotated, stacked back and flattened."""
    xri = x.reshape(x.shape[:-1] + (-1, 2))
    x_r, x_i = np.split(xri, 2, axis=-1)
    x_r, x_i = x_r.squeeze(-1), x_i.squeeze(-1)
    freqs_cos = np.expand_dims(freqs_cos, axis=(0, 2))
    freqs_sin = np.expand_dims(freqs_sin, axis=(0, 2))
    out = np.stack([x_r * freqs_cos - x_i * freqs_sin, x_r * freqs_sin + x_i * freqs_cos], axis=-1)
    return out.reshape(out.shape[:-2] + (-1,))


def rope_tables(seq_len: int, head_dim: int):
    freqs = np.outer(np.arange(seq_len), 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim)))
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


def test_rotary_embedding_with_split_and_stack_is_one_kernel(device, rng):
    x = random_array(rng, (1, 16, 4, 8), "float32", low=-2, high=2)
    cos, sin = rope_tables(16, 8)
    kernel = tj.kernel(rotary)
    assert len(kernel.lower(x, cos, sin, device=device).kernels) == 1
    assert_close(run_kernel(kernel, x, cos, sin, device=device), rotary(x, cos, sin))


def causal_attention(q, k, v):
    scores = q @ k.T / math.sqrt(q.shape[-1]) + (1 - np.tri(q.shape[0], dtype=q.dtype)) * -1e10
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def multi_head_attention(x, w_attn, w_proj, n_head):
    """GPT-2's (picoGPT's mha): q, k, v and the heads split off one projection, the heads hstacked back."""
    qkv = np.split(x @ w_attn, 3, axis=-1)
    heads = [np.split(t, n_head, axis=-1) for t in qkv]
    return np.hstack([causal_attention(q, k, v) for q, k, v in zip(*heads)]) @ w_proj


def test_gpt2_attention_split_and_hstack_materialise_no_piece(device, rng):
    n_head = 2
    x = random_array(rng, (8, 16), "float32", low=-1, high=1)
    w_attn = random_array(rng, (16, 48), "float32", low=-0.3, high=0.3)
    w_proj = random_array(rng, (16, 16), "float32", low=-0.3, high=0.3)
    q = x[:, :4]
    per_head = len(tj.kernel(causal_attention).lower(q, q, q, device=device).kernels)
    kernel = tj.kernel(static=("n_head",))(multi_head_attention)
    names = [k.name for k in kernel.lower(x, w_attn, w_proj, n_head=n_head, device=device).kernels]
    # the qkv projection, each head's attention reading its slices in place, the output projection
    # reading the hstacked heads through index arithmetic: no kernel copies a piece
    assert len(names) == 1 + n_head * per_head + 1, names
    assert not [n for n in names if "elementwise" in n], names
    result = run_kernel(kernel, x, w_attn, w_proj, n_head=n_head, device=device)
    assert_close(result, multi_head_attention(x, w_attn, w_proj, n_head), atol=1e-5)


def blur_and_laplacian(img, mode="reflect"):
    padded = np.pad(img, 1, mode=mode)
    blur = sum(padded[i:i + img.shape[0], j:j + img.shape[1]] for i in range(3) for j in range(3)) / 9
    laplacian = np.roll(img, 1, 0) + np.roll(img, -1, 0) + np.roll(img, 1, 1) + np.roll(img, -1, 1) - 4 * img
    return blur + laplacian + np.concatenate([img[:, 1:], img[:, :1]], axis=1)


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect"])
def test_pad_roll_and_concatenate_fuse_into_their_consumer(device, rng, mode):
    img = random_array(rng, (24, 40), "float32", low=0, high=1)
    kernel = tj.kernel(blur_and_laplacian, static="mode")
    # (wrap is a periodic view, fused; an edge or a reflection is the image joined to its ends: read nine times by
    # the blur, it may be written once first, where each read would select among the pieces again)
    assert len(kernel.lower(img, mode, device=device).kernels) <= (1 if mode == "wrap" else 2)
    assert_close(run_kernel(kernel, img, mode, device=device), blur_and_laplacian(img, mode), atol=1e-5)


def test_tj_namespace_has_the_functions():
    for name in ("concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "split", "array_split",
                 "hsplit", "vsplit", "dsplit", "pad", "roll", "flip", "fliplr", "flipud", "rot90", "tile", "repeat",
                 "moveaxis", "swapaxes", "expand_dims", "squeeze", "ravel", "atleast_1d", "atleast_2d", "atleast_3d",
                 "broadcast_arrays", "diff", "append", "unstack", "trapezoid"):
        assert callable(getattr(tj, name)), name
    traced = tj.kernel(lambda x: tj.concatenate([x, tj.flip(x)])).trace(np.ones(3, np.float32))
    assert traced.outputs[0].shape == (6,)
