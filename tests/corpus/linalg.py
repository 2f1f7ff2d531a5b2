"""Linear algebra as scientists write it with np.linalg: Gaussian processes, least squares, PCA, Kalman filters,
Newton steps, whitening, rigid alignment, Markov chains, finite elements. Each says where it comes from.
(np.linalg is NumPy's LAPACK on the numba device and generated kernels on the others, the code around it
compiled: issue 48.)"""
from __future__ import annotations

import numpy as np

from . import program


def gp_predict(X, y, Xs, noise, length_scale):  # Rasmussen & Williams, GPML Algorithm 2.1, with an RBF kernel
    def k(A, B):
        d = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2 * A @ B.T
        return np.exp(-0.5 * d / length_scale**2)
    K = k(X, X)
    L = np.linalg.cholesky(K + noise**2 * np.eye(len(X)))
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    Ks = k(X, Xs)
    mean = Ks.T @ alpha
    v = np.linalg.solve(L, Ks)
    var = np.diag(k(Xs, Xs)) - np.sum(v**2, axis=0)
    log_ml = -0.5 * y @ alpha - np.sum(np.log(np.diag(L))) - len(X) / 2 * np.log(2 * np.pi)
    return mean, var, log_ml


def ols_fit(X, y):  # ordinary least squares with standard errors, as regression tutorials write it out
    X1 = np.column_stack([np.ones(len(X)), X])
    beta = np.linalg.inv(X1.T @ X1) @ X1.T @ y
    resid = y - X1 @ beta
    sigma2 = resid @ resid / (len(y) - X1.shape[1])
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(X1.T @ X1)))
    return beta, se


def pca(X, n_components):  # scikit-learn's PCA.fit_transform (full SVD): centre, SVD, svd_flip's signs
    Xc = X - X.mean(axis=0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    max_abs_cols = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[max_abs_cols, range(U.shape[1])])
    U *= signs
    Vt *= signs[:, np.newaxis]
    explained_variance = S**2 / (X.shape[0] - 1)
    return U[:, :n_components] * S[:n_components], explained_variance[:n_components]


def kalman_step(x, P, z, F, H, Q, R):  # the textbook Kalman filter: predict, then update
    x = F @ x
    P = F @ P @ F.T + Q
    S = H @ P @ H.T + R
    K = P @ H.T @ np.linalg.inv(S)
    x = x + K @ (z - H @ x)
    P = (np.eye(len(x)) - K @ H) @ P
    return x, P


def ridge(X, y, alpha):  # scikit-learn's Ridge(solver="cholesky") closed form: (X'X + alpha I) w = X'y
    A = X.T @ X + alpha * np.eye(X.shape[1])
    return np.linalg.solve(A, X.T @ y)


def cholesky2(A):  # npbench's cholesky2 (its NumPy version)
    A[:] = np.linalg.cholesky(A) + np.triu(A, k=1)


def irls_step(X, y, w):  # Newton's method for logistic regression (iteratively reweighted least squares)
    p = 1 / (1 + np.exp(-X @ w))
    grad = X.T @ (p - y)
    H = X.T @ (X * (p * (1 - p))[:, None])
    return w - np.linalg.solve(H, grad)


def mvn_logpdf(x, mean, cov):  # the multivariate normal log density written out (scipy.stats' formula)
    d = x - mean
    sign, logdet = np.linalg.slogdet(cov)
    maha = np.sum(d @ np.linalg.inv(cov) * d, axis=1)
    return -0.5 * (len(mean) * np.log(2 * np.pi) + logdet + maha)


def zca_whitening(X, epsilon):  # ZCA whitening of image patches (the CIFAR-10 preprocessing recipe)
    X = X - X.mean(axis=0)
    sigma = X.T @ X / X.shape[0]
    eigenvalues, eigenvectors = np.linalg.eigh(sigma)
    zca = eigenvectors @ np.diag(1.0 / np.sqrt(eigenvalues + epsilon)) @ eigenvectors.T
    return X @ zca


def rigid_transform_3D(A, B):  # the Kabsch algorithm as Nghia Ho's widely copied rigid_transform_3D writes it
    centroid_A = np.mean(A, axis=1).reshape(-1, 1)
    centroid_B = np.mean(B, axis=1).reshape(-1, 1)
    Am = A - centroid_A
    Bm = B - centroid_B
    H = Am @ np.transpose(Bm)
    U, S, Vt = np.linalg.svd(H)
    R = Vt.T @ U.T
    if np.linalg.det(R) < 0:  # special reflection case
        Vt[2, :] *= -1
        R = Vt.T @ U.T
    t = -R @ centroid_A + centroid_B
    return R, t


def markov_stationary(P, steps):  # a Markov chain's long-run distribution by powers of its transition matrix
    Pn = np.linalg.matrix_power(P, steps)
    return Pn[0], np.linalg.multi_dot([Pn, P, P])


def qr_least_squares(A, b):  # least squares through the QR factorisation (Trefethen & Bau, Algorithm 11.2)
    Q, R = np.linalg.qr(A)
    x = np.linalg.solve(R, Q.T @ b)
    return x, np.linalg.norm(A @ x - b)


