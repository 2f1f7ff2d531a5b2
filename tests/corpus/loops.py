"""Loop-style programs as their authors wrote them: npbench's NumPy versions of PolyBench kernels (time-stepped
stencils, Gram-Schmidt, LU, triangular solves; https://github.com/spcl/npbench, paraphrased from its numpy
implementations), Numba's documentation examples of loops over elements, a CSR matrix-vector product written
with loops, convolution layers written with loops, and a convergence loop. Their loops are compiled as loops where
tracejit can (numpy/loops.py); the others run step by step, as before."""
from __future__ import annotations

import numpy as np

from . import program


def jacobi_2d(TSTEPS, A, B):  # npbench jacobi_2d (numpy)
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def heat_3d(TSTEPS, A, B):  # npbench heat_3d (numpy)
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1]) +
            0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]) +
            0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2]) +
            A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1]) +
            0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1]) +
            0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, 0:-2]) +
            B[1:-1, 1:-1, 1:-1])


def fdtd_2d(TMAX, ex, ey, hz, _fict_):  # npbench fdtd_2d (numpy)
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def seidel_2d(TSTEPS, N, A):  # npbench seidel_2d (numpy)
    for t in range(0, TSTEPS - 1):
        for i in range(1, N - 1):
            A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:] + A[i + 1, :-2] +
                           A[i + 1, 1:-1] + A[i + 1, 2:])
            for j in range(1, N - 1):
                A[i, j] += A[i, j - 1]
                A[i, j] /= 9.0


def gramschmidt(A):  # npbench gramschmidt (numpy)
    Q = np.zeros_like(A)
    R = np.zeros((A.shape[1], A.shape[1]), dtype=A.dtype)
    for k in range(A.shape[1]):
        nrm = np.dot(A[:, k], A[:, k])
        R[k, k] = np.sqrt(nrm)
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, A.shape[1]):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] -= Q[:, k] * R[k, j]
    return Q, R


def lu(A):  # npbench lu (numpy): slices bounded by the loop indices
    for i in range(A.shape[0]):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, A.shape[0]):
            A[i, j] -= A[i, :i] @ A[:i, j]


def trisolv(L, x, b):  # npbench trisolv (numpy)
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def cholesky(A):  # npbench cholesky (numpy)
    A[0, 0] = np.sqrt(A[0, 0])
    for i in range(1, A.shape[0]):
        for j in range(i):
            A[i, j] -= np.dot(A[i, :j], A[j, :j])
            A[i, j] /= A[j, j]
        A[i, i] -= np.dot(A[i, :i], A[i, :i])
        A[i, i] = np.sqrt(A[i, i])


def ludcmp(A, b):  # npbench ludcmp (numpy): LU, then forward and backward substitution
    x = np.zeros_like(b)
    y = np.zeros_like(b)
    for i in range(A.shape[0]):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, A.shape[0]):
            A[i, j] -= A[i, :i] @ A[:i, j]
    for i in range(A.shape[0]):
        y[i] = b[i] - A[i, :i] @ y[:i]
    for i in range(A.shape[0] - 1, -1, -1):
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return x, y


def symm(alpha, beta, C, A, B):  # npbench symm (numpy): column slices bounded by the row
    temp2 = np.empty((C.shape[1], ), dtype=C.dtype)
    C *= beta
    for i in range(C.shape[0]):
        for j in range(C.shape[1]):
            C[:i, j] += alpha * B[i, j] * A[i, :i]
            temp2[j] = B[:i, j] @ A[i, :i]
        C[i, :] += alpha * B[i, :] * A[i, i] + alpha * temp2


def covariance(M, float_n, data):  # npbench covariance (numpy): a row of products per step, bounded by the index
    mean = np.mean(data, axis=0)
    data -= mean
    cov = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / (float_n - 1.0)

    return cov


def correlation(M, float_n, data):  # npbench correlation (numpy)
    mean = np.mean(data, axis=0)
    stddev = np.std(data, axis=0)
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(float_n) * stddev
    corr = np.eye(M, dtype=data.dtype)
    for i in range(M - 1):
        corr[i + 1:M, i] = corr[i, i + 1:M] = data[:, i] @ data[:, i + 1:M]

    return corr


def durbin(r):  # npbench durbin (numpy): a Toeplitz solve, np.flip of slices bounded by the index
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]

    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha

    return y


