"""Programs with complex numbers (issue 48 item 1), as their authors write them: escape-time fractals, contour
integrals, signal normalisation, a hand-written FFT, Green's functions, a DFT matrix, a split-step Schrödinger
solver, a polarisation rotation. Each says where it comes from."""
from __future__ import annotations

import numpy as np

from . import program


def mandelbrot(c, maxiter):  # the vectorised escape-time loop of "Mandelbrot set in NumPy" tutorials
    z = np.zeros_like(c)
    counts = np.zeros(c.shape, dtype=np.int64)
    for n in range(maxiter):
        inside = np.abs(z) <= 2
        z = np.where(inside, z * z + c, z)
        counts += inside
    return counts


def julia(zr, zi, c, maxiter):  # the Julia set with a complex parameter, smooth colouring as in the matplotlib gallery
    z = zr + 1j * zi
    smooth = np.zeros(z.shape)
    for n in range(maxiter):
        z = z * z + c
        escaped = np.abs(z) > 2
        smooth = np.where(escaped & (smooth == 0), n + 1 - np.log2(np.log(np.abs(z))), smooth)
        z = np.where(escaped, 2, z)
    return smooth


def contour_integral(radius, n):  # Cauchy's integral formula by the trapezoid rule on a circle (Trefethen's notes)
    theta = np.linspace(0, 2 * np.pi, n, endpoint=False)
    z = radius * np.exp(1j * theta)
    dz = 1j * z * (2 * np.pi / n)
    f = np.exp(z) / (z - 0.5)
    return np.sum(f * dz) / (2j * np.pi)


def normalize_signals(x):  # unit-energy complex baseband signals, as a DSP notebook normalises its batch
    power = np.sqrt(np.mean(np.abs(x) ** 2, axis=-1, keepdims=True))
    x = x / power
    phase = np.angle(x[..., :1])
    return x * np.exp(-1j * phase)


