"""The kernel-IR interpreter is the reference for renderers: every generated kernel must agree with it."""
import ast
import pathlib

import numpy as np
import pytest

import tracejit as tj
from tracejit.ir import interpret
from tracejit.runtime.views import flat_view
from tracejit.ir.analysis import BufferKey
from tracejit.ir.kernel_ir import KOp


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(x):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


RNG = np.random.default_rng(0)
_LUT = np.array([0.5, -1.5, 2.0, 1e-3, -0.0, 3.25, 7.0, 0.125], np.float32)
_ITABLE = np.array([3, -1, 4, 1, -5, 9, 2, 6], np.int32)
_BTABLE = np.array([True, False, False, True, True, False, True, False])
F32 = RNG.standard_normal((48, 80)).astype(np.float32)
PROGRAMS = {
    "softmax": (_softmax, (F32,)),
    "layernorm": (_layernorm, (F32,)),
    "softmax_middle_axis": (lambda x: _softmax(x.transpose(0, 2, 1)).transpose(0, 2, 1),
                            (RNG.standard_normal((4, 6, 10)).astype(np.float32),)),
    "strided_inputs": (lambda x, y: x.T * 2 + y[::-1], (F32[::2, ::-3], RNG.standard_normal((27, 24)).astype(np.float32))),
    "split_sum": (lambda x: x.sum(), (RNG.random(1 << 17).astype(np.float32),)),
    "matmul": (lambda a, b: a @ b, (F32[:16, :20], F32[:20, :12])),
    "int_floor_ops": (lambda a, b: (a // b) + (a % b) * 3, (np.arange(-20, 20, dtype=np.int32),
                                                               np.array([3, -4, 5, 7] * 10, np.int32))),
    "nan_max": (lambda a: np.maximum(a, 0.5).max(axis=0), (np.array([[1.0, np.nan], [0.0, 2.0]]),)),
    "float16_rows": (lambda a: (a * 2).sum(axis=1), (F32[:8].astype(np.float16),)),
    "bool_logic": (lambda a: ((a > 0) ^ (a < 1)) | ~(a == 0), (F32,)),
    # rows long enough that SIMT targets give each a work-group with a tree reduction
    "wide_softmax": (_softmax, (RNG.standard_normal((6, 300)).astype(np.float32),)),
    "wide_layernorm": (_layernorm, (RNG.standard_normal((5, 1000)),)),
    "wide_int_sums_and_products": (lambda a: (a.sum(axis=1), (a % 3 + 1).prod(axis=1), a.min(axis=1)),
                                   (RNG.integers(-50, 50, (4, 700)).astype(np.int32),)),
    "wide_any_all": (lambda a: ((a > 2).max(axis=1), (a > -4).min(axis=1)), (RNG.standard_normal((3, 500)),)),
    "wide_nan_max": (lambda a: a.max(axis=1), (np.where(RNG.random((4, 400)) < 0.01, np.nan, 1.0),)),
    "wide_float16_sum": (lambda a: a.sum(axis=1) * 0.5, (RNG.random((3, 600)).astype(np.float16),)),
    "column_sums": (lambda a: a.sum(axis=0), (RNG.standard_normal((300, 32)).astype(np.float32),)),
    "int_power": (lambda a, b: a ** b, (np.arange(-5, 5, dtype=np.int64), np.arange(10, dtype=np.int64) % 4)),
    # scans: per row with producers and consumers fused (forwards, backwards, after a row reduction), blocked
    "scans": (lambda x: (np.cumsum(x * 2, axis=-1) / 3, np.maximum.accumulate(x[::-1], axis=0)[::-1],
                         np.cumsum(x, axis=1) / x.sum(axis=1, keepdims=True)), (F32,)),
    "int_scans": (lambda a: (np.cumprod(a % 5 + 1, axis=1, dtype=np.int32), np.minimum.accumulate(a, axis=0)),
                  (RNG.integers(-50, 50, (6, 9)).astype(np.int32),)),
    "blocked_scan": (lambda x: np.cumsum(x) * 0.5, (RNG.random(1 << 15).astype(np.float32),)),
    # sorts: a row per work-item (short rows) and a bitonic network over a work-group (rows of 128 or more)
    "sorts": (lambda x: (np.sort(x, axis=1), np.argsort(x, axis=0, kind="stable").astype(np.int32),
                         np.median(x, axis=1), np.percentile(x, 30, axis=0)), (F32[:12, :10],)),
    "wide_sorts": (lambda x: (np.sort(x * 2, axis=-1), np.argsort(x, kind="stable")[:, :-4:-1].astype(np.int32)),
                   (np.where(RNG.random((3, 300)) < 0.05, np.nan, np.round(RNG.standard_normal((3, 300)), 1)),)),
    # rows beyond a work-group's memory on SIMT targets: sorted blocks, then merge passes of gathers
    "merged_sort": (lambda x: np.argsort(x, axis=1, kind="stable").astype(np.int32),
                    (np.round(RNG.standard_normal((2, 20000)), 2).astype(np.float32),)),
    # indices read from data (BOUND), wrapped from the end, feeding a row reduction and a table lookup
    "gather": (lambda x, i: (_softmax(x[i]), x[i.reshape(-1, 1), i % 80] * np.take_along_axis(_LUT, i % 8, axis=0)),
               (F32, np.array([3, -1, 47, 0, -48, 12, 5, 40], np.int32))),
    # constant tables (captured arrays) and index patterns (np.tri, np.arange) read inside a row kernel
    "tables_and_masks": (lambda x, i: (_softmax(np.where(np.tri(5, 8, dtype=bool), x * _LUT, -np.inf)), i * _ITABLE + 1,
                                       np.where(_BTABLE, x, np.arange(8, dtype=np.float32))),
                         (F32[:5, :8], np.arange(-8, 8, dtype=np.int32).reshape(2, 8))),
    # beyond the dense size: a SCATTER (the target copied, then ATOMIC updates); integral float32 values, so
    # sums are exact in any order
    "scatter": (lambda x, i, v: (_at(np.add, x, i, v), _at(np.maximum, x, i, v), _at(np.multiply, x, i % 7, v % 3),
                                 _at(np.subtract, x.astype(np.int32), i, v.astype(np.int32)), _set(x, i, v)),
                (np.round(F32[:, :2] * 10), RNG.integers(-48, 48, 20000).astype(np.int32),
                 np.round(RNG.standard_normal((20000, 2)) * 10).astype(np.float32))),
}


