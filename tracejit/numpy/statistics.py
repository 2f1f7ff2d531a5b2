"""np.cov and np.corrcoef on traced tensors: NumPy's algorithm (centre, X @ X.T / (N - ddof)) in its dtypes."""

from __future__ import annotations

import numpy as np

from tracejit.errors import ShapeError, UnsupportedError
from tracejit.ir import build
from tracejit.numpy import functions as F
from tracejit.numpy import linalg
from tracejit.numpy import reductions as R
from tracejit.numpy.tensor import Tensor, as_node


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None) -> Tensor:
    if fweights is not None or aweights is not None:
        raise UnsupportedError(
            "np.cov(fweights=..., aweights=...) is not supported by tracejit yet; compute the "
            "weighted moments with np.average(..., weights=...)"
        )
    x = _variables(m, rowvar)
    out_dt = np.result_type(x.dtype, np.float64) if dtype is None else np.dtype(dtype)
    if y is not None:
        y = _variables(y, rowvar)
        out_dt = np.result_type(out_dt, y.dtype) if dtype is None else out_dt
        x = _stack_rows(x.astype(out_dt), y.astype(out_dt))
    x = x.astype(out_dt)
    if x.shape[0] == 0:
        raise UnsupportedError("np.cov of an empty array is not supported by tracejit")
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    n = x.shape[1]
    fact = n - ddof  # NumPy warns and divides by 0 when fact <= 0; so does this (inf/nan)
    centred = x - R.mean(x, axis=1, keepdims=True)
    c = linalg.matmul(centred, centred.T) / (float(fact) if fact > 0 else 0.0)
    return c.reshape(tuple(s for s in c.shape if s != 1))


def _variables(m, rowvar: bool) -> Tensor:
    """m as a 2-D array with one variable per row, as np.cov reads it."""
    x = Tensor(as_node(m))
    if x.ndim > 2:
        raise ShapeError(f"np.cov: m has more than 2 dimensions (shape {x.shape})")
    if x.ndim < 2:
        x = x.reshape(1, -1)
    return x.T if not rowvar and x.shape[0] != 1 else x


def _stack_rows(a: Tensor, b: Tensor) -> Tensor:
    """The rows of a, then those of b (np.concatenate along axis 0), as masked reads: never materialised."""
    if a.shape[1] != b.shape[1]:
        raise ShapeError(f"np.cov: m and y have different numbers of observations ({a.shape[1]} and {b.shape[1]})")
    n = a.shape[0]
    rows = a.shape[0] + b.shape[0]
    top = build.pad(a._node, ((0, b.shape[0]), (0, 0)), 0)
    bottom = build.pad(b._node, ((n, 0), (0, 0)), 0)
    first = Tensor(build.iota((rows, a.shape[1]), 0)) < n
    return F.where(first, Tensor(top), Tensor(bottom))


def corrcoef(x, y=None, rowvar=True, bias=np._NoValue, ddof=np._NoValue, *, dtype=None) -> Tensor:
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:  # a single variable: NumPy returns c / c
        return c / c
    n = c.shape[0]
    d = c.reshape(-1)[:: n + 1]  # the diagonal
    stddev = F.sqrt(d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return F.clip(c, -1, 1)


NUMPY_FUNCTIONS = {np.cov: cov, np.corrcoef: corrcoef}
