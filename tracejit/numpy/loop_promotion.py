"""Whether a loop may start a Python number it carries as the NumPy dtype its first step gives it (numpy/loops.py):
NEP 50 makes `s = 0.0`, then `s = s + x32[i]`, a float32 after the first step, whose arithmetic on `s` ran with
the Python number. Starting `s` as float32 computes the same only where the step meets float32 with the very value
NumPy's promotion would give it; this module checks that on the body traced once, computing what the step makes
of the number both ways where it is known while tracing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tracejit.ir.graph import ELEMENTWISE, MOVEMENT, Node, Op, toposort
from tracejit.ir.ops import NUMPY_OPS
from tracejit.numpy.tensor import as_node


def exact(changes: dict, stand_ins: dict, reached: list[Node] | None, same_dtype: bool = False) -> bool | None:
    """Whether the body's first step computes what it computed with the changed names' Python numbers (NEP 50's weak
    scalars) when given them as NumPy values of the dtype the step gives them (_widened): each goes from a weak 0-d
    value to a value of a dtype D (`s = 0.0`, then `s += A[i, j]`: float64; `s = 0`, then `s = s + x32.sum()`:
    float32), and where the step meets D (NEP 50 converts a Python number meeting a value of dtype D to D) it meets
    the same value: the Python number itself, or what the step computed from it in Python's precision (`s * 0.5`,
    `s / 1e10`: computed from the first value known while tracing, both ways, and compared; `s = 1e40` then
    `s = s / 1e10 + x32[i]` does not qualify, as 1e30 is not float32(1e40) / 1e10). A comparison with a Python
    number is compared both ways too. True where it computes the same; False where it computes otherwise (the
    step's values differ); None where that is not known: the number given to a loop, a call run on the host or a
    count read back, a first value not known while tracing that the step computes with before meeting D, an
    operation not followed here. `same_dtype`: only D the Python number's own dtype (`s = 0.0` to float64), a 0-d
    value."""
    if reached is None or not changes:
        return None
    target: dict[Node, np.dtype] = {}  # each weak value the step computes with -> the dtype D it must meet
    own: dict[Node, bool] = {}  # whether D is that value's own dtype
    wide: dict[Node, Any] = {}  # its value as Python computes it, where the first value is known
    narrow: dict[Node, Any] = {}  # its value computed in D from D's first value
    computed: set[Node] = set()  # the values computed from a Python number in its precision
    for j, (first, nxt) in changes.items():
        before, after = stand_ins[j], as_node(nxt)
        if not (before.weak and not after.weak and before.shape == ()):
            return None
        if same_dtype and not (before.dtype == after.dtype and after.shape == ()):
            return None
        target[before], own[before] = after.dtype, before.dtype == after.dtype
        if type(first) in (bool, int, float):
            wide[before], narrow[before] = _as([first], before.dtype), _as([first], after.dtype)
    for n in toposort(reached):
        if n in target:
            continue
        srcs = [s for s in n.srcs if s in target]
        if not srcs:
            continue
        dtypes = {target[s] for s in srcs}
        if n.op in (Op.LOOP, Op.HOST, Op.SIZE) or len(dtypes) != 1:
            return None
        (d,) = dtypes
        if n.op in MOVEMENT and n.weak:  # (the same value, reshaped or broadcast)
            target[n], own[n] = d, all(own[s] for s in srcs)
            if all(s in wide for s in srcs):
                wide[n], narrow[n] = wide[srcs[0]], narrow[srcs[0]]
            if any(s in computed for s in srcs):
                computed.add(n)
            continue
        others = [s for s in n.srcs if s not in target]
        comparison = n.dtype == np.bool_ and any(s.dtype != np.bool_ for s in n.srcs)
        if comparison and all(s.weak for s in others) or n.weak and not comparison:
            # computed in Python's precision (a Python number's own dtype), not yet in D
            if all(own[s] for s in srcs):
                if not comparison and n.dtype == d:
                    target[n], own[n] = d, True
                continue
            if same_dtype or n.op not in _SCALAR_OPS or not all(s in wide for s in srcs):
                return None
            if any(s.op is not Op.CONST for s in (others[1:] if n.op is Op.WHERE else others)):
                return None  # (a where's test, read from arrays, picks one of its sides: each is computed)
            wide_value = _apply(n, [wide[s] if s in target else _as([s.arg], s.dtype) for s in n.srcs], n.dtype)
            narrow_value = _apply(n, [narrow[s] if s in target else _as([s.arg], s.dtype) for s in n.srcs], d)
            if wide_value is None or narrow_value is None:
                return None
            if comparison:
                if not np.array_equal(wide_value, narrow_value):
                    return False
                continue
            target[n], own[n], wide[n], narrow[n] = d, False, wide_value, narrow_value
            computed.add(n)
            continue
        # where the step meets D: a value of D, or a conversion to D
        if comparison:
            if any(s.dtype != d for s in others):
                return None
        elif n.dtype != d:
            return None
        for s in srcs:  # (a value computed from a Python number: the same once made D as computed in D)
            if s in computed and not _same(_as(wide[s], d), narrow[s]):
                return False
    return True


_SCALAR_OPS = ELEMENTWISE - {Op.BITCAST}


_CANDIDATES = 256  # the most values a step may have computed from a Python number (each side of each `if`)


def _as(value, dtype: np.dtype):
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype)


def _apply(n: Node, args: list, dtype: np.dtype):
    """n's operation on the values each operand may have (1-d arrays: a where's two sides, anything computed from
    them), in `dtype` (a comparison's operands in `dtype`, its results bools): every combination, or None where
    there are too many."""
    with np.errstate(all="ignore"):
        if n.op is Op.CAST:
            return _as(args[0], n.dtype)
        if n.op is Op.WHERE:  # (either side, whatever the test)
            return np.concatenate([_as(args[1], dtype), _as(args[2], dtype)])
        converted = [_as(a, dtype) for a in args]
        if np.prod([a.size for a in converted]) > _CANDIDATES:
            return None
        grids = np.meshgrid(*converted, indexing="ij")
        return np.asarray(NUMPY_OPS[n.op.value](*grids)).reshape(-1)


def _same(a, b) -> bool:
    """The same values, bit for bit (NaN as NaN, -0.0 apart from 0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc":
        return bool((a == b).all())
    if a.dtype.kind == "c":  # (part by part)
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    return bool((((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))).all())
