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


def ecdf(data):  # the empirical CDF as usually written (Think Stats; seaborn's ecdfplot computes the same)
    x = np.sort(data)
    y = np.arange(1, len(x) + 1) / len(x)
    return x, y


def is_outlier(points, thresh=3.5):  # Stack Overflow "Pythonic way of detecting outliers in one dimensional
    # observation data" (Joe Kington): the modified z-score of Iglewicz and Hoaglin
    if len(points.shape) == 1:
        points = points[:, None]
    median = np.median(points, axis=0)
    diff = np.sum((points - median)**2, axis=-1)
    diff = np.sqrt(diff)
    med_abs_deviation = np.median(diff)

    modified_z_score = 0.6745 * diff / med_abs_deviation

    return modified_z_score > thresh


def top_k_logits(logits, k):  # GPT-2's sample.py, with np.sort standing in for tf.nn.top_k
    values = np.sort(logits, axis=-1)[:, ::-1][:, :k]
    min_values = values[:, -1, np.newaxis]
    return np.where(logits < min_values, np.ones_like(logits) * -1e10, logits)


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
    program(ecdf, lambda rng, dt: (rng.standard_normal(500).astype(dt),), BOTH),
    program(is_outlier, lambda rng, dt: ((rng.standard_normal((200, 2)) * [1, 3]).astype(dt),), BOTH),
    program(top_k_logits, lambda rng, dt: (rng.standard_normal((4, 50)).astype(dt),), BOTH, static={"k": 5}),
]
