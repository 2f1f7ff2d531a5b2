"""np.linalg as generated kernels, for the devices without LAPACK (opencl, webgpu, cuda, metal): Gauss-Jordan
elimination with partial pivoting (solve, inv, det, slogdet), Cholesky, Householder QR, and what follows from
them and from linalg_jacobi's eigh/svd, in whole-array operations over stacks of matrices and compiled loops."""

from __future__ import annotations

import contextvars
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracejit.ir import build, faulting
from tracejit.ir.kernel_ir import Fault
from tracejit.numpy import linalg_jacobi, loops
from tracejit.numpy.tensor import Tensor, as_node

__all__: list[str] = []

Array = Any  # a traced Tensor: NumPy's functions on it are tracejit's (their stubs know only ndarrays)

# the largest matrix side computed by the generated kernels: one loop step per row or column, so beyond it NumPy's
# LAPACK on the host (a copy there and back) is the faster and the more accurate
LARGEST = 1024

SINGULAR = Fault("LinAlgError", "Singular matrix")
NOT_POSITIVE_DEFINITE = Fault("LinAlgError", "Matrix is not positive definite")

# whether np.linalg is traced as generated kernels (a device without LAPACK of its own: arrays not in host
# memory) or as NumPy's LAPACK on the host (the numba device); the frontend sets it for the device it lowers for
ON_DEVICE: contextvars.ContextVar[bool] = contextvars.ContextVar("tracejit_linalg_on_device", default=False)
# whether that device computes float64 (lstsq computes in it, as NumPy's)
FLOAT64: contextvars.ContextVar[bool] = contextvars.ContextVar("tracejit_linalg_float64", default=True)


class OnHost(Exception):
    """Raised by a generated function before it traces anything: NumPy's LAPACK on the host computes this call."""


def generated(func: Callable, args: tuple, kwargs: dict):
    """np.linalg's `func` on these arguments as generated kernels, or NotImplemented where NumPy's LAPACK on the
    host computes it: on the numba device (whose arrays are host memory), for complex or empty matrices, beyond
    the largest side the algorithm is meant for (LARGEST; linalg_jacobi.LARGEST for what needs eigenvalues or
    singular values), and for what is not built here. multi_dot and matrix_power are matrix products on every
    device."""
    impl = EVERYWHERE.get(func)
    if impl is None and ON_DEVICE.get():
        impl = GENERATED.get(func)
        matrices = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor) and a.ndim >= 2]
        if any(
            a.dtype.kind == "c" or 0 in a.shape[-2:] or _side(func, a, args, kwargs) > _largest(func) for a in matrices
        ):
            return NotImplemented
    if impl is None:
        return NotImplemented
    try:
        result = impl(*args, **kwargs)
    except OnHost:
        return NotImplemented
    if type(result) is tuple:
        return _RESULTS[func](*map(_new, result))
    return _new(result)


def _largest(func: Callable) -> int:
    return linalg_jacobi.LARGEST if func in _BY_JACOBI else LARGEST


def _side(func: Callable, a: Tensor, args: tuple, kwargs: dict) -> int:
    """The side of a that sets the cost of the generated computation: one-sided Jacobi loops over the columns of
    the tall side (min), but a full U of svd is m x m, and eigh's rounds go over n."""
    full = (
        func is np.linalg.svd
        and kwargs.get("full_matrices", args[1] if len(args) > 1 else True)
        and kwargs.get("compute_uv", args[2] if len(args) > 2 else True)
    )
    square = func in (np.linalg.eigh, np.linalg.eigvalsh) or func not in _BY_JACOBI
    return max(a.shape[-2:]) if square or full else min(a.shape[-2:])


def _new(value):
    """A result as the new array NumPy's is: one the caller may assign into, whatever loops made it."""
    return Tensor(as_node(value)) if isinstance(value, Tensor) else value


# --- arguments, as NumPy checks them -----------------------------------------------------------------------------