def spmv(A_row, A_col, A_val, x):  # npbench spmv (numpy): each row's columns a slice, the vector gathered by them
    y = np.empty(A_row.size - 1, A_val.dtype)

    for i in range(A_row.size - 1):
        cols = A_col[A_row[i]:A_row[i + 1]]
        vals = A_val[A_row[i]:A_row[i + 1]]
        y[i] = vals @ x[cols]

    return y


def conv2d_nhwc(input, weights):  # npbench deep_learning/conv2d_bias (numpy), its `conv2d` (renamed here: the
    K = weights.shape[0]  # Assuming square kernel                    # corpus has a conv2d of its own)
    N = input.shape[0]
    H_out = input.shape[1] - K + 1
    W_out = input.shape[2] - K + 1
    C_out = weights.shape[3]
    output = np.empty((N, H_out, W_out, C_out), dtype=np.float32)

    for i in range(H_out):
        for j in range(W_out):
            output[:, i, j, :] = np.sum(
                input[:, i:i + K, j:j + K, :, np.newaxis] *
                weights[np.newaxis, :, :, :],
                axis=(1, 2, 3),
            )

    return output


def conv2d_bias(input, weights, bias):
    return conv2d_nhwc(input, weights) + bias


def match(b1, b2):
    if b1 + b2 == 3:
        return 1
    else:
        return 0


def nussinov(N, seq):  # npbench nussinov (numpy): a dynamic-programming table over elements, a helper
    table = np.zeros((N, N), np.int32)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + match(seq[i], seq[j]))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def adi(TSTEPS, N, u):  # npbench adi (numpy): columns and rows the loop index picks, partial slices of them
    v = np.empty(u.shape, dtype=u.dtype)
    p = np.empty(u.shape, dtype=u.dtype)
    q = np.empty(u.shape, dtype=u.dtype)

    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)

    a = -mul1 / 2.0
    b = 1.0 + mul2
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d

    for t in range(1, TSTEPS + 1):
        v[0, 1:N - 1] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = v[0, 1:N - 1]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -c / (a * p[1:N - 1, j - 1] + b)
            q[1:N - 1, j] = (-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1] - f * u[j, 2:N] -
                             a * q[1:N - 1, j - 1]) / (a * p[1:N - 1, j - 1] + b)
        v[N - 1, 1:N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, 1:N - 1] = p[1:N - 1, j] * v[j + 1, 1:N - 1] + q[1:N - 1, j]

        u[1:N - 1, 0] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = u[1:N - 1, 0]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -f / (d * p[1:N - 1, j - 1] + e)
            q[1:N - 1, j] = (-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j] - c * v[2:N, j] -
                             d * q[1:N - 1, j - 1]) / (d * p[1:N - 1, j - 1] + e)
        u[1:N - 1, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[1:N - 1, j] = p[1:N - 1, j] * u[1:N - 1, j + 1] + q[1:N - 1, j]


def floyd_warshall(path):  # npbench floyd_warshall (numpy)
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))


def sum2d(arr):  # Numba's documentation, "A ~5 minute guide to Numba"
    M, N = arr.shape
    result = 0.0
    for i in range(M):
        for j in range(N):
            result += arr[i, j]
    return result


def csr_matvec(indptr, indices, data, x):  # a sparse product as written for numba.njit
    n = indptr.shape[0] - 1
    y = np.zeros(n, dtype=data.dtype)
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            y[i] += data[k] * x[indices[k]]
    return y


def laplace_until_converged(u, tol):  # Jacobi iteration to a tolerance, as in numerical-methods courses
    udiff = 1.0
    while udiff > tol:
        un = u.copy()
        u[1:-1, 1:-1] = 0.25 * (un[2:, 1:-1] + un[:-2, 1:-1] + un[1:-1, 2:] + un[1:-1, :-2])
        udiff = np.sum(np.abs(u - un)) / np.sum(np.abs(u))
    return u


def bubblesort(X):  # Numba's examples/bubblesort.py
    N = len(X)
    for end in range(N, 1, -1):
        for i in range(end - 1):
            cur = X[i]
            if cur > X[i + 1]:
                tmp = X[i]
                X[i] = X[i + 1]
                X[i + 1] = tmp