def fem_jacobians(nodes, elements):  # linear triangles: each element's Jacobian, its determinant and inverse
    xy = nodes[elements]                          # (n_elements, 3, 2)
    J = np.stack([xy[:, 1] - xy[:, 0], xy[:, 2] - xy[:, 0]], axis=1)
    detJ = np.linalg.det(J)
    invJ = np.linalg.inv(J)
    dN = np.array([[-1.0, -1.0], [1.0, 0.0], [0.0, 1.0]]) @ invJ  # shape-function gradients, per element
    return 0.5 * np.abs(detJ), dN


def newton_system(x0, iterations):  # Newton's method for two equations (circle meets parabola)
    x = x0.copy()
    for _ in range(iterations):
        F = np.array([x[0] ** 2 + x[1] ** 2 - 4.0, x[1] - x[0] ** 2])
        J = np.array([[2 * x[0], 2 * x[1]], [-2 * x[0], 1.0]])
        x = x - np.linalg.solve(J, F)
    return x


def _spd(rng, n, dt):
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(dt)


def _normal(*shapes):
    return lambda rng, dt: tuple(rng.standard_normal(s).astype(dt) for s in shapes)


def _kalman(rng, dt):
    n, m = 4, 2
    F = (np.eye(n) + 0.1 * np.eye(n, k=1)).astype(dt)
    H = rng.standard_normal((m, n)).astype(dt)
    return (rng.standard_normal(n).astype(dt), _spd(rng, n, dt), rng.standard_normal(m).astype(dt), F, H,
            (0.01 * np.eye(n)).astype(dt), (0.1 * np.eye(m)).astype(dt))


def _logistic(rng, dt):
    X = rng.standard_normal((60, 3)).astype(dt)
    return X, (rng.random(60) < 0.5).astype(dt), (0.1 * rng.standard_normal(3)).astype(dt)


def _points(rng, dt):
    A = rng.standard_normal((3, 12))
    angle = 0.7
    R = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    return A.astype(dt), (R @ A + np.array([[1.0], [2.0], [3.0]]) + 0.01 * rng.standard_normal((3, 12))).astype(dt)


def _markov(rng, dt):
    P = rng.random((6, 6)) + 0.1
    return (P / P.sum(axis=1, keepdims=True)).astype(dt), 20


def _mesh(rng, dt):
    g = np.linspace(0.0, 1.0, 6)
    nodes = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2) + 0.02 * rng.standard_normal((36, 2))
    quads = np.array([[i * 6 + j, i * 6 + j + 1, (i + 1) * 6 + j] for i in range(5) for j in range(5)])
    return nodes.astype(dt), quads


def cosine_similarity(X, Y):  # pairwise cosine similarity in NumPy 2's array-API spelling (scikit-learn's
    # array-API helpers write it with vector_norm and matrix_transpose)
    Xn = X / np.linalg.vector_norm(X, axis=1, keepdims=True)
    Yn = Y / np.linalg.vector_norm(Y, axis=1, keepdims=True)
    return Xn @ np.matrix_transpose(Yn)


def relative_residuals(A, x, b):  # ||A x - b|| / (||A|| ||x||) per system, batched, array-API style
    r = np.vecdot(A, x[..., None, :]) - b
    return np.linalg.vector_norm(r, axis=-1) / (np.linalg.matrix_norm(A) * np.linalg.vector_norm(x, axis=-1))


BOTH = ("float64", "float32")
PROGRAMS = [
    program(gp_predict, lambda rng, dt: _normal((15, 2), 15, (6, 2))(rng, dt) + (0.5, 1.0), BOTH),   # (cond ~60)
    program(ols_fit, _normal((40, 3), 40), BOTH),
    program(pca, _normal((30, 5)), BOTH, static={"n_components": 2}),
    program(kalman_step, _kalman, BOTH),
    program(ridge, lambda rng, dt: _normal((40, 5), 40)(rng, dt) + (0.5,), BOTH),
    program(cholesky2, lambda rng, dt: (_spd(rng, 8, dt),), BOTH),
    program(irls_step, _logistic, BOTH),
    program(mvn_logpdf, lambda rng, dt: _normal((10, 3), 3)(rng, dt) + (_spd(rng, 3, dt),), BOTH),
    # (an eigendecomposition by another algorithm than LAPACK's on the GPU-API devices: a few roundings of the whole)
    program(zca_whitening, lambda rng, dt: (rng.standard_normal((200, 6)).astype(dt) @ _spd(rng, 6, dt), 0.1), BOTH,
            reordered_atol={"float32": 1e-5, "float64": 1e-13}),
    program(rigid_transform_3D, _points, BOTH),
    program(markov_stationary, _markov, BOTH),
    program(qr_least_squares, _normal((30, 4), 30), BOTH),
    program(fem_jacobians, _mesh, BOTH),
    program(newton_system, lambda rng, dt: (np.array([1.0, 1.5], dt), 8), BOTH),
    program(cosine_similarity, _normal((12, 5), (7, 5)), BOTH),
    program(relative_residuals, _normal((6, 4, 4), (6, 4), (6, 4)), BOTH),
]