def _traced(a) -> Array:
    """a as a traced value (an array NumPy holds, or a number, as a constant of the kernel)."""
    return a if isinstance(a, Tensor) else Tensor(as_node(np.asarray(a)))


def _float(a, name: str) -> Array:
    """a as a stack of matrices in the float dtype NumPy's LAPACK computes it in (float32 stays, integers and
    bools become float64), with NumPy's errors for fewer than two dimensions and unsupported dtypes."""
    a = _traced(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional (np.linalg.{name})"
        )
    if a.dtype == np.float16 or a.dtype.kind not in "biuf":
        raise TypeError(f"array type {a.dtype} is unsupported in linalg (np.linalg.{name})")
    return a if a.dtype.kind == "f" else a.astype(np.float64)


def _square(a, name: str) -> Array:
    a = _float(a, name)
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"Last 2 dimensions of the array must be square (np.linalg.{name} of shape {a.shape})"
        )
    return a


def _raising(value: Array, ok, fault: Fault) -> Array:
    """value, computed with a check that raises `fault` when the kernel runs where the 0-d bool `ok` is False."""
    check = build.cast(faulting.check(as_node(ok), fault, "int32"), value.dtype)
    return value + Tensor(check)


def _eye(n: int, dtype, batch: tuple[int, ...] = ()) -> Array:
    eye = Tensor(as_node(np.eye(n, dtype=dtype)))
    return np.broadcast_to(eye, (*batch, n, n)) if batch else eye


# --- Gauss-Jordan elimination: solve, inv, det, slogdet ----------------------------------------------------------


# the most work a matrix's elimination may take, in operations times the values computed from it, for it to be
# written out value by value (_unrolled): one kernel, no pass over memory per step, but each value of the result
# computes the whole elimination again (a kernel computes its values one by one); beyond it, _looped
UNROLLED_WORK = 5000


def _eliminate(a: Array, b: Array | None) -> tuple[Any, Array, Array, Array, Array]:
    """Gauss-Jordan elimination of [a | b] (_unrolled for small matrices, else _looped): a's inverse applied to b
    (None without b), the determinant, its sign, the log of its magnitude, whether a pivot was zero."""
    n, columns = a.shape[-1], 0 if b is None else b.shape[-1]
    if max(columns, 1) * n**3 * (n + columns) <= UNROLLED_WORK:
        return _unrolled(a, b)
    return _looped(a, b)


def _unrolled(a: Array, b: Array | None) -> tuple[Any, Array, Array, Array, Array]:
    """_looped's elimination written out value by value (each a stack of scalars, (...,)): the same pivots, the
    same arithmetic, in one kernel."""
    n = a.shape[-1]
    m = [
        [a[..., i, j] for j in range(n)] + ([] if b is None else [b[..., i, j] for j in range(b.shape[-1])])
        for i in range(n)
    ]
    width = len(m[0])
    zero = np.zeros(a.shape[:-2], a.dtype)
    used = [np.zeros(a.shape[:-2], bool)] * n
    product, sign, log_abs, singular = zero + 1, zero + 1, zero, np.zeros(a.shape[:-2], bool)
    order: list[Array] = []
    for k in range(n):
        largest, p = np.where(used[0], -1, np.abs(m[0][k])), np.zeros(a.shape[:-2], np.int32)
        for i in range(1, n):  # (the first of the largest, as np.argmax)
            candidate = np.where(used[i], -1, np.abs(m[i][k]))
            larger = candidate > largest
            largest, p = np.where(larger, candidate, largest), np.where(larger, np.int32(i), p)
        chosen = [p == i for i in range(n)]
        pivot_row = [_select(chosen, [m[i][j] for i in range(n)]) for j in range(width)]
        pivot = pivot_row[k]
        row = [v / pivot for v in pivot_row]
        m = [[np.where(chosen[i], row[j], m[i][j] - m[i][k] * row[j]) for j in range(width)] for i in range(n)]
        used = [used[i] | chosen[i] for i in range(n)]
        order.append(p)
        product, sign, log_abs = product * pivot, sign * np.sign(pivot), log_abs + np.log(np.abs(pivot))
        singular = singular | (pivot == 0)
    inversions = sum((order[k] > order[j]).astype(np.int32) for j in range(n) for k in range(j))
    parity = (1 - 2 * (inversions % 2)).astype(a.dtype) if n > 1 else zero + 1
    x = None
    if b is not None:
        chosen_rows = [[order[k] == i for i in range(n)] for k in range(n)]
        x = np.stack(
            [
                np.stack([_select(chosen_rows[k], [m[i][j] for i in range(n)]) for j in range(n, width)], axis=-1)
                for k in range(n)
            ],
            axis=-2,
        )
    return x, product * parity, sign * parity, log_abs, singular


