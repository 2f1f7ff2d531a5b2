"""Wrong answers found by real NumPy programs and a differential fuzzer (issue 14, item 0), each pinned
on every device against NumPy computed here: values, result dtypes and the exception classes NumPy raises."""
from __future__ import annotations

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close, run_kernel


# ---- kernels that render the same source run the overload of their own argument types ----

def test_two_kernels_with_one_source_each_run_code_for_their_own_dtypes(device):
    i, x = np.array([1, 2, 3]), np.array([1.5, 2.0, -3.0])
    f = tj.kernel(lambda a, b: a * b)
    g = tj.kernel(lambda a, b: a * b)
    assert_close(run_kernel(f, i, i, device=device), i * i)
    assert_close(run_kernel(f, x, x, device=device), x * x)
    assert_close(run_kernel(g, i, i, device=device), i * i)
    assert_close(run_kernel(g, x, x, device=device), x * x)
