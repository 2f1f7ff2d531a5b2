"""NumPy's np.linalg.eigh, eigvalsh and svd for real float32/float64 matrices by Jacobi's methods, in whole-array
operations and compiled loops that trace (the way tracejit computes them where no LAPACK is: opencl, webgpu, cuda,
metal), and that run as they are on NumPy arrays.

eigh: the cyclic parallel Jacobi method (cuSOLVER's syevj): the side padded to even, each sweep n-1 rounds of a
round-robin (tournament) ordering, each round n/2 disjoint rotations at once, applied as gathers of partner
rows and columns and elementwise coefficients (O(n^2) per round, no n x n rotation matrix). svd: one-sided
Jacobi (Hestenes; cuSOLVER's gesvdj) on the columns of A (of A^T where it is wide), the same ordering of column
pairs, V accumulated, U = A V / s, completed to an orthonormal basis where s has zeros or U is full.
Sweeps (a `while` compiled as a loop, its rounds a `for` inside it) run until the off-diagonal part is small: for
eigh its Frobenius norm below n eps ||A||_F, for svd every cosine between two columns below sqrt(m) eps; at most
MAX_SWEEPS of them. On random matrices n = 32 takes 6-8 sweeps, n = 256 8-11."""

from __future__ import annotations

import math

import numpy as np

from tracejit.numpy import creation, loops
from tracejit.numpy.tensor import Tensor

__all__ = ["LARGEST", "eigh", "eigvalsh", "svd"]

# the largest matrix side these functions are meant for on a GPU. A call runs sweeps * (n-1) rounds one after
# another, each a few kernels of O(n^2) (eigh) or O(mn) (svd) work: at n = 256, 8-11 sweeps, about 2,500 rounds
# (measured on the CPU devices: numba 2-3.5 s, PoCL 7-15 s a call). Beyond it the rounds' launches and the O(n^3)
# work per sweep outgrow what a blocked (LAPACK-style) method would take
LARGEST = 256

MAX_SWEEPS = {np.dtype(np.float32): 15, np.dtype(np.float64): 20}


# --- the public functions, NumPy's signatures ---------------------------------------------------------------------


def eigh(a, UPLO: str = "L"):  # noqa: N803  (NumPy's name)
    """np.linalg.eigh of the symmetric a (..., n, n), read from its UPLO triangle: (w, v), the eigenvalues
    ascending (..., n) and the eigenvectors as the columns of v (..., n, n), in a's float dtype."""
    w, v, _ = _eigh(_symmetric(a, UPLO), vectors=True)
    return w, v


def eigvalsh(a, UPLO: str = "L"):  # noqa: N803
    """np.linalg.eigvalsh: the eigenvalues of the symmetric a (..., n, n), ascending."""
    w, _, _ = _eigh(_symmetric(a, UPLO), vectors=False)
    return w


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """np.linalg.svd of a (..., m, n): (u, s, vh), or s where not compute_uv. s descending (..., k), k = min(m, n);
    u (..., m, m) and vh (..., n, n), or (..., m, k) and (..., k, n) where not full_matrices.
    hermitian=True takes a as symmetric (its lower triangle, as NumPy) and uses eigh: s = |w| sorted descending,
    u the eigenvectors, vh their transposes times the signs of w (+1 for w == 0, where NumPy's row would be 0)."""
    a = _checked(a, square=hermitian)
    if hermitian:
        return _hermitian_svd(a, compute_uv)
    m, n = a.shape[-2:]
    wide = m < n
    s, left, right, _ = _one_sided(a.swapaxes(-1, -2) if wide else a, compute_uv, full_matrices)
    if not compute_uv:
        return s
    # tall: a = left diag(s) right^T; wide: a^T = left diag(s) right^T, so a = right diag(s) left^T
    u, vh = (right, left.swapaxes(-1, -2)) if wide else (left, right.swapaxes(-1, -2))
    return u, s, vh


# --- arguments ------------------------------------------------------------------------------------------------------