def _select(chosen: list, values: list) -> Array:
    """values[i] where chosen[i] (one of them holds)."""
    out = values[-1]
    for i in range(len(values) - 2, -1, -1):
        out = np.where(chosen[i], values[i], out)
    return out


def _looped(a: Array, b: Array | None) -> tuple[Any, Array, Array, Array, Array]:
    """Gauss-Jordan elimination of [a | b] with partial pivoting (the pivot of column k: the first of the largest
    magnitudes among the rows not yet pivots, as LAPACK's getrf chooses it), the rows left in place (each step one
    pass over the matrices, no swap) and put in order at the end: a's inverse applied to b (None without b), the
    determinant (the product of the pivots, signed by the permutation's parity, as NumPy's), its sign, the log of
    its magnitude and whether a pivot was zero (a singular matrix), per matrix."""
    n = a.shape[-1]
    batch = a.shape[:-2]
    m = a if b is None else np.concatenate([a, b], axis=-1)
    rows = np.arange(n, dtype=np.int32)  # (int32: webgpu computes no int64)
    zero = np.zeros(batch, a.dtype)

    def step(k, m, used, order, product, sign, log_abs, singular):
        column = m[..., :, k]
        candidates = np.where(used, -1, np.abs(column))
        largest = np.max(candidates, axis=-1, keepdims=True)
        p = np.min(np.where(candidates == largest, rows, n), axis=-1)  # (np.argmax's first, in int32) ...
        p = np.where(p == n, k, p)  # (... k where the column is NaN: a zero pivot before made it so)
        pivot_row = np.take_along_axis(m, p[..., None, None], axis=-2)
        pivot = pivot_row[..., 0, k]
        row = pivot_row / pivot[..., None, None]
        chosen = (rows == p[..., None])[..., None]
        m = np.where(chosen, row, m - column[..., :, None] * row)
        order = np.where(rows == k, p[..., None], order)
        product, sign = product * pivot, sign * np.sign(pivot)
        return m, used | chosen[..., 0], order, product, sign, log_abs + np.log(np.abs(pivot)), singular | (pivot == 0)

    m, _, order, product, sign, log_abs, singular, _ = loops.for_range(
        (n,),
        step,
        (
            m,
            np.zeros((*batch, n), bool),
            np.zeros((*batch, n), np.int32),
            zero + 1,
            zero + 1,
            zero,
            np.zeros(batch, bool),
        ),
        ("m", "used", "order", "product", "sign", "log_abs", "singular"),
        None,
        (),
        "np.linalg (Gauss-Jordan elimination)",
    )
    # the permutation's parity: its inversions, counted
    inversions = np.sum(
        (order[..., :, None] > order[..., None, :]) & (rows[:, None] < rows), axis=(-2, -1), dtype=np.int32
    )
    parity = (1 - 2 * (inversions % 2)).astype(a.dtype)
    x = None if b is None else np.take_along_axis(m, order[..., :, None], axis=-2)[..., n:]
    return x, product * parity, sign * parity, log_abs, singular


