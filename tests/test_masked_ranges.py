"""Sums of values masked by their place (np.triu, np.tril, bands, index comparisons): the numba device's reduce
loops run only over the steps that may add something (ir/masked_ranges.py). Every program is compared with
NumPy on every device, with NaN, infinities and -0.0 in the part the mask removes; the analysis is checked to
find the interval where it should (so the comparisons test the shortened loops) and to leave alone what it must
not shorten."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir.kernel_ir import KOp
from tracejit.ir.masked_ranges import masked_ranges

from reference import assert_close, run_kernel


def float_dtype(device):
    return np.float32 if device == "webgpu" else np.float64


def _data(rng, shape, dtype, poison=True):
    """Random values; where `poison`, NaN, +-inf and -0.0 sprinkled in (the masked part must never show them)."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if poison:
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=min(flat.size, 6), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf, -0.0, np.nan, -0.0], dtype)[: picks.size]
    return x


def _lower_triangle_poisoned(rng, n, m, k, dtype):
    """Finite values on and above the k-th diagonal, NaN and infinities below it."""
    x = _data(rng, (n, m), dtype, poison=False)
    below = ~np.tri(n, m, k - 1, dtype=bool)  # (j - i >= k: kept by triu(x, k))
    x[~below] = np.where(rng.random((~below).sum()) < 0.5, np.nan, np.inf)
    return x


def upper_sum(x):
    return np.sum(np.triu(x, 1))


def upper_sum_k(x, k):
    return np.triu(x, k).sum()


def lower_rows(x):
    return np.tril(x).sum(axis=1)


def lower_columns(x):
    return np.tril(x, -1).sum(axis=0)


def upper_rows_k(x, k):
    return np.triu(x, k).sum(axis=1)


def band(x):
    i, j = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    return np.where((j - i >= -1) & (j - i <= 2), x, 0).sum()


def strictly_before(x):
    i, j = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    return np.where(j < i, x, 0.0).sum(axis=1)


def not_after(x):
    i, j = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    return np.where(i - j > 1, 0, x).sum()


def pair_energy(pos, mass):  # Mocz's nbody.py getEnergy, its potential part
    x, y, z = pos[:, 0:1], pos[:, 1:2], pos[:, 2:3]
    dx, dy, dz = x.T - x, y.T - y, z.T - z
    inv_r = np.sqrt(dx**2 + dy**2 + dz**2)
    inv_r[inv_r > 0] = 1.0 / inv_r[inv_r > 0]
    return np.sum(np.sum(np.triu(-(mass * mass.T) * inv_r, 1)))


PROGRAMS = [(upper_sum, ()), (lower_rows, ()), (lower_columns, ()), (band, ()), (strictly_before, ()),
            (not_after, ())]
SHAPES = [(1, 1), (5, 5), (7, 3), (3, 9), (40, 40), (33, 70)]


@pytest.mark.parametrize("program", [p for p, _ in PROGRAMS], ids=lambda p: p.__name__)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_masked_sums_match_numpy_with_nan_and_infinities_in_the_masked_part(device, rng, program, shape):
    x = _data(rng, shape, float_dtype(device))
    assert_close(run_kernel(tj.kernel(program), x, device=device), program(x))


@pytest.mark.parametrize("k", [-40, -3, -1, 0, 1, 2, 5, 69, 70, 71])
def test_triangles_of_every_offset_match_numpy(device, rng, k):
    x = _lower_triangle_poisoned(rng, 33, 70, k, float_dtype(device))
    for program in (upper_sum_k, upper_rows_k):
        f = tj.kernel(program, static=("k",))
        assert_close(run_kernel(f, x, k=k, device=device), program(x, k), what=f"{program.__name__}(k={k})")


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, np.float64])
def test_masked_sums_of_every_dtype_match_numpy(rng, dtype):
    x = _data(rng, (37, 29), dtype)
    for program in (upper_sum, lower_rows, lower_columns, band):
        assert_close(tj.kernel(program)(x, device="numba"), program(x), what=program.__name__)


