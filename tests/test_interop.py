"""Other libraries' arrays in, the same arrays out (frontend/interop.py): PyTorch tensors and JAX arrays on every
device, compared with what the same NumPy code gives; DLPack export of tj.Arrays on every device."""
import numpy as np
import pytest

import tracejit as tj
from reference import assert_close

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = jax.numpy


def model(x, w, b):
    h = np.tanh(x @ w + b)
    return h / np.sqrt((h * h).sum(axis=-1, keepdims=True) + 1e-6)


def test_torch_tensors_in_torch_tensors_out_with_numpys_values(device, rng):
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (5, 4), (4,)))
    f = tj.kernel(model)
    r = f(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), device=device)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.float32 and r.device.type == "cpu"
    assert_close(r.numpy(), model(x, w, b), rtol=1e-5)


def test_jax_arrays_in_jax_arrays_out(device, rng):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    f = tj.kernel(lambda a: (np.exp(a - a.max(axis=1, keepdims=True)), a.sum()))
    e, s = f(jnp.asarray(x), device=device)
    assert isinstance(e, jax.Array) and isinstance(s, jax.Array) and e.dtype == jnp.float32
    assert_close(np.asarray(e), np.exp(x - x.max(axis=1, keepdims=True)))
    assert_close(np.asarray(s), x.sum(), rtol=1e-5)


def test_an_assignment_into_a_cpu_tensor_changes_the_callers_tensor(device):
    @tj.kernel
    def step(u, dt):
        u[1:-1] = u[1:-1] + dt * (u[2:] - 2 * u[1:-1] + u[:-2])

    t = torch.linspace(0, 1, 9) ** 2
    want = t.numpy().copy()
    want[1:-1] = want[1:-1] + 0.1 * (want[2:] - 2 * want[1:-1] + want[:-2])
    assert step(t, 0.1, device=device) is None
    assert_close(t.numpy(), want)


def test_out_is_the_callers_tensor():
    t = torch.ones(3)
    out = torch.zeros(3)
    assert tj.kernel(lambda a: a * 2)(t, out=out) is out
    assert out.tolist() == [2.0, 2.0, 2.0]


def test_numpy_arrays_and_numbers_beside_tensors_give_tensors(rng):
    x = rng.standard_normal(4).astype(np.float32)
    r = tj.kernel(lambda a, b, c: a * b + c)(torch.from_numpy(x), x, 2.0)
    assert isinstance(r, torch.Tensor)
    assert_close(r.numpy(), x * x + 2.0)


def test_torch_dtypes_and_layouts_follow_numpy():
    f = tj.kernel(lambda a: a + a)
    for dtype in (torch.int8, torch.int32, torch.int64, torch.float16, torch.float64, torch.bool, torch.uint8):
        t = torch.arange(6).reshape(2, 3).to(dtype)
        r = f(t)
        want = t.numpy() + t.numpy()
        assert r.dtype == t.dtype and r.numpy().dtype == want.dtype
        assert_close(r.numpy(), want)
    t = torch.arange(12.0).reshape(3, 4).t()  # a strided (transposed) view: read in place
    assert_close(f(t).numpy(), 2 * t.numpy())
    c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert_close(tj.kernel(lambda a: a * a.conj())(c).numpy(), (c * c.conj()).numpy())
    assert_close(f(c.conj()).numpy(), 2 * c.conj().resolve_conj().numpy())  # a lazily conjugated view: its values


def test_tensors_that_need_gradients_are_refused_with_what_to_do():
    f = tj.kernel(lambda a: a * 2)
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(tj.ArgumentError, match=r"requires grad.*detach"):
        f(w)
    with torch.no_grad():  # no graph is being recorded: nothing is lost
        assert f(w).tolist() == [2.0, 2.0, 2.0]
    assert f(w.detach()).tolist() == [2.0, 2.0, 2.0]


def test_two_libraries_in_one_call_are_refused():
    with pytest.raises(tj.ArgumentError, match="torch and JAX"):
        tj.kernel(lambda a, b: a + b)(torch.ones(2), jnp.ones(2))


def test_jax_arrays_are_immutable_in_a_kernel_too():
    @tj.kernel
    def scale(a):
        a *= 2

    with pytest.raises(tj.AssignmentError, match="not writeable"):
        scale(jnp.ones(3))


def test_jax_tracers_are_refused_inside_jit():
    f = tj.kernel(lambda a: a * 2)
    with pytest.raises(tj.ArgumentError, match="JAX tracer"):
        jax.jit(lambda a: f(a))(jnp.ones(2))


def test_dlpack_exports_every_devices_arrays(device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    a = tj.asarray(x, device=device)
    if device == "cuda":  # GPU memory, which CPU builds of these libraries cannot import (tests/test_cuda.py: on a GPU)
        assert a.__dlpack_device__()[0] == 2
        return
    assert_close(np.from_dlpack(a), x)
    assert_close(torch.from_dlpack(a).numpy(), x)
    assert_close(np.asarray(jnp.from_dlpack(a)), x)
    if device in ("opencl", "webgpu", "metal"):  # memory no other library addresses: a copy on the host
        assert a.__dlpack_device__() == (1, 0)
        with pytest.raises(BufferError, match="copy=False"):
            a.__dlpack__(copy=False)
    c = tj.kernel(lambda v: v * 1j)(x, device=device)
    assert_close(np.from_dlpack(c), x * 1j)


def test_numba_results_share_memory_with_the_tensor_they_become():
    r = tj.kernel(lambda a: a + 1)(torch.zeros(4), device="numba")
    view = r.numpy()
    view[0] = 7.0
    assert r[0].item() == 7.0


def test_bfloat16_tensors_in_and_out_as_ml_dtypes_rounds(device, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = rng.standard_normal(33).astype(ml_dtypes.bfloat16)
    t = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    r = tj.kernel(lambda a, b: a * b + 1)(t, t, device=device)
    assert r.dtype == torch.bfloat16
    want = x * x + ml_dtypes.bfloat16(1)   # NumPy with ml_dtypes, op by op
    assert np.array_equal(r.view(torch.int16).numpy(), want.view(np.int16))
    assert torch.equal(r, t * t + 1)        # torch rounds each op to bfloat16 too


def test_dlpack_carries_bfloat16_and_refuses_float8_with_the_reason(device):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if device == "cuda":
        pytest.skip("GPU memory: tests/test_cuda.py on a GPU")
    a = tj.asarray(np.arange(4).astype(ml_dtypes.bfloat16), device=device)
    assert torch.from_dlpack(a).tolist() == [0.0, 1.0, 2.0, 3.0]
    b = tj.asarray(np.ones(2, ml_dtypes.float8_e4m3fn), device=device)
    with pytest.raises(BufferError, match="no DLPack type code"):
        b.__dlpack__()
