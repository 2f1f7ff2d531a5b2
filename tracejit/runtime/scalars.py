"""Python-int arguments that narrow to a smaller integer dtype are range-checked like NumPy (NEP 50)."""

from __future__ import annotations

import numpy as np

from tracejit.errors import ScalarOverflowError


def check_int_scalars(checks: list[tuple[int, np.dtype]], args) -> None:
    for pos, dt in checks:
        if not isinstance(args[pos], (int, np.integer)):
            continue  # (memory a kernel computed the number in: of its dtype already; a captured graph's)
        info = np.iinfo(dt)
        if not info.min <= args[pos] <= info.max:
            if dt == np.int64:
                raise ScalarOverflowError(
                    f"Python integer {args[pos]} (argument {pos}) does not fit int64, which "
                    "tracejit passes Python ints as; pass float(x), or an array of the dtype "
                    "you mean"
                )
            raise ScalarOverflowError(
                f"Python integer {args[pos]} (argument {pos}) is out of bounds for {dt.name}, "
                "the dtype it combines with (NumPy raises OverflowError here too)"
            )
