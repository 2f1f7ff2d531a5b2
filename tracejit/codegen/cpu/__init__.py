"""The numba device's code generation: kernel IR -> Python source for numba.njit, or LLVM IR directly, and the
helpers that source calls."""
