"""Programs from Numba's examples and documentation (numba/numba-examples, numba docs): the NumPy
versions that Numba's examples start from."""
from __future__ import annotations

import numpy as np

from . import program

# ---------------------------------------------------------------------------------------------
# numba-examples, examples/finance/blackscholes (also numba/tests/test_blackscholes.py: cnd_array)

RISKFREE = 0.02
VOLATILITY = 0.30

A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


def cnd(d):
    K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    ret_val = (RSQRT2PI * np.exp(-0.5 * d * d) *
               (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    return np.where(d > 0, 1.0 - ret_val, ret_val)


def black_scholes(stockPrice, optionStrike, optionYears, Riskfree, Volatility):
    S = stockPrice
    X = optionStrike
    T = optionYears
    R = Riskfree
    V = Volatility
    sqrtT = np.sqrt(T)
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd(d1)
    cndd2 = cnd(d2)

    expRT = np.exp(- R * T)

    callResult = (S * cndd1 - X * expRT * cndd2)
    putResult = (X * expRT * (1.0 - cndd2) - S * (1.0 - cndd1))
    return callResult, putResult


def _black_scholes_inputs(rng, dtype, n=1000):
    return (rng.uniform(5.0, 30.0, n).astype(dtype), rng.uniform(1.0, 100.0, n).astype(dtype),
            rng.uniform(0.25, 10.0, n).astype(dtype), RISKFREE, VOLATILITY)


# ---------------------------------------------------------------------------------------------
# numba-examples, examples/physics/laplace2d: one Jacobi relaxation step of the NumPy version


def jacobi_relax_core(A):
    Anew = A.copy()
    Anew[1:-1, 1:-1] = 0.25 * (A[1:-1, 2:] + A[1:-1, :-2] + A[2:, 1:-1] + A[:-2, 1:-1])
    error = np.abs(Anew - A).max()
    return Anew, error


def _laplace_inputs(rng, dtype, n=32):
    A = np.zeros((n, n), dtype=dtype)
    A[0, :] = 1.0  # the example's boundary condition: one hot edge
    A[1:-1, 1:-1] = rng.random((n - 2, n - 2))
    return (A,)


# ---------------------------------------------------------------------------------------------
# Numba documentation, "A ~5 minute guide to Numba": go_fast


def go_fast(a):  # Function is compiled and runs in machine code
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


# ---------------------------------------------------------------------------------------------
# the relative difference ufunc of Numba's @vectorize tutorials, and counting zero crossings with the
# np.diff(np.sign(x)) idiom (as in numba-examples' waveforms example; paraphrased, not verbatim)


def rel_diff(x, y):
    return 2 * (x - y) / (x + y)


def zero_crossings(signal):
    return np.sum(np.abs(np.diff(np.sign(signal)))) // 2


# numba-examples, examples/density_estimation/kernel: Gaussian kernel density estimate, one loop over
# the evaluation points (paraphrased from the example's NumPy version)


def kernel(x):
    return np.exp(-x ** 2 / 2) / np.sqrt(2 * np.pi)


def kde(eval_points, samples, bandwidths):
    result = np.zeros_like(eval_points)
    for i, eval_x in enumerate(eval_points):
        result[i] = np.sum(kernel((eval_x - samples) / bandwidths) / bandwidths) / len(samples)
    return result


def gaussian_kde_broadcast(eval_points, samples, bandwidths):
    # the same estimate written with broadcasting, as users port the loop
    z = (eval_points[:, None] - samples[None, :]) / bandwidths
    return np.mean(np.exp(-z ** 2 / 2) / np.sqrt(2 * np.pi) / bandwidths, axis=1)


# numba-examples, examples/finance/monte_carlo_pricer (step of the NumPy version)


def step_numpy(dt, prices, c0, c1, noises):
    return prices * np.exp(c0 * dt + c1 * noises)


F64 = ("float64",)
BOTH = ("float64", "float32")
PROGRAMS = [
    program(black_scholes, _black_scholes_inputs, BOTH),
    program(jacobi_relax_core, _laplace_inputs, BOTH),
    program(go_fast, lambda rng, dt: (np.arange(100).reshape(10, 10).astype(dt),), ("int64", "float32")),
    program(rel_diff, lambda rng, dt: (rng.uniform(1, 2, 500).astype(dt), rng.uniform(1, 2, 500).astype(dt)),
            BOTH),
    program(zero_crossings, lambda rng, dt: (np.sin(np.linspace(0, 40, 1000)).astype(dt),), BOTH),
    program(kde, lambda rng, dt: (np.linspace(-3, 3, 20).astype(dt), rng.standard_normal(200).astype(dt),
                                  np.full(200, 0.3, dtype=dt)), BOTH),
    program(gaussian_kde_broadcast, lambda rng, dt: (np.linspace(-3, 3, 20).astype(dt),
                                                     rng.standard_normal(200).astype(dt), 0.3), BOTH),
    program(step_numpy, lambda rng, dt: (1 / 252, rng.uniform(10, 20, 1000).astype(dt), 0.01, 0.2,
                                         rng.standard_normal(1000).astype(dt)), BOTH),
]
