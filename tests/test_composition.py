"""Kernels compose like Python functions: a kernel calling a kernel, kernels as methods (self's arrays are
arguments, its other attributes constants), staticmethods and classmethods, functools.partial and callable
objects, procedures that return None, pickling into worker processes, and redefinition in a notebook."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


def _x(n=6, dtype=np.float32):
    return np.arange(n, dtype=dtype) + 1


def test_kernel_calling_a_kernel_is_inlined(device):
    @tj.kernel
    def inner(x, s=2.0):
        return x * s

    @tj.kernel(static=("k",))
    def power(x, k):
        return x ** k

    @tj.kernel
    def outer(x):
        return inner(x) * 2 + inner(x, s=3.0) - power(x, 2)

    x = _x()
    assert_close(run_kernel(outer, x, device=device), (x * 2) * 2 + x * 3 - x ** 2)
    assert outer.cache_info()["traces"] == 1
    assert inner.cache_info()["traces"] == 0   # never compiled on its own: part of outer's trace


def test_out_of_an_inner_kernel_call_is_refused():
    @tj.kernel
    def inner(x):
        return x + 1

    @tj.kernel
    def outer(x, y):
        inner(x, out=y)
        return y
    with pytest.raises(tj.UnsupportedError, match="inside another kernel"):
        outer(_x(), _x())


class Dense:
    def __init__(self, w, b, activation="relu", scale=1.0):
        self.w, self.b, self.activation, self.scale = w, b, activation, scale

    @tj.kernel
    def __call__(self, x):
        y = x @ self.w + self.b
        return np.maximum(y, 0) * self.scale if self.activation == "relu" else y * self.scale

    @tj.kernel
    def shift(self, v):
        self.b[...] += v            # an array attribute updated in place: the caller's array changes

    @tj.kernel
    def rebind(self, v):
        self.b = self.b + v
        return v

    @tj.kernel
    @staticmethod
    def twice(x):
        return x * 2

    @tj.kernel
    @classmethod
    def tagged(cls, x):
        return x + len(cls.__name__)


def _dense_reference(layer, x):
    y = x @ layer.w + layer.b
    return (np.maximum(y, 0) if layer.activation == "relu" else y) * np.float32(layer.scale)


def test_method_kernel_binds_self(device, rng):
    w = rng.standard_normal((6, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    relu = Dense(w, b)
    assert_close(run_kernel(relu, x, device=device), _dense_reference(relu, x), rtol=1e-5, atol=1e-5)
    linear = Dense(w, b, activation="none", scale=0.5)   # other constants: another trace, not the cached one
    assert_close(run_kernel(linear, x, device=device), _dense_reference(linear, x), rtol=1e-5, atol=1e-5)
    relu.scale = 2.0                                      # a constant changed on the same object
    assert_close(run_kernel(relu, x, device=device), _dense_reference(relu, x), rtol=1e-5, atol=1e-5)
    relu.w = rng.standard_normal((6, 5)).astype(np.float32)   # an array attribute of another shape
    relu.b = rng.standard_normal(5).astype(np.float32)
    assert_close(run_kernel(relu, x, device=device), _dense_reference(relu, x), rtol=1e-5, atol=1e-5)
    relu.w[:] = 0                                        # new values in the same arrays: arguments, not constants
    assert_close(run_kernel(relu, x, device=device), _dense_reference(relu, x), rtol=1e-5, atol=1e-5)


def test_method_procedure_updates_self_in_place(device):
    b = np.zeros(3, np.float32)
    layer = Dense(np.ones((2, 3), np.float32), b)
    assert run_kernel(layer.shift, 1.5, device=device) is None
    assert run_kernel(layer.shift, 1.0, device=device) is None
    np.testing.assert_array_equal(b, np.full(3, 2.5, np.float32))


def test_rebinding_an_attribute_is_refused():
    layer = Dense(np.ones((2, 3), np.float32), np.zeros(3, np.float32))
    with pytest.raises(tj.UnsupportedError, match=r"sets self\.b"):
        layer.rebind(1.0)


def test_staticmethod_and_classmethod_kernels(device):
    x = _x()
    assert_close(run_kernel(Dense.twice, x, device=device), x * 2)
    assert_close(run_kernel(Dense(None, None).twice, x, device=device), x * 2)
    assert_close(run_kernel(Dense.tagged, x, device=device), x + 5)
    assert_close(run_kernel(Dense(None, None).tagged, x, device=device), x + 5)


class MLP:
    def __init__(self, rng, sizes):
        self.layers = [(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
                        rng.standard_normal(b).astype(np.float32)) for a, b in zip(sizes, sizes[1:])]
        self.config = {"final": "softmax"}

    @tj.kernel
    def predict(self, x):
        for w, b in self.layers[:-1]:
            x = np.tanh(x @ w + b)
        w, b = self.layers[-1]
        z = x @ w + b
        if self.config["final"] == "softmax":
            z = np.exp(z - z.max(axis=-1, keepdims=True))
            z = z / z.sum(axis=-1, keepdims=True)
        return z


def test_method_with_arrays_inside_lists_and_dicts(device, rng):
    model = MLP(rng, [8, 16, 4])
    x = rng.standard_normal((5, 8)).astype(np.float32)
    assert_close(run_kernel(model.predict, x, device=device), MLP.predict.fn(model, x), rtol=1e-5, atol=1e-6)
    model.config["final"] = "none"   # a dict of settings changed in place: keyed by its contents
    assert_close(run_kernel(model.predict, x, device=device), MLP.predict.fn(model, x), rtol=1e-5, atol=1e-5)


def test_partial_and_callable_object(device):
    def scaled(x, s, *, bias=0.0):
        return x * s + bias

    k = tj.kernel(functools.partial(scaled, s=3.0))
    x = _x()
    assert_close(run_kernel(k, x, device=device), x * 3)
    assert_close(run_kernel(k, x, bias=1.0, device=device), x * 3 + 1)

    class Polynomial:
        def __init__(self, coefficients):
            self.c = coefficients

        def __call__(self, x):
            return self.c[0] + self.c[1] * x + self.c[2] * x * x

    c = np.array([1, -2, 0.5], np.float32)
    assert_close(run_kernel(tj.kernel(Polynomial(c)), x, device=device), c[0] + c[1] * x + c[2] * x * x)


def test_procedure_returns_none(device):
    def step(u, v, dt):
        v[1:-1] += dt * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[1:-1] += dt * v[1:-1]

    k = tj.kernel(step)
    u0 = np.sin(np.linspace(0, 3, 16)).astype(np.float32)
    u, v = u0.copy(), np.zeros_like(u0)
    ru, rv = u0.copy(), np.zeros_like(u0)
    for _ in range(3):
        assert run_kernel(k, u, v, 0.1, device=device) is None
        step(ru, rv, 0.1)
    assert_close(u, ru, rtol=1e-5, atol=1e-6)
    assert_close(v, rv, rtol=1e-5, atol=1e-6)

    @tj.kernel
    def nothing(x):
        x + 1
    assert nothing(u, device=device) is None


def test_array_pickles_with_its_data(device):
    import pickle
    a = tj.asarray(_x(), device=device)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, tj.Array) and b.device.name == a.device.name
    np.testing.assert_array_equal(np.asarray(b), _x())


_WORKERS = textwrap.dedent("""
    import concurrent.futures, multiprocessing as mp, sys
    import numpy as np, tracejit as tj

    @tj.kernel
    def k(x, *, s=2.0):
        return x * s + 1

    class Scale:
        def __init__(self, w):
            self.w = w
        @tj.kernel
        def apply(self, x):
            return x * self.w

    def call(x):
        return k(x, s=3.0), k.cache_info()

    if __name__ == "__main__":
        xs = [np.arange(4, dtype=np.float32) + i for i in range(3)]
        k(xs[0], s=3.0)                 # compiled here: the workers find it in the disk cache
        for method in sys.argv[1:]:
            context = mp.get_context(method)
            with context.Pool(2) as pool:
                assert all(np.array_equal(r, x * 2 + 1) for r, x in zip(pool.map(k, xs), xs)), method
                results = pool.map(call, xs)
                assert all(np.array_equal(r, x * 3 + 1) for (r, _), x in zip(results, xs)), method
                assert all(info["compiles"] == 0 and info["disk_hits"] >= 1 for _, info in results), results
                s = Scale(np.float32(2) * np.ones(4, np.float32))
                assert np.array_equal(pool.apply(Scale.apply, (s, xs[1])), xs[1] * 2), method
                arrays = pool.map(tj.asarray, xs)
                assert all(np.array_equal(np.asarray(a), x) for a, x in zip(arrays, xs)), method
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as ex:
                assert all(np.array_equal(r, x * 2 + 1) for r, x in zip(ex.map(k, xs), xs)), method
        print("ok")
