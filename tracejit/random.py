"""tj.random: the generator that np.random.* and np.random.Generator methods draw from inside kernels
(Philox-4x32-10, computed on the device: the same numbers on every device for the same seed and calls)."""

from __future__ import annotations

from tracejit.numpy.random_draws import seed  # noqa: F401

__all__ = ["seed"]