def solve(a, b) -> Array:
    """np.linalg.solve: b a vector (1-D) or a stack of matrices (..., n, k), the stacks broadcast together."""
    a = _square(a, "solve")
    b = _traced(b)
    dtype = np.result_type(a.dtype, b.dtype if b.dtype.kind == "f" and b.dtype != np.float16 else np.float64)
    a, b = a.astype(dtype), b.astype(dtype)
    vector = b.ndim == 1
    columns = b[:, None] if vector else b
    if columns.shape[-2] != a.shape[-1]:
        raise ValueError(
            f"np.linalg.solve: the right-hand side has {columns.shape[-2]} rows (shape {b.shape}) where the "
            f"matrix has {a.shape[-1]} (shape {a.shape})"
        )
    batch = np.broadcast_shapes(a.shape[:-2], columns.shape[:-2])
    a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    columns = np.broadcast_to(columns, (*batch, *columns.shape[-2:]))
    x, _, _, _, singular = _eliminate(a, columns)
    x = _raising(x, ~np.any(singular), SINGULAR)
    return x[..., 0] if vector else x


def inv(a) -> Array:
    """np.linalg.inv: LinAlgError('Singular matrix') where a pivot is zero, as LAPACK's."""
    a = _square(a, "inv")
    x, _, _, _, singular = _eliminate(a, _eye(a.shape[-1], a.dtype, a.shape[:-2]))
    return _raising(x, ~np.any(singular), SINGULAR)


def slogdet(a):
    """np.linalg.slogdet: (sign, log|det|), sign 0 and log -inf for a singular matrix."""
    a = _square(a, "slogdet")
    _, _, sign, log_abs, singular = _eliminate(a, None)
    sign = np.where(singular, 0, sign).astype(a.dtype)
    log_abs = np.where(singular, -np.inf, log_abs).astype(a.dtype)
    return sign, log_abs


def det(a) -> Array:
    """np.linalg.det: the product of the pivots, signed by the rows swapped."""
    a = _square(a, "det")
    _, product, _, _, singular = _eliminate(a, None)
    return np.where(singular, 0, product).astype(a.dtype)


# --- Cholesky and QR --------------------------------------------------------------------------------------------


def cholesky(a, /, *, upper: bool = False) -> Array:
    """np.linalg.cholesky of the lower triangle (the upper one with upper=True, as NumPy's), right-looking, column
    by column; LinAlgError('Matrix is not positive definite') where a diagonal entry to take the root of is zero
    or negative, as NumPy's LAPACK."""
    a = _square(a, "cholesky")
    n = a.shape[-1]
    if upper:
        a = np.swapaxes(a, -1, -2)
    s = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    rows = np.arange(n, dtype=np.int32)  # (int32: webgpu computes no int64)

    def step(k, s, low, failed):
        d = s[..., k, k]
        root = np.sqrt(np.where(d <= 0, 1, d))
        column = np.where(rows >= k, s[..., :, k] / root[..., None], 0)
        s = s - column[..., :, None] * column[..., None, :]
        low = np.where(rows == k, column[..., :, None], low)
        return s, low, failed | (d <= 0)  # (NaN is not: NumPy's LAPACK carries it on)

    _, low, failed, _ = loops.for_range(
        (n,),
        step,
        (s, np.zeros_like(a), np.zeros(a.shape[:-2], bool)),
        ("s", "low", "failed"),
        None,
        (),
        "np.linalg.cholesky",
    )
    low = _raising(low, ~np.any(failed), NOT_POSITIVE_DEFINITE)
    return np.swapaxes(low, -1, -2) if upper else low


