"""Linear algebra as scientists write it with np.linalg: Gaussian processes, least squares, PCA, Kalman filters,
Newton steps. Each says where it comes from. (np.linalg runs as NumPy's LAPACK calls on the host, the code around
it compiled: issue 48.)"""
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
]
