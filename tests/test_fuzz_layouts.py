"""Differential fuzzing at the sizes where layout decisions happen: tiles of transposed reads (8x4 to 32x32),
rows streamed into local accumulators, register tiles, kept softmax rows, two-stage sums and parallel
loops only appear on arrays of thousands of elements, which the small-shape fuzzer never builds.
(It once found a kernel Numba took 230 s to compile: 32 inlined tanh calls in a register tile.)"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tracejit as tj

EXTENTS = [16, 32, 48, 64, 96, 100, 128]          # multiples of 16/32 and one that is neither
EXAMPLES = int(os.environ.get("TRACEJIT_FUZZ_EXAMPLES", "0")) or 15   # per device; more: TRACEJIT_FUZZ_EXAMPLES=500


def _softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name -> (number of 2-D inputs, how their shapes relate, program)
PROGRAMS = {
    "transpose add": (2, "transposed", lambda a, b: a.T * 2 + b),
    "matmul": (2, "contract", lambda a, b: a @ b),
    "matmul then scale": (2, "contract", lambda a, b: np.tanh(a @ b) * 0.5),
    "column sums": (1, "any", lambda a: a.sum(axis=0)),
    "column max of a product": (2, "same", lambda a, b: (a * b).max(axis=0)),
    "row softmax": (1, "any", lambda a: _softmax(a, 1)),
    "column softmax": (1, "any", lambda a: _softmax(a, 0)),
    "centered": (1, "any", lambda a: a - a.mean()),
    "layernorm of transpose": (1, "any", lambda a: (a.T - a.T.mean(axis=1, keepdims=True)) / 3.0),
    "two outputs": (2, "same", lambda a, b: (a + b, a * b, (a - b).sum(axis=1))),
}


@st.composite
def programs(draw):
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    n_inputs, relation, fn = PROGRAMS[name]
    m, k, n = (draw(st.sampled_from(EXTENTS)) for _ in range(3))
    if relation == "transposed":
        shapes = [(m, k), (k, m)]
    elif relation == "contract":
        shapes = [(m, k), (k, n)]
    else:
        shapes = [(m, k)] * n_inputs
    seed = draw(st.integers(0, 2**16))
    strided = draw(st.booleans())
    return name, fn, shapes, seed, strided


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_layouts_chosen_at_scale_compute_what_numpy_computes(program, device):
    name, fn, shapes, seed, strided = program
    rng = np.random.default_rng(seed)
    args = []
    for shape in shapes:
        a = rng.standard_normal(shape).astype(np.float32)
        if strided:  # the same values, read through a transposed view
            a = np.ascontiguousarray(a.T).T
        args.append(a)
    note(f"{name} on {shapes}, strided={strided}")
    expected = fn(*args)
    got = tj.kernel(fn)(*args, device=device)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = tuple(map(np.asarray, got)) if isinstance(got, tuple) else (np.asarray(got),)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(e).max())))