def pairwise_numba(X):  # pairwise distances as written for Numba (J. VanderPlas, "Numba vs. Cython")
    M = X.shape[0]
    N = X.shape[1]
    D = np.empty((M, M), dtype=np.float64)
    for i in range(M):
        for j in range(M):
            d = 0.0
            for k in range(N):
                tmp = X[i, k] - X[j, k]
                d += tmp * tmp
            D[i, j] = np.sqrt(d)
    return D


def floyd_warshall_loops(dist):  # all-pairs shortest paths over elements, as written for numba.njit
    n = dist.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if dist[i, k] + dist[k, j] < dist[i, j]:
                    dist[i, j] = dist[i, k] + dist[k, j]
    return dist


def mandel(x, y, max_iters):  # Numba's documentation (the Mandelbrot example)
    i = 0
    c = complex(x, y)
    z = 0.0j
    for i in range(max_iters):
        z = z * z + c
        if (z.real * z.real + z.imag * z.imag) >= 4:
            return i
    return 255


def create_fractal(min_x, max_x, min_y, max_y, image, iters):  # Numba's documentation, around mandel
    height = image.shape[0]
    width = image.shape[1]
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height
    for x in range(width):
        real = min_x + x * pixel_size_x
        for y in range(height):
            imag = min_y + y * pixel_size_y
            color = mandel(real, imag, iters)
            image[y, x] = color
    return image


def life(board, steps):  # Conway's game of life with loops over cells and a 3 x 3 window, as taught
    n, m = board.shape
    for _ in range(steps):
        new = board.copy()
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                s = board[i - 1:i + 2, j - 1:j + 2].sum() - board[i, j]
                if board[i, j] == 1 and (s < 2 or s > 3):
                    new[i, j] = 0
                elif board[i, j] == 0 and s == 3:
                    new[i, j] = 1
        board = new
    return board


def conv2d(x, w, b):  # a convolution layer with loops over output channels, input channels and kernel offsets
    N, C, H, W = x.shape  # (the common idiom of NumPy "CNN from scratch" tutorials: each step a shifted slice)
    F, _, KH, KW = w.shape
    out = np.zeros((N, F, H - KH + 1, W - KW + 1), dtype=x.dtype)
    for f in range(F):
        for c in range(C):
            for i in range(KH):
                for j in range(KW):
                    out[:, f] += w[f, c, i, j] * x[:, c, i:i + H - KH + 1, j:j + W - KW + 1]
        out[:, f] += b[f]
    return out


def cnn_forward(x, w1, b1, w2, b2):  # a small CNN's forward pass: conv2d above, ReLU, 2x2 max pool, a dense layer
    out = conv2d(x, w1, b1)
    out = np.maximum(out, 0)
    N, F, H, W = out.shape
    out = out.reshape(N, F, H // 2, 2, W // 2, 2).max(axis=(3, 5))
    return out.reshape(N, -1) @ w2 + b2


def conv_forward_naive(x, w, b, conv_param):  # CS231n assignment 2, layers.py: a loop over every output element
    out = None
    stride, pad = conv_param['stride'], conv_param['pad']
    N, C, H, W = x.shape
    F, C, HH, WW = w.shape
    H_out = 1 + (H + 2 * pad - HH) // stride
    W_out = 1 + (W + 2 * pad - WW) // stride
    x_pad = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode='constant')
    out = np.zeros((N, F, H_out, W_out))
    for n in range(N):
        for f in range(F):
            for i in range(H_out):
                for j in range(W_out):
                    out[n, f, i, j] = np.sum(x_pad[n, :, i * stride:i * stride + HH,
                                                   j * stride:j * stride + WW] * w[f]) + b[f]
    cache = (x, w, b, conv_param)
    return out, cache


# Loops over an array itself, not over range(): its rows or elements, enumerate and zip of them.

def crc16(data, poly=0x8408):  # npbench crc16 (numpy), adapted there from a public gist: a loop over bytes
    '''
    CRC-16-CCITT Algorithm
    '''
    crc = 0xFFFF
    for b in data:
        cur_byte = 0xFF & b
        for _ in range(0, 8):
            if (crc & 0x0001) ^ (cur_byte & 0x0001):
                crc = (crc >> 1) ^ poly
            else:
                crc >>= 1
            cur_byte >>= 1
    crc = (~crc & 0xFFFF)
    crc = (crc << 8) | ((crc >> 8) & 0xFF)

    return crc & 0xFFFF


def row_norms(A):  # a loop over the rows of a matrix, as a newcomer from another language writes it
    out = np.empty(A.shape[0])
    for i, row in enumerate(A):
        out[i] = np.sqrt(np.sum(row * row))
    return out


