"""tj.Array computes as a NumPy array does, on its device (frontend/eager.py): operators, indexing and assignment,
methods, NumPy's functions through __array_function__ and __array_ufunc__, and the array API namespace. Each result
is compared with NumPy's on the same data, and must stay on the array's device."""
import operator
import warnings

import numpy as np
import pytest

import tracejit as tj
import tracejit.array_api as xp
from reference import assert_close

# make test's budget: emulated metal runs the SIMT lowering emulated cuda runs (its MSL is checked on numba's run)
pytestmark = pytest.mark.slow_emulated("metal")


def on(device, x):
    return tj.asarray(x, device=device)


def check(r, want, device, rtol=1e-6):
    assert type(r) is tj.Array and r.device.name == tj.device(device).name, f"{type(r)} {getattr(r, 'device', '')}"
    got = r.numpy()
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    assert_close(got, want, rtol=rtol)


BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
          operator.lt, operator.eq, operator.ge, np.arctan2]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary_operators_with_arrays_numbers_and_numpy_arrays(device, rng, op):
    x = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    y = rng.uniform(0.5, 2, (4,)).astype(np.float32)
    a = on(device, x)
    check(op(a, on(device, y)), op(x, y), device, rtol=1e-5)
    check(op(a, 2.0), op(x, 2.0), device, rtol=1e-5)
    check(op(3, a), op(3, x), device, rtol=1e-5)
    check(op(x, a), op(x, x), device, rtol=1e-5)  # NumPy's array on the left defers to tj.Array


def test_unary_operators_and_bitwise_on_integers(device, rng):
    i = rng.integers(-50, 50, (5,)).astype(np.int32)
    a = on(device, i)
    for op in (operator.neg, operator.pos, abs, operator.invert):
        check(op(a), op(i), device)
    for op in (operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift):
        check(op(a, on(device, np.abs(i) % 7)), op(i, np.abs(i) % 7), device)


