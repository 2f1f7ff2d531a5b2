"""np.fft on traced values (filled in by fft_pairs.py)."""

NUMPY_FUNCTIONS: dict = {}