def polyline_length(xs, ys):  # zip of two coordinate arrays, consecutive points
    total = 0.0
    px, py = xs[0], ys[0]
    for x, y in zip(xs[1:], ys[1:]):
        total += np.hypot(x - px, y - py)
        px, py = x, y
    return total


def horner(coeffs, x):  # a polynomial by Horner's rule, a loop over its coefficients
    result = np.zeros_like(x)
    for c in coeffs:
        result = result * x + c
    return result


# numpy-benchmarks' local_maxima (serge-sans-paille/numpy-benchmarks, from parakeet's nd_local_maxima): loops
# over np.ndindex, a mode function passed as a default argument, a generator over zip() of index tuples
def wrap(pos, offset, bound):
    return ( pos + offset ) % bound

def clamp(pos, offset, bound):
    return min(bound-1,max(0,pos+offset))

def reflect(pos, offset, bound):
    idx = pos+offset
    return min(2*(bound-1)-idx,max(idx,-idx))


def local_maxima(data, mode=wrap):
  wsize = data.shape
  result = np.ones(data.shape, bool)
  for pos in np.ndindex(data.shape):
    myval = data[pos]
    for offset in np.ndindex(wsize):
      neighbor_idx = tuple(mode(p, o-w//2, w) for (p, o, w) in zip(pos, offset, wsize))
      result[pos] &= (data[neighbor_idx] <= myval)
  return result


def _stencil(n, shape=None):
    shape = shape or (n, n)

    def make(rng, dt):
        return (5, rng.random(shape).astype(dt), rng.random(shape).astype(dt))
    return make


def _fdtd(rng, dt):
    nx, ny, tmax = 10, 12, 6
    return (tmax, rng.random((nx, ny)).astype(dt), rng.random((nx, ny)).astype(dt),
            rng.random((nx, ny)).astype(dt), rng.random(tmax).astype(dt))


def _csr(rng, dt):
    dense = rng.random((9, 7)) * (rng.random((9, 7)) < 0.4)
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
    return indptr, np.nonzero(dense)[1].astype(np.int32), dense[dense != 0].astype(dt), rng.random(7).astype(dt)


def _normal(*shapes):
    def make(rng, dt):
        return tuple(rng.standard_normal(s).astype(dt) for s in shapes)
    return make


def _plate(rng, dt):
    u = np.zeros((12, 12), dt)
    u[0, :] = 1
    return u, 1e-3


def swap_rows(v, i, j):  # a textbook's helper: a vector's elements, or a matrix's rows by a list of indices
    if len(v.shape) == 1:
        v[i], v[j] = v[j], v[i]
    else:
        v[[i, j], :] = v[[j, i], :]


def lu_scaled_pivoting(a, tol=1.0e-9):  # LU with scaled row pivoting, as numerical-methods textbooks write it
    n = len(a)
    seq = np.array(range(n))
    s = np.zeros(n)
    for i in range(n):
        s[i] = max(abs(a[i, :]))
    for k in range(0, n - 1):
        p = np.argmax(np.abs(a[k:n, k]) / s[k:n]) + k
        if abs(a[p, k]) < tol:
            raise ValueError("Matrix is singular")
        if p != k:
            swap_rows(s, k, p)
            swap_rows(a, k, p)
            swap_rows(seq, k, p)
        for i in range(k + 1, n):
            if a[i, k] != 0.0:
                lam = a[i, k] / a[k, k]
                a[i, k + 1:n] = a[i, k + 1:n] - lam * a[k, k + 1:n]
                a[i, k] = lam
    return a, seq


def _spd(rng, n, dt):
    """A symmetric positive definite matrix, well conditioned."""
    A = rng.random((n, n))
    return (A @ A.T + n * np.eye(n)).astype(dt)


def _lower(rng, dt):
    L = np.tril(rng.random((8, 8))).astype(dt) + 4 * np.eye(8, dtype=dt)
    return L, np.zeros(8, dt), rng.random(8).astype(dt)


PROGRAMS = [
    program(jacobi_2d, _stencil(12), ("float64", "float32")),
    program(heat_3d, _stencil(6, (6, 6, 6)), ("float64", "float32")),
    program(fdtd_2d, _fdtd, ("float64", "float32")),
    program(seidel_2d, lambda rng, dt: (3, 8, rng.random((8, 8)).astype(dt)), ("float64", "float32")),
    program(gramschmidt, lambda rng, dt: (rng.random((8, 6)).astype(dt) + np.eye(8, 6, dtype=dt),), ("float64",)),
    program(lu, lambda rng, dt: (rng.random((6, 6)).astype(dt) + 6 * np.eye(6, dtype=dt),), ("float64",)),
    program(trisolv, _lower, ("float64", "float32")),
    program(cholesky, lambda rng, dt: (_spd(rng, 7, dt),), ("float64", "float32")),
    program(ludcmp, lambda rng, dt: (_spd(rng, 7, dt), rng.random(7).astype(dt)), ("float64", "float32")),
    program(symm, lambda rng, dt: (1.5, 1.2, rng.random((6, 5)).astype(dt), rng.random((6, 6)).astype(dt),
                                   rng.random((6, 5)).astype(dt)), ("float64", "float32")),
    program(covariance, lambda rng, dt: (9, 12.0, rng.random((12, 9)).astype(dt)), ("float64", "float32")),
    program(correlation, lambda rng, dt: (9, 12.0, rng.random((12, 9)).astype(dt)), ("float64", "float32")),
    # (npbench's r = N + 1 - i is far from an autocorrelation: float32's last bits swing the answer; an AR(1)'s is
    # what the solve is for)
    program(durbin, lambda rng, dt: (0.6 ** np.arange(1, 13, dtype=dt) * (1 + 0.1 * rng.random(12).astype(dt)),),
            ("float64", "float32")),
    program(spmv, lambda rng, dt: _csr(rng, dt), ("float64", "float32")),
    program(conv2d_bias, _normal((2, 7, 6, 3), (2, 2, 3, 4), (4,)), ("float32",)),
    program(nussinov, lambda rng, dt: (10, rng.integers(0, 4, 10).astype(dt)), ("int32", "int64")),
    program(adi, lambda rng, dt: (6, 9, rng.random((9, 9)).astype(dt)), ("float64", "float32")),
    program(floyd_warshall, lambda rng, dt: (rng.integers(1, 10, (7, 7)).astype(dt),), ("float64", "int32")),
    program(sum2d, lambda rng, dt: (rng.random((5, 7)).astype(dt),), ("float64",)),
    program(csr_matvec, _csr, ("float64", "float32")),
    program(laplace_until_converged, _plate, ("float64", "float32")),
    program(bubblesort, lambda rng, dt: (rng.random(12).astype(dt),), ("float64", "float32", "int32")),
    program(pairwise_numba, lambda rng, dt: (rng.random((7, 3)).astype(dt),), ("float64", "float32")),
    program(floyd_warshall_loops, lambda rng, dt: (rng.integers(1, 10, (7, 7)).astype(dt),), ("float64", "int32")),
    program(create_fractal, lambda rng, dt: (-2.0, 1.0, -1.0, 1.0, np.zeros((6, 9), dt), 20), ("uint8",)),
    program(conv2d, _normal((2, 3, 8, 7), (4, 3, 3, 3), 4), ("float32",)),
    program(cnn_forward, _normal((2, 3, 10, 8), (4, 3, 3, 3), 4, (48, 5), 5), ("float32",)),
    program(conv_forward_naive,
            lambda rng, dt: _normal((2, 3, 6, 5), (4, 3, 3, 3), 4)(rng, dt) + ({"stride": 1, "pad": 1},), ("float64",)),
    program(life, lambda rng, dt: ((rng.random((12, 10)) < 0.4).astype(dt), 3), ("int32", "int64", "uint8")),
    program(lu_scaled_pivoting, lambda rng, dt: (rng.uniform(-1, 1, (9, 9)).astype(dt),), ("float64", "float32")),
    program(crc16, lambda rng, dt: (rng.integers(0, 256, 40).astype(dt),), ("uint8", "int32")),
    program(row_norms, lambda rng, dt: (rng.random((9, 5)).astype(dt),), ("float64",)),
    program(polyline_length, lambda rng, dt: (rng.random(30).astype(dt), rng.random(30).astype(dt)),
            ("float64", "float32")),
    program(horner, lambda rng, dt: (rng.random(7).astype(dt), rng.random(20).astype(dt)), ("float64", "float32")),
    program(local_maxima, lambda rng, dt: (rng.integers(0, 9, (4, 3, 2, 2)).astype(dt),), ("float64", "int32")),
]
