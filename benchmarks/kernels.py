"""The benchmarks' tracejit kernels, plain NumPy code exactly as a user writes it: bench.py (CPU) and gpu.py
(cuda) time the same functions."""
import numpy as np

import tracejit as tj

@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


@tj.kernel
def axpbz(x, z):
    return 2.0 * x + 3.0 * z + 1


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


@tj.kernel
def rmsnorm(x):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)


@tj.kernel
def total(x):
    return x.sum()


@tj.kernel
def transpose_add(x, y):
    return x.T + y


@tj.kernel
def matmul(a, b):
    return a @ b


@tj.kernel
def linear_gelu(x, w, b):   # a transformer's FFN up-projection: x @ w + b, then GELU (tanh form)
    h = x @ w + b
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


def linear_gelu_numpy(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))


@tj.kernel
def scale_shift(x):
    return x * 2 + 1