""")


@pytest.mark.parametrize("methods", [("spawn",), ("fork", "forkserver")])
def test_kernels_of_the_main_script_run_in_worker_processes(tmp_path, methods):
    script = tmp_path / "main_script.py"
    script.write_text(_WORKERS)
    env = dict(os.environ, TRACEJIT_DEVICE="numba")
    done = subprocess.run([sys.executable, str(script), *methods], capture_output=True, text=True, timeout=600,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_redefining_a_kernel_in_a_notebook_cell_uses_the_new_body(device):
    namespace = {"tj": tj, "np": np, "X": _x(), "DEVICE": device}
    for body, factor in (("x * 2", 2), ("x * 3", 3), ("x * 2", 2)):
        cell = f"@tj.kernel\ndef k(x):\n    return {body}\nresult = k(X, device=DEVICE)\n"
        exec(compile(cell, "<ipython-input-7-0123abcd>", "exec"), namespace)
        np.testing.assert_array_equal(np.asarray(namespace["result"]), _x() * factor)


def test_a_random_generator_attribute_is_refused_not_baked_in():
    class Noisy:
        def __init__(self):
            self.rng = np.random.default_rng(0)

        @tj.kernel
        def noise(self, x):
            return x + self.rng.random(x.shape)
    with pytest.raises(tj.ArgumentError, match="random generator"):
        Noisy().noise(_x())