def _at(ufunc, x, i, v):
    y = x.copy()
    ufunc.at(y, i, v)
    return y


def _set(x, i, v):
    y = x.copy()
    y[i] = v
    return y


def run_with_interpreter(plan, args):
    """Execute a lowered program kernel by kernel with the NumPy interpreter of the kernel IR."""
    program = plan.executable.program
    bufs = {}
    for key, buf in program.buffers.items():
        if key.argument:
            view = flat_view(args[key.index], buf)
            bufs[key] = view.view(np.float16) if buf.dtype == np.float16 else view
        else:
            bufs[key] = np.zeros(buf.size, buf.dtype)
    for kernel, keys in zip(program.kernels, program.launches):
        interpret.run(kernel, [bufs[k] for k in keys])
    return [bufs[k].reshape(program.buffers[k].shape) for k in program.outputs]


def narrow_to_32_bits(a):
    a = np.asarray(a)
    return a.astype({"f": np.float32, "i": np.int32, "u": np.uint32}[a.dtype.kind]) if a.dtype.itemsize == 8 else a


@pytest.mark.parametrize("name", PROGRAMS)
def test_renderer_agrees_with_kernel_ir_interpreter(name, device):
    fn, args = PROGRAMS[name]
    k = tj.kernel(fn)
    tj.device(device)   # opened first: lower() on a webgpu not yet open renders WGSL only, with no program
    try:
        plan = k.lower(*args, device=device)
    except tj.DtypeError as e:
        if device == "numba":
            raise
        args = tuple(narrow_to_32_bits(a) for a in args)   # the same program at 32 bits (WGSL has no 64-bit types)
        try:
            plan = k.lower(*args, device=device)
        except tj.DtypeError:
            pytest.skip(f"{device} cannot represent a dtype of this program: {e}")
    got = k(*args, device=device)
    got = [np.asarray(g) for g in got] if isinstance(got, tuple) else [np.asarray(got)]
    reference = run_with_interpreter(plan, args)
    with np.errstate(all="ignore"):
        expected = fn(*args)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    for g, r, e in zip(got, reference, expected):
        assert g.dtype == r.dtype == np.asarray(e).dtype
        tol = dict(rtol=2e-2, atol=2e-2) if g.dtype == np.float16 else dict(rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g, r, **tol, equal_nan=True)
        np.testing.assert_allclose(r, e, **tol, equal_nan=True)


def test_kernel_ir_prints_loop_structure_of_a_row_kernel():
    plan = tj.kernel(_softmax).lower(F32)
    text = str(plan.executable.program.kernels[0])
    assert text.startswith("kernel k0_row")
    for word in ("global", "range", "acc", "update", "load", "store", "'reduce'"):
        assert word in text


def test_contiguous_views_lower_to_plain_unit_stride_indexing():
    # (x // c) * c + x % c must cancel: a reshape of a contiguous array is just the global index
    plan = tj.kernel(lambda x: x.reshape(48, 10, 8).reshape(-1) + 1).lower(F32)
    ops = [i.op for i in plan.executable.program.kernels[0].instrs]
    assert "idiv" not in ops and "mod" not in ops


def test_strided_input_is_read_in_place_not_copied():
    x = F32[::2, ::-1]
    plan = tj.kernel(lambda a: a + 1).lower(x)
    program = plan.executable.program
    assert len(program.kernels) == 1
    assert program.buffers[BufferKey("in", 0)].strides == (160, -1)  # element strides of the view itself


LAYERS = {"ir": {"codegen", "runtime", "frontend"}, "codegen": {"runtime", "frontend"}, "runtime": {"frontend"}}


