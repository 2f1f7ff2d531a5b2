"""Programs built on running totals and on order: cumulative sums and products, running maxima, and
(with sorting) medians, percentiles and top-k. Each says where it comes from."""
from __future__ import annotations

import numpy as np

from . import program


def max_drawdown(returns):  # the usual drawdown of a portfolio (QuantStart, "Python for Finance")
    wealth = np.cumprod(1 + returns, axis=0)
    peak = np.maximum.accumulate(wealth, axis=0)
    drawdown = (wealth - peak) / peak
    return drawdown.min(axis=0)


def random_choice_prob_index(a, r, axis=1):  # Stack Overflow "Vectorizing numpy.random.choice for given 2D array of
    # probabilities along an axis" (Divakar), with the uniform draws r passed in
    return (a.cumsum(axis=axis) > r).argmax(axis=axis)


def cumulative_trapezoid(y, x):  # scipy.integrate.cumulative_trapezoid's NumPy body (axis=-1, np.diff written out)
    d = x[1:] - x[:-1]
    return np.cumsum(d * (y[1:] + y[:-1]) / 2.0, axis=-1)


def _returns(rng, dt):
    return ((rng.standard_normal((250, 4)) * 0.01).astype(dt),)


def _probabilities(rng, dt):
    p = rng.random((40, 10))
    return (p / p.sum(axis=1, keepdims=True)).astype(dt), rng.random((40, 1)).astype(dt)


BOTH = ("float64", "float32")
PROGRAMS = [
    program(max_drawdown, _returns, BOTH),
    program(random_choice_prob_index, _probabilities, BOTH),
    program(cumulative_trapezoid, lambda rng, dt: (np.sin(np.linspace(0, 3, 101)).astype(dt),
                                                   np.sort(rng.uniform(0, 3, 101)).astype(dt)), BOTH),
]
