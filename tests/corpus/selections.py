"""Programs whose sizes depend on the data (issue 47), as their authors write them: selections by masks used as
arrays, np.nonzero, np.unique, np.bincount without minlength, np.histogram with estimated bins. Each says where
it comes from. A call reads each such size back when it runs (numpy/data_sizes.py)."""
from __future__ import annotations

import numpy as np

from . import program


def lj_energy(pos, box, rc):  # molecular dynamics tutorials' vectorised Lennard-Jones: minimum image, cutoff
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.round(d / box)
    r2 = np.sum(d**2, axis=-1)
    i, j = np.triu_indices(len(pos), k=1)
    r2 = r2[i, j]
    r2 = r2[r2 < rc**2]
    sr6 = (1.0 / r2) ** 3
    return 4.0 * np.sum(sr6**2 - sr6)


def radial_profile(data, center):  # the "radial profile" recipe (azimuthal integration by integer radius)
    y, x = np.indices(data.shape)
    r = np.sqrt((x - center[0]) ** 2 + (y - center[1]) ** 2)
    r = r.astype(int)
    tbin = np.bincount(r.ravel(), data.ravel())
    nr = np.bincount(r.ravel())
    radialprofile = tbin / nr
    return radialprofile


def group_sum(keys, values):  # a group-by sum with NumPy alone, as the "groupby without pandas" answers write it
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values)
    counts = np.bincount(inverse)
    return uniq, sums, sums / counts


def fast_particles(v, m, vmin):  # mask-and-reduce over the selected particles (a kinetic-energy diagnostic)
    speed = np.sqrt(np.sum(v**2, axis=1))
    fast = speed > vmin
    ke = 0.5 * np.sum(m[fast] * speed[fast] ** 2)
    return ke, np.count_nonzero(fast), speed[fast].mean(), np.sort(speed[fast])[::-1][:5]


def sigma_clip(data, sigma, iters):  # astronomy's iterative sigma clipping (astropy.stats.sigma_clip's loop)
    for _ in range(iters):
        med = np.median(data)
        std = np.std(data)
        data = data[np.abs(data - med) < sigma * std]
    return data.mean(), data.size


def find_peaks_simple(x, height):  # local maxima above a height, as a first scipy.signal.find_peaks is written
    peaks = np.nonzero((x[1:-1] > x[:-2]) & (x[1:-1] > x[2:]) & (x[1:-1] > height))[0] + 1
    return peaks, x[peaks]


def remove_outliers(x):  # Tukey's fences: keep what lies within 1.5 IQR of the quartiles
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    return x[(x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)]


def density_estimate(x):  # a histogram density with NumPy's automatic bins, at the bins' centres
    hist, edges = np.histogram(x, bins="auto", density=True)
    centers = (edges[:-1] + edges[1:]) / 2
    return centers, hist


def _particles(rng, dt):
    n = 64
    return (rng.random((n, 3)) * 4.0).astype(dt), 4.0, 1.5


def _velocities(rng, dt):
    return rng.standard_normal((200, 3)).astype(dt), rng.random(200).astype(dt) + 0.5, 1.6


def _keys(rng, dt):
    return rng.integers(0, 12, 300), rng.random(300).astype(dt)


def _signal(rng, dt):
    t = np.linspace(0, 20, 400)
    return (np.sin(t) + 0.3 * rng.standard_normal(400)).astype(dt), 0.5


F64 = ("float64",)
BOTH = ("float64", "float32")
PROGRAMS = [
    program(lj_energy, _particles, F64),
    program(radial_profile, lambda rng, dt: (rng.random((40, 50)).astype(dt), (20.5, 24.0)), F64),
    program(group_sum, _keys, F64),
    program(fast_particles, _velocities, BOTH),
    program(sigma_clip, lambda rng, dt: (np.concatenate([rng.standard_normal(300), [8.0, -9.0, 12.0]]).astype(dt),
                                         3.0, 3), F64),
    program(find_peaks_simple, _signal, BOTH),
    program(remove_outliers, lambda rng, dt: (np.concatenate([rng.standard_normal(200), [9.0, -7.0]]).astype(dt),),
            BOTH),
    program(density_estimate, lambda rng, dt: (rng.standard_normal(500).astype(dt),), F64),
]