def qr(a, mode: str = "reduced"):
    """np.linalg.qr by Householder reflections as LAPACK's geqrf makes them (R's diagonal -sign(a_kk) times the
    column's norm; a column already zero below the diagonal left as it is), Q accumulated from them. Modes
    'reduced', 'complete' and 'r'; 'raw' runs with NumPy."""
    if mode == "raw":  # (LAPACK's own layout of the reflections: NumPy makes it)
        raise OnHost
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    a = _float(a, "qr")
    m, n = a.shape[-2:]
    k = min(m, n)
    rows = np.arange(m, dtype=np.int32)

    def step(j, r, q):
        column = r[..., :, j]
        alpha = r[..., j, j]
        below = np.where(rows > j, column, 0)
        x_norm = np.sqrt(np.sum(below * below, axis=-1))
        beta = -np.copysign(np.hypot(alpha, x_norm), alpha)
        reflect = x_norm != 0
        safe = np.where(reflect, alpha - beta, 1)
        tau = np.where(reflect, (beta - alpha) / np.where(reflect, beta, 1), 0)
        v = np.where(rows == j, 1, below / safe[..., None]).astype(a.dtype)  # H = I - tau v v^T
        r = r - (tau[..., None] * v)[..., :, None] * (v[..., None, :] @ r)
        q = q - ((q @ v[..., :, None]) * tau[..., None, None]) * v[..., None, :]
        return r, q

    r, q, _ = loops.for_range(
        (k,), step, (a, _eye(m, a.dtype, a.shape[:-2])), ("r", "q"), None, (), "np.linalg.qr (Householder)"
    )
    r = np.triu(r)
    if mode == "complete":
        return q, r
    r = r[..., :k, :]
    return r if mode == "r" else (q[..., :, :k], r)


# --- products of matrices: every device --------------------------------------------------------------------------


def matrix_power(a, n) -> Array:
    """np.linalg.matrix_power with NumPy's order of products (so its rounding); a negative power of the inverse
    (np.linalg.inv, computed as the device computes it)."""
    a = _traced(a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("exponent must be an integer") from None
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"Last 2 dimensions of the array must be square (np.linalg.matrix_power of shape {a.shape})"
        )
    if n == 0:
        return np.broadcast_to(_eye(a.shape[-1], a.dtype), a.shape) + np.zeros_like(a)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    if n == 1:
        return a + np.zeros_like(a)  # (a new array, as NumPy's)
    if n == 2:
        return a @ a
    if n == 3:
        return (a @ a) @ a
    z = result = None
    while n > 0:
        z = a if z is None else z @ z
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else result @ z
    return result


def multi_dot(arrays: Sequence, *, out=None) -> Array:
    """np.linalg.multi_dot: the products in the order of fewest multiplications (NumPy's matrix-chain order);
    a 1-D first (last) array is a row (column) whose axis leaves the result."""
    if out is not None:
        raise TypeError("np.linalg.multi_dot(..., out=...) is not supported while tracing; use the returned value")
    arrays = [_traced(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return np.dot(arrays[0], arrays[1])
    first, last = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first:
        arrays[0] = arrays[0][None, :]
    if last:
        arrays[-1] = arrays[-1][:, None]
    for i, a in enumerate(arrays):
        if a.ndim != 2:
            raise np.linalg.LinAlgError(
                f"{a.ndim}-dimensional array given. Array must be two-dimensional (np.linalg.multi_dot's argument {i})"
            )
    order = _chain_order([a.shape[0] for a in arrays] + [arrays[-1].shape[1]])

    def product(i: int, j: int) -> Array:
        return arrays[i] if i == j else np.dot(product(i, order[i][j]), product(order[i][j] + 1, j))

    result = product(0, len(arrays) - 1)
    if first and last:
        return result[0, 0]
    return result[0] if first else result[:, 0] if last else result


def tensorsolve(a, b, axes=None) -> Array:
    """np.linalg.tensorsolve: NumPy's reshapes around np.linalg.solve (as the device computes it)."""
    a = _traced(a)
    b = _traced(b)
    if axes is not None:
        order = list(range(a.ndim))
        for k in axes:
            order.remove(k)
            order.insert(a.ndim, k)
        a = np.transpose(a, order)
    shape = a.shape[-(a.ndim - b.ndim) :]
    size = int(np.prod(shape))
    if a.size != size**2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])"
        )
    return np.reshape(np.linalg.solve(np.reshape(a, (size, size)), np.ravel(b)), shape)