def test_a_zero_sum_keeps_numpys_sign():
    # kept elements all -0.0, the masked ones +0.0: NumPy's sum is +0.0 (its additions of the masked zeros), and
    # so is the shortened loop's (its total starts at +0.0 and never becomes -0.0)
    x = np.full((9, 9), -0.0)
    for program in (upper_sum, lower_rows, band):
        ours, theirs = np.asarray(tj.kernel(program)(x, device="numba")), program(x)
        np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs), err_msg=program.__name__)


def test_the_nbody_pair_energy_matches_numpy(device, rng):
    pos, mass = rng.standard_normal((50, 3)), 20.0 * np.ones((50, 1)) / 50
    dt = float_dtype(device)
    assert_close(run_kernel(tj.kernel(pair_energy), pos.astype(dt), mass.astype(dt), device=device),
                 pair_energy(pos.astype(dt), mass.astype(dt)))


def _masked(f, *args, **kwargs):
    """{range's extent: its bounds} of every kernel of the call's plan on numba."""
    plan = tj.kernel(f, static=tuple(kwargs)).lower(*args, device="numba", **kwargs)
    found = {}
    for kernel in plan.executable.program.kernels:
        for r, bounds in masked_ranges(kernel.instrs).items():
            found[kernel.instrs[r].arg[0]] = bounds
    return found


def negative_zero_fill(x):
    return np.where(np.tri(*x.shape, dtype=bool), x, -0.0).sum(axis=1)


def band_rows(x):
    i, j = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    return np.where((j - i >= -1) & (j - i <= 2), x, 0).sum(axis=1)


def test_the_analysis_finds_the_interval_of_each_mask():
    # (a whole sum of a contiguous array is one loop over its elements, which is not shortened: upper_sum, band)
    x = np.ones((30, 40))
    found = lambda f, **kw: [(b.side, b.scale, b.offset) for (bounds,) in [_masked(f, x, **kw).values()]
                             for b in bounds]
    assert found(lower_rows) == [("stop", 1, 1)]  # j <= i
    assert found(lower_columns) == [("start", 1, 1)]  # over the rows i of column j: i >= j + 1
    assert found(strictly_before) == [("stop", 1, 0)]  # j < i
    assert found(upper_rows_k, k=3) == [("start", 1, 3)]  # j >= i + 3
    assert sorted(found(band_rows)) == [("start", 1, -1), ("stop", 1, 3)]  # -1 <= j - i <= 2
    assert found(negative_zero_fill) == [("stop", 1, 1)]  # (-0.0 added leaves any sum as it is)
    assert len(_masked(pair_energy, np.ones((50, 3)), np.ones((50, 1)))) == 1


@pytest.mark.parametrize("program", [band_rows, negative_zero_fill], ids=lambda p: p.__name__)
def test_masked_rows_match_numpy(device, rng, program):
    x = _data(rng, (23, 31), float_dtype(device))
    assert_close(run_kernel(tj.kernel(program), x, device=device), program(x))
    zeros = np.full((5, 7), -0.0, float_dtype(device))  # (kept and masked zeros of both signs: NumPy's signs)
    zeros[::2] = 0.0
    ours = np.asarray(run_kernel(tj.kernel(program), zeros, device=device))
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(program(zeros)))


def nonzero_fill(x):
    return np.where(np.tri(*x.shape, dtype=bool), x, 1.0).sum()


def masked_maximum(x):
    return np.triu(x, 1).max(axis=1)


def masked_by_data(x):
    return np.where(x > 0, x, 0.0).sum()


def masked_by_a_square(x):
    i, j = np.arange(x.shape[0])[:, None], np.arange(x.shape[1])[None, :]
    return np.where(j * j < i, x, 0.0).sum()


def masked_running_sum(x):
    return np.cumsum(np.triu(x, 1), axis=1)


@pytest.mark.parametrize("program", [nonzero_fill, masked_maximum, masked_by_data,
                                     masked_by_a_square, masked_running_sum], ids=lambda p: p.__name__)
def test_what_may_add_something_in_every_step_is_left_alone_and_matches_numpy(rng, program):
    x = _data(rng, (12, 12), np.float64)
    assert not _masked(program, x)
    assert_close(tj.kernel(program)(x, device="numba"), program(x))


