"""NumPy benchmark kernels from serge-sans-paille/numpy-benchmarks (each from a Stack Overflow answer,
a blog or the Parakeet testbed, as the file's #from line says), with the benchmark's own setup
shrunk to a few hundred elements. float64 as the setups make them; float32 too where nothing in the
program depends on the width, so the devices without float64 run them."""
from __future__ import annotations

import math

import numpy as np
from numpy import power, tanh, zeros

from . import program


def arc_distance(theta_1, phi_1, theta_2, phi_2):
    """
    Calculates the pairwise arc distance between all points in vector a and b.
    """
    temp = np.sin((theta_2-theta_1)/2)**2+np.cos(theta_1)*np.cos(theta_2)*np.sin((phi_2-phi_1)/2)**2
    distance_matrix = 2 * (np.arctan2(np.sqrt(temp), np.sqrt(1-temp)))
    return distance_matrix


def rosen(x):
    t0 = 100 * (x[1:] - x[:-1] ** 2) ** 2
    t1 = (1 - x[:-1]) ** 2
    return np.sum(t0 + t1)


def l2norm(x):
    return np.sqrt(np.sum(np.abs(x)**2, 1))


def l1norm(x, y):
    return np.sum(np.abs(x[:, None, :] - y), axis=-1)


def multiple_sum(array):
    rows = array.shape[0]
    cols = array.shape[1]

    out = np.zeros((rows, cols))

    for row in range(0, rows):
        out[row, :] = np.sum(array - array[row, :], 0)

    return out


def harris(I):
    m, n = I.shape
    dx = (I[1:, :] - I[:m-1, :])[:, 1:]
    dy = (I[:, 1:] - I[:, :n-1])[1:, :]
    A = dx * dx
    B = dy * dy
    C = dx * dy
    tr = A + B
    det = A * B - C * C
    k = 0.05
    return det - k * tr * tr


def laplacien(image):
    out_image = np.abs(4*image[1:-1, 1:-1] -
                       image[0:-2, 1:-1] - image[2:, 1:-1] -
                       image[1:-1, 0:-2] - image[1:-1, 2:])
    valmax = np.max(out_image)
    valmax = max(1., valmax)+1.E-9
    out_image /= valmax
    return out_image


def log_likelihood(data, mean, sigma):
    s = (data - mean) ** 2 / (2 * (sigma ** 2))
    pdfs = np.exp(- s)
    pdfs /= np.sqrt(2 * np.pi) * sigma
    return np.log(pdfs).sum()


def vibr_energy(harmonic, anharmonic, i):
    return np.exp(-harmonic * i - anharmonic * (i ** 2))


def euclidean_distance_square(x1, x2):
    return -2*np.dot(x1, x2.T) + np.sum(np.square(x1), axis=1)[:, np.newaxis] + np.sum(np.square(x2), axis=1)


def wdist(A, B, W):
    k, m = A.shape
    _, n = B.shape
    D = np.zeros((m, n))

    for ii in range(m):
        for jj in range(n):
            wdiff = (A[:, ii] - B[:, jj]) / W[:, ii]
            D[ii, jj] = np.sqrt((wdiff**2).sum())
    return D


def cronbach(itemscores):
    itemvars = itemscores.var(axis=1, ddof=1)
    tscores = itemscores.sum(axis=0)
    nitems = len(itemscores)
    return nitems / (nitems-1) * (1 - itemvars.sum() / tscores.var(ddof=1))