def tensorinv(a, ind: int = 2) -> Array:
    """np.linalg.tensorinv: NumPy's reshapes around np.linalg.inv (as the device computes it)."""
    a = _traced(a)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    size = int(np.prod(a.shape[ind:]))
    return np.reshape(np.linalg.inv(np.reshape(a, (size, -1))), a.shape[ind:] + a.shape[:ind])


def _chain_order(p: list[int]) -> list[list[int]]:
    """Where to split each chain i..j of matrices (p[i] x p[i+1] each) for the fewest multiplications: NumPy's
    (Cormen's) dynamic programme, so ties split where NumPy's do. Three matrices as NumPy's _multi_dot_three."""
    n = len(p) - 1
    split = [[0] * n for _ in range(n)]
    if n == 3:
        cost1 = p[0] * p[1] * p[2] + p[0] * p[2] * p[3]  # (AB)C
        cost2 = p[1] * p[2] * p[3] + p[0] * p[1] * p[3]  # A(BC)
        split[0][2], split[1][2] = (1, 1) if cost1 < cost2 else (0, 1)
        split[0][1] = 0
        return split
    cost = [[0.0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = float("inf")
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


# --- what the singular values give: pinv, matrix_rank, cond, lstsq -----------------------------------------------


def pinv(a, rcond=None, hermitian: bool = False, *, rtol=np._NoValue) -> Array:
    """np.linalg.pinv through the singular value decomposition, NumPy's cutoffs (rcond, rtol)."""
    a = _float(a, "pinv")
    if rcond is None:
        rcond = 1e-15 if rtol is np._NoValue else max(a.shape[-2:]) * np.finfo(a.dtype).eps if rtol is None else rtol
    elif rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    u, s, vt = linalg_jacobi.svd(a, full_matrices=False, hermitian=hermitian)
    rcond = rcond if isinstance(rcond, Tensor) or np.ndim(rcond) else float(rcond)  # (a number: weak, as NumPy's)
    cutoff = (rcond[..., None] if np.ndim(rcond) else rcond) * np.max(s, axis=-1, keepdims=True)
    large = s > cutoff
    s = np.where(large, 1 / np.where(large, s, 1), 0).astype(a.dtype)
    return np.swapaxes(vt, -1, -2) @ (s[..., None] * np.swapaxes(u, -1, -2))


def matrix_rank(A, tol=None, hermitian: bool = False, *, rtol=None) -> Array:
    """np.linalg.matrix_rank: the singular values above NumPy's tolerance, counted."""
    A = _traced(A)
    if A.ndim < 2:
        return np.any(A != 0).astype(np.int64)
    A = _float(A, "matrix_rank")
    s = linalg_jacobi.svd(A, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(A.shape[-2:]) * np.finfo(s.dtype).eps
        else:
            rtol = np.asarray(rtol)[..., None]
        tol = np.max(s, axis=-1, keepdims=True) * rtol
    else:
        tol = np.asarray(tol)[..., None]
    return np.count_nonzero(s > tol, axis=-1)


def lstsq(a, b, rcond=None):
    """np.linalg.lstsq through the singular value decomposition (NumPy's gelsd is SVD-based too): the
    minimum-norm solution, the residuals' sums of squares (empty where the rank is below n or m <= n: a count
    read from the values), the rank (int32) and the singular values. NumPy computes in float64 whatever the
    input; so does this where the device has float64, else in float32, with float32's eps in rcond's default."""
    a = _traced(a)
    b = _traced(b)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise np.linalg.LinAlgError(
            f"{a.ndim if a.ndim != 2 else b.ndim}-dimensional array given. Array must be two-dimensional "
            "(np.linalg.lstsq)"
        )
    m, n = a.shape
    if b.shape[0] != m:
        raise np.linalg.LinAlgError("Incompatible dimensions")
    if a.dtype == np.float16 or b.dtype == np.float16 or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
        raise TypeError(f"array type {a.dtype if a.dtype.kind not in 'biuf' else b.dtype} is unsupported in linalg")
    result = np.result_type(*(d if d.kind == "f" else np.float64 for d in (a.dtype, b.dtype)))
    work = np.dtype(np.float64 if FLOAT64.get() else result)
    if rcond is None:
        rcond = float(np.finfo(work).eps) * max(m, n)
    vector = b.ndim == 1
    columns = (b[:, None] if vector else b).astype(work)
    u, s, vt = linalg_jacobi.svd(a.astype(work), full_matrices=False)
    large = s > rcond * s[0]
    inverse = np.where(large, 1 / np.where(large, s, 1), 0).astype(work)
    x = vt.T @ (inverse[:, None] * (u.T @ columns))
    rank = np.sum(large, dtype=np.int32)
    if m > n:
        residual = np.sum((columns - a.astype(work) @ x) ** 2, axis=0)
        residuals = residual[np.broadcast_to(rank == n, residual.shape)]  # (all of them, or none)
    else:
        residuals = np.zeros(0, work)
    x = x[:, 0] if vector else x
    return x.astype(result), residuals.astype(result), rank, s.astype(result)


def cond(x, p=None) -> Array:
    """np.linalg.cond: the ratio of the extreme singular values (p None, 2, -2), else norm(x) * norm(inv(x));
    NaN from a singular matrix is inf, as NumPy makes it (unless x holds NaN)."""
    x = _float(x, "cond")
    if p is None or p == 2 or p == -2:
        s = linalg_jacobi.svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        x = _square(x, "cond")
        inverse, _, _, _, _ = _eliminate(x, _eye(x.shape[-1], x.dtype, x.shape[:-2]))
        r = np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(inverse, p, axis=(-2, -1))
    r = r.astype(x.dtype)
    return np.where(np.isnan(r) & ~np.any(np.isnan(x), axis=(-2, -1)), np.inf, r)


# the named tuples NumPy returns (EighResult, SVDResult, QRResult, SlogdetResult; lstsq's is a plain tuple)
_RESULTS: dict[Callable, Callable] = {
    np.linalg.eigh: type(np.linalg.eigh(np.eye(1))),
    np.linalg.svd: type(np.linalg.svd(np.eye(1))),
    np.linalg.qr: type(np.linalg.qr(np.eye(1))),
    np.linalg.slogdet: type(np.linalg.slogdet(np.eye(1))),
    np.linalg.lstsq: lambda *results: results,
}
_BY_JACOBI = frozenset(
    (
        np.linalg.eigh,
        np.linalg.eigvalsh,
        np.linalg.svd,
        np.linalg.pinv,
        np.linalg.matrix_rank,
        np.linalg.cond,
        np.linalg.lstsq,
    )
)
# what is written with other functions of np.linalg (each computed as the device computes it) or matrix products
EVERYWHERE: dict[Callable, Callable] = {
    np.linalg.matrix_power: matrix_power,
    np.linalg.multi_dot: multi_dot,
    np.linalg.tensorsolve: tensorsolve,
    np.linalg.tensorinv: tensorinv,
}
GENERATED: dict[Callable, Callable] = {
    np.linalg.solve: solve,
    np.linalg.inv: inv,
    np.linalg.det: det,
    np.linalg.slogdet: slogdet,
    np.linalg.cholesky: cholesky,
    np.linalg.qr: qr,
    np.linalg.eigh: linalg_jacobi.eigh,
    np.linalg.eigvalsh: linalg_jacobi.eigvalsh,
    np.linalg.svd: linalg_jacobi.svd,
    np.linalg.pinv: pinv,
    np.linalg.matrix_rank: matrix_rank,
    np.linalg.cond: cond,
    np.linalg.lstsq: lstsq,
}