def test_the_numba_device_renders_the_shortened_loop(monkeypatch):
    from tracejit.codegen.cpu import native

    plan = tj.kernel(lower_columns).lower(np.ones((30, 40)), device="numba")
    (kernel,) = plan.executable.program.kernels
    assert native.unsupported(kernel, "serial") is None
    shortened = native.render(kernel, "serial")
    monkeypatch.setattr(native, "masked_ranges", lambda *args: {})
    assert native.render(kernel, "serial") != shortened


def _row_sum_ir(value, *, identity=0.0, red="sum", extent=8, index=np.int32, body=()):
    """The IR of a row sum over range 5 of `value(ins)` (built from: 0 param, 1 global, 2 acc, 3 cast(global), 4
    const 0.0, 5 range, 6 cast(range), 7 sub(6, 3), 8 le(7, const 0 at 9)), with `body` before the update."""
    from tracejit.ir.kernel_ir import Instr

    f8, b1, ix = np.dtype(np.float64), np.dtype(np.bool_), np.dtype(index)
    ins = [Instr(KOp.PARAM, f8, (), 0), Instr(KOp.GLOBAL, np.dtype(np.int64), (), 8),
           Instr(KOp.ACC, f8, (), (red, identity)), Instr(KOp.CAST, ix, (1,)), Instr(KOp.CONST, f8, (), 0.0),
           Instr(KOp.RANGE, np.dtype(np.int64), (), (extent, "reduce")), Instr(KOp.CAST, ix, (5,)),
           Instr(KOp.SUB, ix, (6, 3)), Instr(KOp.LE, b1, (7, 9)), Instr(KOp.CONST, ix, (), 0)]
    ins += [x(len(ins)) if callable(x) else x for x in body]
    ins.append(Instr(KOp.UPDATE, None, (2, value(ins))))
    ins.append(Instr(KOp.ENDRANGE, None, (5,)))
    return ins


def _where(ins, x):
    from tracejit.ir.kernel_ir import Instr

    ins.append(Instr(KOp.WHERE, np.dtype(np.float64), (8, 4, x)))
    return len(ins) - 1


def _load(ins):
    from tracejit.ir.kernel_ir import Instr

    ins.append(Instr(KOp.LOAD, np.dtype(np.float64), (0, 5)))
    return _where(ins, len(ins) - 1)


def test_the_analysis_reads_the_ir_of_a_masked_row_sum():
    (bound,) = masked_ranges(_row_sum_ir(_load))[5]
    assert (bound.side, bound.base, bound.scale, bound.offset) == ("start", 1, 1, 1)  # j - i > 0


@pytest.mark.parametrize("case", ["running total read", "a fault", "a store", "identity -0.0", "a maximum",
                                  "unsigned index", "8-bit index", "symbolic extent", "huge extent"])
def test_the_analysis_leaves_a_range_alone_where_a_step_outside_may_matter(case):
    from tracejit.ir.kernel_ir import Fault, Instr

    f8 = np.dtype(np.float64)
    kwargs: dict = {}
    value = _load
    symbolic = {}
    if case == "running total read":  # where(test, 0, acc + x[j]): a scan written as a reduce
        def value(ins):
            ins.append(Instr(KOp.LOAD, f8, (0, 5)))
            ins.append(Instr(KOp.ADD, f8, (2, len(ins) - 1)))
            return _where(ins, len(ins) - 1)
    elif case == "a fault":
        fault = Fault("IndexError", "index {value} is out of bounds")
        kwargs["body"] = [Instr(KOp.BOUND, np.dtype(np.int64), (5,), (8, fault))]
    elif case == "a store":
        kwargs["body"] = [Instr(KOp.STORE, None, (0, 5, 4))]
    elif case == "identity -0.0":
        kwargs["identity"] = -0.0
    elif case == "a maximum":
        kwargs["red"] = "max"
    elif case == "unsigned index":
        kwargs["index"] = np.uint32
    elif case == "8-bit index":
        kwargs["index"] = np.int8
    elif case == "symbolic extent":
        symbolic = {(5, 0): "n"}
    elif case == "huge extent":
        kwargs["extent"] = 1 << 31
    ins = _row_sum_ir(value, **kwargs)
    assert masked_ranges(ins, symbolic) == {}
    assert masked_ranges(_row_sum_ir(_load)) != {}  # (the same IR without the case: shortened)