def fft_recursive(x):  # the textbook radix-2 Cooley-Tukey FFT (Jake VanderPlas, "Understanding the FFT")
    n = x.shape[0]
    if n <= 2:
        return np.array([x[0] + x[1], x[0] - x[1]]) if n == 2 else x
    even = fft_recursive(x[::2])
    odd = fft_recursive(x[1::2])
    factor = np.exp(-2j * np.pi * np.arange(n) / n)
    return np.concatenate([even + factor[: n // 2] * odd, even + factor[n // 2:] * odd])


def dft_matrix(x):  # the slow DFT as a matrix product (the same notebook's first version)
    n = x.shape[0]
    k = np.arange(n)
    m = np.exp(-2j * np.pi * k.reshape((n, 1)) * k / n)
    return np.dot(m, x)


def self_energy(eps, g, omega, eta):  # second-order self-energy of a tight-binding model (a many-body course's sum)
    denominators = omega[:, None] - eps[None, :] + 1j * eta
    return np.sum(g[None, :] ** 2 / denominators, axis=1)


def split_step(psi, x, dt, steps):  # the split-step Fourier method for the Schrödinger equation (harmonic trap)
    k = 2 * np.pi * np.fft.fftfreq(x.size, d=x[1] - x[0])
    half_v = np.exp(-0.25j * x**2 * dt)
    kinetic = np.exp(-0.5j * k**2 * dt)
    for _ in range(steps):
        psi = half_v * psi
        psi = np.fft.ifft(kinetic * np.fft.fft(psi))
        psi = half_v * psi
    return psi, np.sum(np.abs(psi) ** 2) * (x[1] - x[0])


def jones_rotation(field, angle):  # rotating the polarisation of complex field components (Jones calculus)
    c, s = np.cos(angle), np.sin(angle)
    rot = np.array([[c, -s], [s, c]])
    out = np.einsum("ij,...j->...i", rot, field)
    intensity = np.sum(out * np.conj(out), axis=-1).real
    return out, intensity


def normalize_complex_arr(a):  # numpy-benchmarks (serge-sans-paille), normalize_complex_arr.py
    a_oo = a - a.real.min() - 1j*a.imag.min() # origin offsetted
    return a_oo/np.abs(a_oo).max()


def mandel(n, m, itermax, xmin, xmax, ymin, ymax):  # numpy-benchmarks, mandel.py (from the SciPy wiki)
    '''
    Fast mandelbrot computation using numpy.
    '''
    ix, iy = np.mgrid[0:n, 0:m]
    x = np.linspace(xmin, xmax, n)[ix]
    y = np.linspace(ymin, ymax, m)[iy]
    c = x+complex(0,1)*y
    del x, y
    img = np.zeros(c.shape, dtype=int)
    ix.shape = n*m
    iy.shape = n*m
    c.shape = n*m
    z = np.copy(c)
    for i in range(itermax):
        if not len(z): break
        np.multiply(z, z, z)
        np.add(z, c, z)
        rem = abs(z)>2.0
        img[ix[rem], iy[rem]] = i+1
        rem = ~rem
        z = z[rem]
        ix, iy = ix[rem], iy[rem]
        c = c[rem]
    return img


def _grid(rng, dt):
    re = np.linspace(-2.0, 0.6, 48)
    im = np.linspace(-1.2, 1.2, 40)
    return (re[None, :] + 1j * im[:, None]).astype(dt), 25


def _julia(rng, dt):
    real = np.float32 if dt == "complex64" else np.float64
    zr, zi = np.meshgrid(np.linspace(-1.5, 1.5, 40), np.linspace(-1.0, 1.0, 30))
    return zr.astype(real), zi.astype(real), complex(-0.8, 0.156), 20


def _signals(rng, dt):
    return (rng.standard_normal((6, 64)) + 1j * rng.standard_normal((6, 64))).astype(dt),


def stockham_fft(N, R, K, x, y):  # npbench stockham_fft (numpy): twiddle factors computed with NumPy, each step

    # Generate DFT matrix for radix R.
    # Define transient variable for matrix.
    i_coord, j_coord = np.mgrid[0:R, 0:R]
    dft_mat = np.empty((R, R), dtype=np.complex128)
    dft_mat = np.exp(-2.0j * np.pi * i_coord * j_coord / R)
    # Move input x to output y
    # to avoid overwriting the input.
    y[:] = x[:]

    ii_coord, jj_coord = np.mgrid[0:R, 0:R**K]

    # Main Stockham loop
    for i in range(K):

        # Stride permutation
        yv = np.reshape(y, (R**i, R, R**(K - i - 1)))
        tmp_perm = np.transpose(yv, axes=(1, 0, 2))
        # Twiddle Factor multiplication
        D = np.empty((R, R**i, R**(K - i - 1)), dtype=np.complex128)
        tmp = np.exp(-2.0j * np.pi * ii_coord[:, :R**i] * jj_coord[:, :R**i] /
                     R**(i + 1))
        D[:] = np.repeat(np.reshape(tmp, (R, R**i, 1)), R**(K - i - 1), axis=2)
        tmp_twid = np.reshape(tmp_perm, (N, )) * np.reshape(D, (N, ))
        # Product with Butterfly
        y[:] = np.reshape(dft_mat @ np.reshape(tmp_twid, (R, R**(K - 1))),
                          (N, ))


def mandelbrot1(xmin, xmax, ymin, ymax, xn, yn, maxiter, horizon=2.0):  # npbench mandelbrot1 (numpy), its
    # Adapted from https://www.ibm.com/developerworks/community/blogs/jfp/...  `mandelbrot` (renamed here)
    #              .../entry/How_To_Compute_Mandelbrodt_Set_Quickly?lang=en
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)
    C = X + Y[:, None] * 1j
    N = np.zeros(C.shape, dtype=np.int64)
    Z = np.zeros(C.shape, dtype=np.complex128)
    for n in range(maxiter):
        I = np.less(abs(Z), horizon)
        N[I] = n
        Z[I] = Z[I]**2 + C[I]
    N[N == maxiter - 1] = 0
    return Z, N


def mandelbrot2(xmin, xmax, ymin, ymax, xn, yn, itermax, horizon=2.0):  # npbench mandelbrot2 (numpy), from
    # Nicolas P. Rougier's "From Numpy to Python" (BSD): `mandelbrot` renamed here. The points still
    # iterating shrink at every step (Z = Z[I]), their grid positions with them; writes into the selections.
    # Adapted from
    # https://thesamovar.wordpress.com/2009/03/22/fast-fractals-with-python-and-numpy/
    Xi, Yi = np.mgrid[0:xn, 0:yn]
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)[Xi]
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)[Yi]
    C = X + Y * 1j
    N_ = np.zeros(C.shape, dtype=np.int64)
    Z_ = np.zeros(C.shape, dtype=np.complex128)
    Xi.shape = Yi.shape = C.shape = xn * yn

    Z = np.zeros(C.shape, np.complex128)
    for i in range(itermax):
        if not len(Z):
            break

        # Compute for relevant points only
        np.multiply(Z, Z, Z)
        np.add(Z, C, Z)

        # Failed convergence
        I = abs(Z) > horizon
        N_[Xi[I], Yi[I]] = i + 1
        Z_[Xi[I], Yi[I]] = Z[I]

        # Keep going with those who have not diverged yet
        np.logical_not(I, I)  # np.negative(I, I) not working any longer
        Z = Z[I]
        Xi, Yi = Xi[I], Yi[I]
        C = C[I]
    return Z_.T, N_.T


