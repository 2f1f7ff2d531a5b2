"""The flat memory span behind a strided host array, as kernels index it (from its lowest address)."""

from __future__ import annotations

import numpy as np

from tracejit.runtime.array import Array


def flat_view(a, buf) -> np.ndarray:
    """The 1-D span of memory holding `a`, starting at its lowest address (strided arrays in place).
    float16 comes back as its uint16 bit patterns."""
    if type(a) is Array:
        a = a._data
    elif not isinstance(a, np.ndarray):
        a = np.asarray(a, dtype=buf.dtype)  # Python scalars arrive as 0-d arrays
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
    else:
        corner = a[tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(a.shape, a.strides))]
        flat = np.lib.stride_tricks.as_strided(corner, shape=(buf.size,), strides=(a.itemsize,))
    return flat.view(np.uint16) if flat.dtype == np.float16 else flat