def _checked(a, square: bool):
    """a as a float32/float64 array (integers and bools as float64, as NumPy), with NumPy's errors."""
    if not isinstance(a, Tensor):
        a = np.asarray(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if square and a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    dt = np.dtype(a.dtype)
    if dt.kind in "biu":
        return a.astype(np.float64)
    if dt.kind == "c":
        raise TypeError("linalg_jacobi: complex matrices are not supported (real float32/float64 only)")
    if dt not in MAX_SWEEPS:
        raise TypeError(f"array type {dt} is unsupported in linalg")
    return a


def _symmetric(a, uplo: str):
    """The symmetric matrix NumPy's eigh reads: a's UPLO triangle, mirrored."""
    if uplo not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    a = _checked(a, square=True)
    if uplo == "U":
        a = a.swapaxes(-1, -2)
    return np.tril(a) + np.tril(a, -1).swapaxes(-1, -2)


# --- array plumbing -------------------------------------------------------------------------------------------------


def _arange(like, n: int):
    """np.arange(n) (int32) as an index expression where `like` is traced (np.arange here is NumPy's: a table)."""
    return creation.arange(n, dtype=np.int32) if isinstance(like, Tensor) else np.arange(n, dtype=np.int32)


def _partners(like, r, n: int):
    """Round r (0 <= r < n-1) of the round-robin ordering of n (even) indices: each index's partner (n,), the
    circle method in integers: i < n-1 meets (r - i) mod (n-1), or n-1 where that is i itself; n-1 meets the i
    with 2i = r mod (n-1), i = r * n/2 mod (n-1). Every pair meets once in the n-1 rounds."""
    if isinstance(r, Tensor):  # (the index of a loop inside a compiled loop is int64, which webgpu lacks)
        r = r.astype(np.int32)
    j = _arange(like, n)
    other = (r - j + (n - 1)) % (n - 1)
    fixed = (r * (n // 2)) % (n - 1)
    return np.where(j == n - 1, fixed, np.where(other == j, n - 1, other)).astype(np.int32)


def _padded(a, rows: bool, cols: bool):
    """a with one zero row and/or column appended (an odd side made even)."""
    widths = [(0, 0)] * (a.ndim - 2) + [(0, int(rows)), (0, int(cols))]
    return np.pad(a, widths) if rows or cols else a


def _identity(like, n: int):
    """The n x n identity in like's dtype, broadcast to like's batch."""
    j = _arange(like, n)
    eye = (j[:, None] == j[None, :]).astype(like.dtype)
    return np.broadcast_to(eye, (*like.shape[:-2], n, n))


def _rotation(diff, cross, first):
    """Jacobi's rotation for each pair (Rutishauser's stable form, Golub & Van Loan's sym.schur2): with
    theta = diff / (2 cross), t = sign(theta) / (|theta| + sqrt(1 + theta^2)), c = 1/sqrt(1 + t^2), s = t c; t is
    computed as 2 cross sign(diff) / (|diff| + hypot(diff, 2 cross)), which neither divides by cross nor overflows,
    and is 0 where cross is. Returns c, the coefficient of the partner and t with its sign (-s and -t at p, s and t
    at q): new x_p = c x_p - s x_q, new x_q = c x_q + s x_p, and the same numbers at both members of a pair
    (`first`: the index is the pair's p; diff is that of q minus that of p at both)."""
    twice = 2 * cross
    size = np.abs(diff) + np.hypot(diff, twice)
    t = twice / np.where(size > 0, size, 1)  # (size is 0 only where diff and cross are)
    t = np.where(diff >= 0, t, -t)
    c = 1 / np.sqrt(1 + t * t)
    s = t * c
    return c, np.where(first, -s, s), np.where(first, -t, t)


def _scaled(a):
    """a divided by its largest magnitude (each matrix's own; 1 for a zero matrix), and that scale (..., 1, 1):
    squares and products neither overflow nor underflow."""
    largest = np.max(np.abs(a), axis=(-2, -1), keepdims=True)
    scale = np.where(largest > 0, largest, 1).astype(a.dtype)
    return a / scale, scale


def _sorted_by(keys, values, columns=()):
    """values and the columns of each of `columns` in the order that sorts keys ascending (along the last axis)."""
    order = np.argsort(keys, axis=-1).astype(np.int32)  # (webgpu has no int64)
    return (
        np.take_along_axis(values, order, axis=-1),
        *(np.take_along_axis(c, order[..., None, :], -1) for c in columns),
    )


# --- eigh: parallel two-sided Jacobi --------------------------------------------------------------------------------


def _eigh(a, vectors: bool):
    """(w, v or None, the number of sweeps) of the symmetric a (..., n, n)."""
    n = a.shape[-1]
    if n == 0:
        return a.sum(axis=-1), a if vectors else None, 0
    a, scale = _scaled(a)
    size = n + n % 2  # (an odd side gets a zero row and column: its pairs' cross terms are 0, so never rotated)
    work = _padded(a, n % 2 == 1, n % 2 == 1)
    v = _identity(work, size) if vectors else None
    eps = float(np.finfo(a.dtype).eps)
    most = MAX_SWEEPS[np.dtype(a.dtype)]
    j = _arange(work, size)
    eye = j[:, None] == j
    off = ~eye
    # (the off-diagonal part stalls at about sqrt(n)/3 eps ||a|| (rounding): eps * n stops the sweep that gets there)
    tolerance = (eps * n) ** 2 * np.sum(work * work, axis=(-2, -1))

    def unconverged(work, v, sweep):
        off_norm = np.sum(np.where(off, work * work, 0), axis=(-2, -1))
        return np.any(off_norm > tolerance) & (sweep < most)

    def round_(r, work, v=None):
        partner = _partners(work, r, size)
        first = j < partner
        d = np.diagonal(work, axis1=-2, axis2=-1)
        # a_pq, the same number at p and at q: the mean of the two (a stays symmetric only to rounding)
        cross = np.take_along_axis(work, np.broadcast_to(partner[:, None], (*work.shape[:-1], 1)), axis=-1)[..., 0]
        cross = (cross + np.take(cross, partner, axis=-1)) * 0.5
        diff = np.take(d, partner, axis=-1) - d
        diff = np.where(first, diff, -diff)
        c, s, t = _rotation(diff, cross, first)
        work = work * c[..., None, :] + np.take(work, partner, axis=-1) * s[..., None, :]  # columns: A J
        work = work * c[..., :, None] + np.take(work, partner, axis=-2) * s[..., :, None]  # rows: J^T A J
        # the rotated pairs' diagonal entries as a_pp - t a_pq and a_qq + t a_pq, their a_pq as 0 (Rutishauser):
        # more accurate than the products above, whose rounding is of the order of the whole rows
        work = np.where(eye, (d + t * cross)[..., None, :], np.where(partner[:, None] == j, 0, work))
        if v is not None:
            v = v * c[..., None, :] + np.take(v, partner, axis=-1) * s[..., None, :]
        return (work, v) if v is not None else (work,)

    def sweep_(work, v, sweep):
        carried = (work, v) if v is not None else (work,)
        names = ("work", "v") if v is not None else ("work",)
        *out, _ = loops.for_range((0, size - 1), round_, carried, names, None, (), "linalg_jacobi.eigh round")
        return (out[0], out[1] if v is not None else v, sweep + 1)

    if vectors:
        work, v, sweeps = loops.while_true(
            unconverged, sweep_, (work, v, np.int32(0)), ("work", "v", "sweep"), (), "linalg_jacobi.eigh sweep"
        )
    else:

        def sweep_values(work, sweep):
            out = sweep_(work, None, sweep)
            return out[0], out[2]

        work, sweeps = loops.while_true(
            lambda work, sweep: unconverged(work, None, sweep),
            sweep_values,
            (work, np.int32(0)),
            ("work", "sweep"),
            (),
            "linalg_jacobi.eigvalsh sweep",
        )
    w = np.diagonal(work, axis1=-2, axis2=-1)[..., :n]
    if not vectors:
        return np.sort(w, axis=-1) * scale[..., 0], None, sweeps
    assert v is not None
    v = v[..., :n, :n]
    v = v / np.sqrt(np.sum(v * v, axis=-2))[..., None, :]  # (c^2 + s^2 is a little off 1: see _one_sided)
    w, v = _sorted_by(w, w, (v,))
    return w * scale[..., 0], v, sweeps


def _hermitian_svd(a, compute_uv: bool):
    """NumPy's svd(hermitian=True): from eigh."""
    if not compute_uv:
        w = np.abs(eigvalsh(a))
        return -np.sort(-w, axis=-1)
    w, v = eigh(a)
    s, u, signs = _sorted_by(-np.abs(w), np.abs(w), (v, np.where(w < 0, -1, 1).astype(w.dtype)[..., None, :]))
    return u, s, (u * signs).swapaxes(-1, -2)


# --- svd: one-sided Jacobi ------------------------------------------------------------------------------------------


def _one_sided(a, vectors: bool, full: bool):
    """(s, u, v, sweeps) of the tall a (..., m, n), m >= n: a = u diag(s) v^T, s descending (..., n); u (..., m, m)
    where `full`, else (..., m, n); v (..., n, n). u and v are None where not `vectors`."""
    m, n = a.shape[-2:]
    if n == 0:
        s = a.sum(axis=-2)
        if not vectors:
            return s, None, None, 0
        return s, _identity(a, m)[..., : m if full else 0], a[..., :0, :0], 0
    a, scale = _scaled(a)
    size = n + n % 2  # (an odd count gets a zero column: its inner products are 0, so it is never rotated)
    work = _padded(a, False, n % 2 == 1)
    v = _identity(work, size)
    eps = float(np.finfo(a.dtype).eps)
    tolerance = eps * math.sqrt(m)
    most = MAX_SWEEPS[np.dtype(a.dtype)]
    j = _arange(work, size)
    off = j[:, None] != j[None, :]

    def unconverged(work, v, sweep):
        gram = work.swapaxes(-1, -2) @ work
        norms = np.sqrt(np.diagonal(gram, axis1=-2, axis2=-1))
        bound = tolerance * norms[..., :, None] * norms[..., None, :]
        return np.any(off & (np.abs(gram) > bound)) & (sweep < most)

    def round_(r, work, v):
        partner = _partners(work, r, size)
        first = j < partner
        other = np.take(work, partner, axis=-1)
        norms = np.sum(work * work, axis=-2)
        cross = np.sum(work * other, axis=-2)
        diff = np.take(norms, partner, axis=-1) - norms
        diff = np.where(first, diff, -diff)
        c, s, _ = _rotation(diff, cross, first)
        work = work * c[..., None, :] + other * s[..., None, :]
        v = v * c[..., None, :] + np.take(v, partner, axis=-1) * s[..., None, :]
        return work, v

    def sweep_(work, v, sweep):
        work, v, _ = loops.for_range(
            (0, size - 1), round_, (work, v), ("work", "v"), None, (), "linalg_jacobi.svd round"
        )
        return work, v, sweep + 1

    work, v, sweeps = loops.while_true(
        unconverged, sweep_, (work, v, np.int32(0)), ("work", "v", "sweep"), (), "linalg_jacobi.svd sweep"
    )
    work, v = work[..., :n], v[..., :n, :n]
    # the rotations' rounding leaves c^2 + s^2 a little off 1, the same way each time (c rounds to 1 where t is
    # small): the columns of v and work grow alike, about n eps over the sweeps, and work = a v stays true, so
    # s is the ratio of their lengths and v's columns are made unit again
    lengths = np.sqrt(np.sum(v * v, axis=-2))
    v = v / lengths[..., None, :]
    s = np.sqrt(np.sum(work * work, axis=-2)) / lengths
    if not vectors:
        return -np.sort(-s, axis=-1) * scale[..., 0], None, None, sweeps
    s, work, v = _sorted_by(-s, s, (work, v))
    # a column this small (a is scaled to 1) has lost its direction to underflow in the inner products: s = 0
    found = s > math.sqrt(float(np.finfo(a.dtype).tiny)) / eps
    u = np.where(found[..., None, :], work / np.where(found, s, 1)[..., None, :], 0)
    u = _completed(u, found, m if full else n)
    return np.where(found, s, 0) * scale[..., 0], u, v, sweeps


def _completed(u, found, width: int):
    """u (..., m, k) whose columns where `found` (a prefix of them) are orthonormal, the others 0, as an
    orthonormal (..., m, width) whose first columns are the found ones: the others from the identity's columns,
    each made orthogonal to the columns so far (Gram-Schmidt, twice) and kept where enough of it is left."""
    m, k = u.shape[-2:]
    if width > k:
        u = np.pad(u, [(0, 0)] * (u.ndim - 1) + [(0, width - k)])
    rank = np.sum(found, axis=-1, dtype=np.int32)  # (a prefix of each row)
    rows, cols = _arange(u, m), _arange(u, width)
    # of the m candidates, one with at least 1/m of its square norm left comes before the columns run out
    least = 0.5 / math.sqrt(m)

    def missing(u, i, filled):
        return np.any(rank + filled < width) & (i < m)

    def step(u, i, filled):
        candidate = np.broadcast_to((rows == i).astype(u.dtype), u.shape[:-1])
        for _ in range(2):
            candidate = candidate - np.sum(u * np.sum(u * candidate[..., :, None], axis=-2)[..., None, :], axis=-1)
        length = np.sqrt(np.sum(candidate * candidate, axis=-1))
        slot = rank + filled
        kept = (length > least) & (slot < width)
        column = candidate / np.where(kept, length, 1)[..., None]
        u = np.where(kept[..., None, None] & (cols == slot[..., None])[..., None, :], column[..., :, None], u)
        return u, i + 1, filled + kept.astype(np.int32)

    u, _, _ = loops.while_true(
        missing, step, (u, np.int32(0), np.zeros_like(rank)), ("u", "i", "filled"), (), "linalg_jacobi.svd basis"
    )
    return u