def scattering_self_energies(neigh_idx, dH, G, D, Sigma):  # npbench scattering_self_energies (numpy): eight

    for k in range(G.shape[0]):                               # nested loops, an `if` on two of their indices,
        for E in range(G.shape[1]):                           # products of complex blocks added into Sigma
            for q in range(D.shape[0]):
                for w in range(D.shape[1]):
                    for i in range(D.shape[-2]):
                        for j in range(D.shape[-1]):
                            for a in range(neigh_idx.shape[0]):
                                for b in range(neigh_idx.shape[1]):
                                    if E - w >= 0:
                                        dHG = G[k, E - w,
                                                neigh_idx[a, b]] @ dH[a, b, i]
                                        dHD = dH[a, b, j] * D[q, w, a, b, i, j]
                                        Sigma[k, E, a] += dHG @ dHD


def _self_energies(rng, dt):  # (npbench's initialize at its S preset, fewer atoms: NA 6 -> 5)
    Nkz, NE, Nqz, Nw, N3D, NA, NB, Norb = 2, 4, 2, 2, 2, 5, 2, 3
    neigh_idx = np.ndarray([NA, NB], dtype=np.int32)
    for i in range(NA):
        neigh_idx[i] = np.positive(np.arange(i - NB / 2, i + NB / 2) % NA)

    def part(shape):
        return (rng.random(shape) + rng.random(shape) * 1j).astype(dt)

    return (neigh_idx, part([NA, NB, N3D, Norb, Norb]), part([Nkz, NE, NA, Norb, Norb]),
            part([Nqz, Nw, NA, NB, N3D, N3D]), np.zeros([Nkz, NE, NA, Norb, Norb], dtype=dt))


def apply_filter_pt(E, wx):  # numpy-benchmarks (serge-sans-paille), cma_pt.py (from pythran issue 1668)
    Xest = np.sum(E*np.conj(wx))
    return Xest