def test_in_place_operators_write_into_the_array(device, rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    a = on(device, x.copy())  # (on numba, tj.asarray shares the NumPy array's memory, as np.asarray)
    before = a
    a += 1
    a *= on(device, x)
    assert a is before
    check(a, (x + 1) * x, device, rtol=1e-5)


def test_matmul_and_transposes(device, rng):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    a, b = on(device, x), on(device, y)
    check(a @ b, x @ y, device, rtol=1e-4)
    check(a.T, x.T, device)
    check(on(device, np.stack([x, x])).mT, np.stack([x, x]).mT, device)


def test_indexing_slices_integers_masks_and_index_arrays(device, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    a = on(device, x)
    for key in ((1,), (slice(1, None, 2),), (slice(None), -1), (Ellipsis, 2), (None, 0), (slice(4, 0, -1), slice(1, 3))):
        check(a[key], x[key], device)
    check(a[x > 0], x[x > 0], device)
    check(a[on(device, x > 0)], x[x > 0], device)
    idx = np.array([4, 0, 2], np.int32)
    check(a[idx], x[idx], device)
    check(a[on(device, idx), 1:3], x[idx, 1:3], device)


def test_assignment_writes_in_place(device, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    a = on(device, x.copy())
    want = x.copy()
    a[0] = -1.0
    want[0] = -1.0
    a[1:3, ::2] = on(device, np.ones((2, 3), np.float32)) * 5
    want[1:3, ::2] = 5
    a[a > 1.0] = 0.0
    want[want > 1.0] = 0.0
    check(a, want, device)


def test_numbers_from_one_element_arrays(device):
    a = on(device, np.array([[3.5]], np.float32))
    assert float(a) == 3.5 and int(a) == 3 and bool(a) and a.item() == 3.5
    assert list(range(10))[on(device, np.array(4, np.int32))] == 4
    with pytest.raises(TypeError, match="one element"):
        bool(on(device, np.ones(3, np.float32)))
    assert [v.item() for v in on(device, np.arange(3, dtype=np.int32))] == [0, 1, 2]


METHODS = [("sum", (), {}), ("sum", (), {"axis": 1}), ("mean", (), {"axis": 0, "keepdims": True}),
           ("max", (), {}), ("min", (), {"axis": -1}), ("argmax", (), {"axis": 1}), ("std", (), {}),
           ("var", (), {"ddof": 1}), ("prod", (), {}), ("cumsum", (), {"axis": 1}), ("any", (), {}),
           ("reshape", ((4, 3),), {}), ("transpose", (), {}), ("astype", (np.int32,), {}), ("copy", (), {}),
           ("clip", (-0.5, 0.5), {}), ("ravel", (), {}), ("round", (2,), {}), ("swapaxes", (0, 1), {}),
           ("squeeze", (), {}), ("argsort", (), {"axis": -1})]


@pytest.mark.parametrize("name,args,kwargs", METHODS, ids=[f"{m[0]}{i}" for i, m in enumerate(METHODS)])
def test_methods_as_numpys(device, rng, name, args, kwargs):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    want = getattr(x, name)(*args, **kwargs)
    if device == "webgpu" and want.dtype == np.int64:  # as in any kernel: WGSL has no 64-bit integers
        with pytest.raises(tj.DtypeError, match=rf"test_array_object.py:\d+: {name} of a tj.Array: .*int64"):
            getattr(on(device, x), name)(*args, **kwargs)
        return
    check(getattr(on(device, x), name)(*args, **kwargs), want, device, rtol=1e-5)


FUNCTIONS = [
    (np.sum, {"axis": 0}), (np.exp, {}), (np.where, None), (np.concatenate, None), (np.stack, None),
    (np.sort, {"axis": -1}), (np.cumsum, {}), (np.linalg.norm, {"axis": 1}), (np.mean, {}), (np.tanh, {}),
    (np.einsum, None), (np.clip, None), (np.pad, None), (np.roll, {"shift": 2}),
]


@pytest.mark.parametrize("func,kwargs", FUNCTIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_functions_compute_on_the_device(device, rng, func, kwargs):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    a = on(device, x)
    calls = {
        np.where: lambda f, v: f(v > 0, v, 0.0), np.concatenate: lambda f, v: f([v, v * 2], axis=1),
        np.stack: lambda f, v: f([v, v]), np.einsum: lambda f, v: f("ij,kj->ik", v, v),
        np.clip: lambda f, v: f(v, -1, 1), np.pad: lambda f, v: f(v, 1, mode="edge"),
    }
    call = calls.get(func) or (lambda f, v: f(v, **kwargs))
    check(call(func, a), call(func, x), device, rtol=1e-5)


def test_functions_of_shape_and_dtype_answer_without_a_kernel(device):
    a = on(device, np.ones((2, 3), np.float32))
    assert np.shape(a) == (2, 3) and np.ndim(a) == 2 and np.size(a) == 6
    assert np.result_type(a, np.float64) == np.float64


def test_ufunc_methods_on_arrays(device, rng):
    x = rng.integers(0, 9, (3, 4)).astype(np.int32)
    a = on(device, x)
    check(np.add.reduce(a, axis=1, dtype=np.int32), np.add.reduce(x, axis=1, dtype=np.int32), device)
    check(np.multiply.outer(a[0], a[1]), np.multiply.outer(x[0], x[1]), device)
    check(np.maximum.accumulate(a, axis=1), np.maximum.accumulate(x, axis=1), device)
    acc = on(device, np.zeros(5, np.int32))
    np.add.at(acc, on(device, np.array([0, 1, 1, 4], np.int32)), 1)
    check(acc, np.array([1, 2, 0, 0, 1], np.int32), device)


def test_out_arguments_are_written(device, rng):
    x = rng.standard_normal(6).astype(np.float32)
    out = on(device, np.zeros(6, np.float32))
    r = np.multiply(on(device, x), 3, out=out)
    assert r is out
    check(out, x * 3, device)


def test_nothing_is_copied_to_the_host_but_by_asking(device, monkeypatch, rng):
    """Operators, methods and NumPy functions never read the array back (only np.asarray and .numpy() do)."""
    a = on(device, rng.standard_normal((3, 3)).astype(np.float32))
    if device == "numba":
        pytest.skip("the numba device's arrays are host memory")

    def refused(self):
        raise AssertionError("a host copy")

    monkeypatch.setattr(tj.Array, "numpy", refused)
    r = np.exp(a) + a.sum(axis=0) * 2 - np.concatenate([a, a])[:3]
    r[0] = 1.0
    assert type(r) is tj.Array


def test_array_api_namespace(device, rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    a = on(device, x)
    ns = a.__array_namespace__()
    assert ns is xp and xp.__array_api_version__ == "2023.12"
    check(xp.permute_dims(a, (1, 0)), x.T, device)
    check(xp.concat([a, a], axis=0), np.concatenate([x, x]), device)
    check(xp.vecdot(a, a), np.vecdot(x, x), device, rtol=1e-5)
    check(xp.linalg.matrix_norm(a), np.linalg.matrix_norm(x), device, rtol=1e-5)
    check(xp.astype(a, xp.int32), x.astype(np.int32), device)
    z = xp.zeros((2, 2), device=a.device)
    assert z.device is a.device and z.dtype == xp.__array_namespace_info__().default_dtypes(device=a.device)["real floating"]
    check(xp.asarray([1.0, 2.0], dtype=xp.float32, device=a.device), np.array([1.0, 2.0], np.float32), device)
    check(xp.arange(5, device=a.device, dtype=xp.int32), np.arange(5, dtype=np.int32), device)
    assert xp.unique_values(on(device, np.array([3, 1, 3], np.int32))).numpy().tolist() == [1, 3]
    moved = a.to_device("numba")
    assert moved.device.name == "numba" and np.array_equal(moved.numpy(), x)


def test_what_tracejit_cannot_compile_falls_back_with_a_warning(monkeypatch):
    """np.polyfit is not compiled: it runs with NumPy on the host, said by a FallbackWarning, as in any kernel,
    and its result is on the array's device; with fallback off, an error at the user's line."""
    a = on("numba", np.array([1.0, 2.0, 2.0]))
    with pytest.raises(tj.UnsupportedError, match=r"test_array_object.py:\d+: polyfit of a tj.Array: np.polyfit"):
        np.polyfit(a, a * 2 + 1, 1)
    monkeypatch.setenv("TRACEJIT_FALLBACK", "1")
    with pytest.warns(tj.FallbackWarning, match="np.polyfit is not compiled"):
        r = np.polyfit(a, a * 2 + 1, 1)
    assert type(r) is tj.Array
    assert_close(r.numpy(), np.polyfit([1.0, 2.0, 2.0], [3.0, 5.0, 5.0], 1))