def grayscott(Du, Dv, F, k, ru, rv, counts):  # counts moved last: a static argument (a loop count)
    n = ru.shape[0]  # the benchmark hard-codes n = 280, the size of its ru and rv
    U = np.zeros((n+2, n+2), dtype=np.float32)
    V = np.zeros((n+2, n+2), dtype=np.float32)
    u, v = U[1:-1, 1:-1], V[1:-1, 1:-1]

    r = 4  # 20 in the benchmark, for n = 280
    u[:] = 1.0
    U[n//2-r:n//2+r, n//2-r:n//2+r] = 0.50
    V[n//2-r:n//2+r, n//2-r:n//2+r] = 0.25
    u += 0.15*ru
    v += 0.15*rv

    for i in range(counts):
        Lu = (U[0:-2, 1:-1] +
              U[1:-1, 0:-2] - 4*U[1:-1, 1:-1] + U[1:-1, 2:] +
              U[2:, 1:-1])
        Lv = (V[0:-2, 1:-1] +
              V[1:-1, 0:-2] - 4*V[1:-1, 1:-1] + V[1:-1, 2:] +
              V[2:, 1:-1])
        uvv = u*v*v
        u += Du*Lu - uvv + F*(1 - u)
        v += Dv*Lv + uvv - (F + k)*v

    return V


def diffusion(u, tempU, iterNum):
    """
    Apply Numpy matrix for the Forward-Euler Approximation
    """
    mu = .1

    for n in range(iterNum):
        tempU[1:-1, 1:-1] = u[1:-1, 1:-1] + mu * (
            u[2:, 1:-1] - 2 * u[1:-1, 1:-1] + u[0:-2, 1:-1] +
            u[1:-1, 2:] - 2 * u[1:-1, 1:-1] + u[1:-1, 0:-2])
        u[:, :] = tempU[:, :]
        tempU[:, :] = 0.0


def allpairs_distances(X, Y):
    return np.array([[np.sum((x-y) ** 2) for x in X] for y in Y])


def pairwise(pts):
    return np.sum((pts[None, :] - pts[:, None])**2, -1)**0.5


def reverse_cumsum(x):
    return np.cumsum(x[::-1])[::-1]


def smoothing(x, alpha):
    """
    Exponential smoothing of a time series
    """
    s = x.copy()
    for i in range(1, len(x)):
        s[i] = alpha * x[i] + (1 - alpha) * s[i-1]
    return s


def check_mask(db, mask=[1, 0, 1]):
    out = np.zeros(db.shape[0], dtype=bool)
    for idx, line in enumerate(db):
        target, vector = line[0], line[1:]
        if (mask == np.bitwise_and(mask, vector)).all():
            if target == 1:
                out[idx] = 1
    return out


def physics(masspoints, dt, plunk, which):  # from the wave benchmark (sklam/numba-example-wavephysics)
    ppos = masspoints[1]
    cpos = masspoints[0]
    N = cpos.shape[0]
    # apply hooke's law
    HOOKE_K = 2100000.
    DAMPING = 0.0001
    MASS = .01

    force = np.zeros((N, 2))
    for i in range(1, N):
        dx, dy = cpos[i] - cpos[i - 1]
        dist = np.sqrt(dx**2 + dy**2)
        assert dist != 0
        fmag = -HOOKE_K * dist
        cosine = dx / dist
        sine = dy / dist
        fvec = np.array([fmag * cosine, fmag * sine])
        force[i - 1] -= fvec
        force[i] += fvec

    force[0] = force[-1] = 0, 0
    force[which][1] += plunk
    accel = force / MASS

    # verlet integration
    npos = (2 - DAMPING) * cpos - (1 - DAMPING) * ppos + accel * (dt**2)

    masspoints[1] = cpos
    masspoints[0] = npos


def wave_step(masspoints, dt, plunk, which):
    physics(masspoints, dt, plunk, which)  # the benchmark updates masspoints in place
    return masspoints


def window_floor(idx, radius):
    if radius > idx:
        return 0
    else:
        return idx - radius


def window_ceil(idx, ceil, radius):
    if idx + radius > ceil:
        return ceil
    else:
        return idx + radius


def growcut(image, state, state_next, window_radius):
    changes = 0
    sqrt_3 = math.sqrt(3.0)

    height = image.shape[0]
    width = image.shape[1]

    for j in range(width):
        for i in range(height):

            winning_colony = state[i, j, 0]
            defense_strength = state[i, j, 1]

            for jj in range(window_floor(j, window_radius),
                            window_ceil(j+1, width, window_radius)):
                for ii in range(window_floor(i, window_radius),
                                window_ceil(i+1, height, window_radius)):
                    if (ii != i and jj != j):
                        d = image[i, j, 0] - image[ii, jj, 0]
                        s = d * d
                        for k in range(1, 3):
                            d = image[i, j, k] - image[ii, jj, k]
                            s += d * d
                        gval = 1.0 - math.sqrt(s)/sqrt_3

                        attack_strength = gval * state[ii, jj, 1]

                        if attack_strength > defense_strength:
                            defense_strength = attack_strength
                            winning_colony = state[ii, jj, 0]
                            changes += 1

            state_next[i, j, 0] = winning_colony
            state_next[i, j, 1] = defense_strength

    return changes


def lstsqr(x, y):
    """ Computes the least-squares solution to a linear matrix equation. """
    x_avg = np.average(x)
    y_avg = np.average(y)
    dx = x - x_avg
    dy = y - y_avg
    var_x = np.sum(dx**2)
    cov_xy = np.sum(dx * dy)
    slope = cov_xy / var_x
    y_interc = y_avg - slope*x_avg
    return (slope, y_interc)


def hasting(y, t, a1, a2, b1, b2, d1, d2):
    yprime = np.empty((3,))
    yprime[0] = y[0] * (1. - y[0]) - a1*y[0]*y[1]/(1. + b1 * y[0])
    yprime[1] = a1*y[0]*y[1] / (1. + b1 * y[0]) - a2 * y[1]*y[2] / (1. + b2 * y[1]) - d1 * y[1]
    yprime[2] = a2*y[1]*y[2]/(1. + b2*y[1]) - d2*y[2]
    return yprime


def repeating(x, nvar_y):
    nvar_x = x.shape[0]
    y = np.empty(nvar_x*(1+nvar_y))
    y[0:nvar_x] = x[0:nvar_x]
    y[nvar_x:] = np.repeat(x,nvar_y)
    return y


def slowparts(d, re, preDz, preWz, SRW, RSW, yxV, xyU, resid):  # parakeet's forum, slowparts.py: NumPy's functions
    """ computes the linear algebra intensive part of the gradients of the grae     imported by name (`zeros`)
    """
    fprime = lambda x: 1 - power(tanh(x), 2)

    partialDU = zeros((d+1, re, 2*d, d))
    for k in range(2*d):
        for i in range(d):
            partialDU[:,:,k,i] = fprime(preDz[k]) * fprime(preWz[i]) * (SRW[i,k] + RSW[i,k]) * yxV[:,:,i]

    return partialDU


def _slowparts_inputs(rng, dtype, d=4, re=3):
    def r(*shape):
        return rng.random(shape).astype(dtype)

    return d, re, r(2 * d, d + 1, re), r(d, d + 1, re), r(d, 2 * d), r(d, 2 * d), r(d + 1, re, d), r(d + 1, re, d), 1


def _wave_inputs(rng, dtype, count=8, width=1200, height=400):
    masspoints = np.empty((2, count, 2), dtype)  # as wave() sets them up, plus a little noise
    masspoints[:, :, 0] = np.arange(count) * (float(width) / count)
    masspoints[:, :, 1] = height / 2 + rng.uniform(-1, 1, (2, count))
    return masspoints, 1. / (300 * 60), 15


def _growcut_inputs(rng, dtype, n=5):
    state = np.zeros((n, n, 2), dtype)
    state[0, 0, 0] = state[0, 0, 1] = 1
    return rng.random((n, n, 3)).astype(dtype), state, np.empty_like(state)


def _r(*shape, kind="randn"):
    return lambda rng, dt: tuple(getattr(rng, "standard_normal" if kind == "randn" else "random")(s).astype(dt)
                                 for s in shape)


F64 = ("float64",)
BOTH = ("float64", "float32")
PROGRAMS = [
    program(arc_distance, _r(200, 200, 200, 200), BOTH),
    program(rosen, lambda rng, dt: (rng.random(300).astype(dt),), BOTH),
    program(l2norm, _r((40, 50), kind="rand"), BOTH),
    program(l1norm, _r((20, 30), (25, 30), kind="rand"), BOTH),
    program(multiple_sum, _r((12, 10), kind="rand"), F64),
    program(harris, _r((40, 30)), BOTH),
    program(laplacien, _r((20, 24, 3)), BOTH),
    program(log_likelihood, lambda rng, dt: (rng.random(1000).astype(dt), 0.1, 1.1), BOTH),
    program(vibr_energy, _r(500, 500, 500, kind="rand"), BOTH),
    program(euclidean_distance_square, _r((1, 64), (100, 64), kind="rand"), BOTH),
    program(wdist, _r((6, 5), (6, 4), (6, 5), kind="rand"), F64),
    program(cronbach, _r((30, 30), kind="rand"), BOTH),
    program(grayscott, lambda rng, dt: (0.16, 0.08, 0.04, 0.06) + _r((16, 16), (16, 16), kind="rand")(rng, dt),
            F64, static={"counts": 2}),
    program(diffusion, lambda rng, dt: (rng.random((16, 16)).astype(dt), np.zeros((16, 16), dt)), BOTH,
            static={"iterNum": 3}),
    program(allpairs_distances, _r((6, 40), (4, 40)), F64),
    program(pairwise, lambda rng, dt: (np.linspace(0, 10, 2000).reshape(20, 100).astype(dt),), BOTH),
    program(reverse_cumsum, _r(500, kind="rand"), BOTH),
    program(smoothing, lambda rng, dt: (rng.random(20).astype(dt), .4), F64),
    program(check_mask, lambda rng, dt: (rng.integers(0, 2, size=(10, 4)).astype(bool),), ("bool",)),
    program(wave_step, _wave_inputs, F64, static={"which": 4}),
    program(growcut, _growcut_inputs, F64, static={"window_radius": 1}),
    program(lstsqr, _r(500, 500, kind="rand"), BOTH),
    program(hasting, lambda rng, dt: (rng.random(3), *rng.random(7)), F64),   # its scalars: NumPy float64s
    program(repeating, _r(100, kind="rand"), F64, static={"nvar_y": 20}),
    program(slowparts, _slowparts_inputs, F64),
]