def cma_pt(E, wxy, mu, R, os):  # a constant-modulus equaliser: windows of the signal from the index
    pols, L = E.shape
    assert wxy.shape[0] == pols
    assert wxy.shape[1] == pols
    ntaps = wxy.shape[-1]
    N = (L//os//ntaps-1)*ntaps
    err = np.zeros((pols, L), dtype=np.complex128)
    for k in range(pols):
        for i in range(N):
            X = E[:, i*os:i*os+ntaps]
            Xest = apply_filter_pt(X, wxy[k])
            err[k,i] = (R-abs(Xest)**2)*Xest
            wxy[k] += mu*np.conj(err[k,i])*X
    return err, wxy


def _equaliser(rng, dt):  # (its setup, 300 samples rather than 3,000, with noise on the ones)
    s3 = (np.ones((2, 300)) + 0.1 * rng.standard_normal((2, 300)) + 0.1j * rng.standard_normal((2, 300))).astype(dt)
    wxy0 = np.zeros((2, 2, 21), dtype=dt)
    wxy0[0][0][21 // 2] = wxy0[1][1][21 // 2] = 1
    return s3, wxy0, 1e-3, 1.0, 2


def tridiagonal_solve(a, b, c, d):  # the Thomas algorithm as a Crank-Nicolson Schrodinger solver writes it for
    n = d.shape[0]                   # numba.njit: complex coefficients, a forward sweep and a back substitution
    cp = np.zeros(n, dtype=d.dtype)
    dp = np.zeros(n, dtype=d.dtype)
    x = np.zeros(n, dtype=d.dtype)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, n):
        m = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / m
        dp[i] = (d[i] - a[i] * dp[i - 1]) / m
    x[n - 1] = dp[n - 1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def dft_loops(x):  # the DFT as two loops over elements (the first version of a signal-processing course's DFT)
    n = x.shape[0]
    out = np.zeros(n, dtype=np.complex128)
    for k in range(n):
        s = 0j
        for t in range(n):
            s += x[t] * np.exp(-2j * np.pi * k * t / n)
        out[k] = s
    return out


def _tridiagonal(rng, dt):  # (a Crank-Nicolson step's diagonals: 1 + i r on the diagonal, -i r / 2 beside it)
    n, r = 200, 0.3
    off = np.full(n, -0.5j * r, dtype=dt)
    return off, np.full(n, 1 + 1j * r, dtype=dt), off.copy(), (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)


def _stockham(rng, dt):  # (8**4 points: its last twiddle tables are more than a kernel embeds, so they are held)
    x = (rng.standard_normal(8**4) + 1j * rng.standard_normal(8**4)).astype(dt)
    return 8**4, 8, 4, x, np.zeros_like(x)


def _vector(rng, dt):
    return (rng.standard_normal(32) + 1j * rng.standard_normal(32)).astype(dt),


def _levels(rng, dt):
    real = np.float32 if dt == "complex64" else np.float64
    return (np.linspace(-2, 2, 50).astype(real), rng.random(50).astype(real), np.linspace(-3, 3, 40).astype(real), 0.05)


def _packet(rng, dt):
    real = np.float32 if dt == "complex64" else np.float64
    x = np.linspace(-8, 8, 128).astype(real)
    return (np.exp(-(x - 1) ** 2) * np.exp(2j * x)).astype(dt), x, 0.01, 5


def _fields(rng, dt):
    real = np.float32 if dt == "complex64" else np.float64
    return (rng.standard_normal((20, 2)) + 1j * rng.standard_normal((20, 2))).astype(dt), real(0.3)


C128 = ("complex128",)
BOTH = ("complex128", "complex64")
PROGRAMS = [
    program(mandelbrot, _grid, BOTH),
    program(julia, _julia, ("complex128",), numpy_errors="ignore"),
    program(contour_integral, lambda rng, dt: (1.0, 64), C128),
    program(normalize_signals, _signals, BOTH),
    program(fft_recursive, _vector, BOTH),
    program(dft_matrix, _vector, BOTH),
    program(self_energy, _levels, BOTH),
    program(split_step, _packet, BOTH),
    program(jones_rotation, _fields, BOTH),
    program(normalize_complex_arr, _vector, BOTH),
    program(mandel, lambda rng, dt: (20, 30, 10, -2.0, 1.0, -1.5, 1.5), C128),
    program(stockham_fft, _stockham, C128),
    program(scattering_self_energies, _self_energies, C128),
    program(cma_pt, _equaliser, C128),
    # (a 70 x 70 grid: C, computed with NumPy from the Python numbers, is more than a kernel embeds: held)
    program(mandelbrot1, lambda rng, dt: (-2.25, 0.75, -1.25, 1.25, 70, 70, 12), C128, numpy_errors="ignore"),
    # (80 x 60 points: past what a kernel embeds, as NPBench's sizes are; a smaller grid is all constants, computed
    # while tracing)
    program(mandelbrot2, lambda rng, dt: (-2.0, 0.5, -1.25, 1.25, 80, 60, 5), C128),
    program(tridiagonal_solve, _tridiagonal, BOTH),
    program(dft_loops, _vector, BOTH),
]