ROOT_MODULES = {"errors", "version", "ir", "codegen", "runtime", "frontend"}   # modules directly in tracejit/


@pytest.mark.parametrize("layer", LAYERS)
def test_dependencies_point_one_way(layer):
    """No layer imports one above it, in any form (function-level imports too), nor the package root,
    whose __init__ imports the frontend: `from .. import asarray` runs back up the layers."""
    root = pathlib.Path(tj.__file__).parent
    for path in (root / layer).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                parts = mod.lstrip(".").split(".")
                if node.level == 2 and not node.module or node.level == 0 and node.module == "tracejit":
                    targets = [alias.name for alias in node.names]   # names of the package root
                    assert all(t in ROOT_MODULES for t in targets), \
                        f"{path.name} imports {targets} from the package root"
                else:
                    targets = [parts[1] if parts[0] == "tracejit" and len(parts) > 1 else
                               parts[0] if node.level == 2 else layer]
                assert not set(targets) & LAYERS[layer], f"{path.name} imports {mod}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    assert parts[0] != "tracejit" or len(parts) > 1 and parts[1] not in LAYERS[layer], \
                        f"{path.name} imports {alias.name}"


@pytest.mark.parametrize("m, k, n", [(64, 40, 48), (30, 17, 13), (8, 5, 16), (3, 64, 1), (64, 8, 24)])
def test_matmul_streams_rows_or_register_tiles_and_is_always_correct(m, k, n):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    f = tj.kernel(lambda x, y: x @ y)
    np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-5, atol=1e-5)
    kernel = f.lower(a, b).executable.program.kernels[0]
    ops = [i.op for i in kernel.instrs]
    if n % 16 == 0:  # i-k-j: a block of output columns accumulates in local memory
        assert ops.count("local") == 1 and "acc" not in ops
    else:            # otherwise rows x columns of scalar accumulators where the extents divide
        rows = 4 if m % 4 == 0 and m >= 8 else 1
        cols = 8 if n % 8 == 0 and n >= 16 else 1
        assert ops.count("acc") == rows * cols
    reference = run_with_interpreter(f.lower(a, b), (a, b))[0]
    np.testing.assert_allclose(f(a, b), reference, rtol=1e-5, atol=1e-5)


def test_column_sums_stream_rows_into_local_accumulators():
    x = RNG.standard_normal((50, 64)).astype(np.float32)
    f = tj.kernel(lambda a: np.sqrt(np.abs(a.sum(axis=0))))
    kernel = f.lower(x).executable.program.kernels[0]
    assert [i.op for i in kernel.instrs].count("local") == 1
    np.testing.assert_allclose(f(x), np.sqrt(np.abs(x.sum(axis=0))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(x), run_with_interpreter(f.lower(x), (x,))[0], rtol=1e-5, atol=1e-6)


def test_row_reduction_without_operand_reuse_is_not_unrolled():
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    kernel = tj.kernel(lambda a, b: (a * b).sum(axis=1)).lower(x, x).executable.program.kernels[0]
    assert sum(1 for i in kernel.instrs if i.op == KOp.ACC) == 1


def test_softmax_keeps_the_reduced_row_in_local_memory_instead_of_recomputing_exp():
    kernel = tj.kernel(_softmax).lower(F32).executable.program.kernels[0]
    ops = [i.op for i in kernel.instrs]
    assert ops.count("exp") == 1 and ops.count("local") == 1
    # layernorm's write loop needs x - mean, not the squares it reduced: nothing is kept
    kernel = tj.kernel(_layernorm).lower(F32).executable.program.kernels[0]
    assert "local" not in [i.op for i in kernel.instrs]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_kept_rows_give_numpy_results_for_any_softmax_axis(axis):
    x = RNG.standard_normal((6, 10, 12)).astype(np.float32)

    def softmax(a):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    f = tj.kernel(softmax)
    np.testing.assert_allclose(f(x), softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run_with_interpreter(f.lower(x), (x,))[0], softmax(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype, tile", [("float32", (8, 4)), ("int8", (32, 8)), ("float64", (8, 4))])
def test_transposed_read_is_tiled_at_sizes_that_allow_it_and_matches_numpy(dtype, tile):
    """numba's tile follows the element size of the array read across (NumbaDevice.layout)."""
    x = (RNG.standard_normal((96, 64)) * 50).astype(dtype)
    y = (RNG.standard_normal((64, 96)) * 50).astype(dtype)
    f = tj.kernel(lambda a, b: a.T + b)
    np.testing.assert_array_equal(f(x, y), x.T + y)
    kernel = f.lower(x, y, device="numba").executable.program.kernels[0]
    loops = [i.arg for i in kernel.instrs if i.op == KOp.RANGE]
    assert loops == [(tile[0], "loop"), (tile[1], "loop")]   # one tile per global index
    np.testing.assert_array_equal(run_with_interpreter(f.lower(x, y, device="numba"), (x, y))[0], x.T + y)
