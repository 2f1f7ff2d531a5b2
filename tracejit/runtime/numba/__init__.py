"""The numba target: generated modules compiled by numba.njit (or LLVM directly), run on all cores."""
