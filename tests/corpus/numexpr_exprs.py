"""numexpr's own expression tests (pydata/numexpr, numexpr/tests/test_numexpr.py: the MISC,
OPERATIONS, COMPARISONS, 1_ARG_FUNCS, 2_ARG_FUNCS and POW_TESTS lists), each list written as the
NumPy code numexpr compares itself against, several expressions per program. The inputs are the
ones test_expressions builds (aranges, array_size 100). Expressions of constants alone are left out."""
from __future__ import annotations

import numpy as np
from numpy import (arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, ceil, conj, copy, copysign, cos,
                   cosh, exp, expm1, floor, fmod, hypot, log, log1p, log2, log10, nextafter, ones_like, sign,
                   sin, sinh, sqrt, tan, tanh, trunc, where)

from . import program


def misc_arithmetic(a, b, c, d, e, a2):
    return (b*c+d*e, 2*a+3*b, -a, sinh(a), 2*a + (cos(3)+5)*sinh(cos(b)),
            0.25 * (a < 5) + 0.33 * (a >= 5), cos(a2))


def misc_where(a, b):
    return where(a != 0.0, 2, a), where(a > 10, b < a, b > a), where((a-10).real != 0.0, a, 2)


def misc_arctan2(a, b):
    return 2*a + arctan2(a, b)


def operations_add(a, b):
    return ((a+1) + (b+3), 3 + (b+3), (a+1) + 4, 2 + (b+3), (a+1) + 2, (a+1) + -1, (a+1) + 0.5, (a+1) + 0)


def operations_subtract(a, b):
    return ((a+1) - (b+3), 3 - (b+3), (a+1) - 4, 2 - (b+3), (a+1) - 2, (a+1) - -1, (a+1) - 0.5, (a+1) - 0)


def operations_multiply(a, b):
    return ((a+1) * (b+3), 3 * (b+3), (a+1) * 4, 2 * (b+3), (a+1) * 2, (a+1) * -1, (a+1) * 0.5, (a+1) * 0)


def operations_divide(a, b):
    return ((a+1) / (b+3), 3 / (b+3), (a+1) / 4, 2 / (b+3), (a+1) / 2, (a+1) / -1, (a+1) / 0.5, (a+1) / 0)


def operations_remainder(a, b):
    return ((a+1) % (b+3), 3 % (b+3), (a+1) % 4, 2 % (b+3), (a+1) % 2, (a+1) % -1, (a+1) % 0.5, (a+1) % 0)


def operations_power(a, b):
    return ((a+1) ** (b+3), 3 ** (b+3), (a+1) ** 4, 2 ** (b+3), (a+1) ** 2, (a+1) ** -1, (a+1) ** 0.5,
            (a+1) ** 0)


def comparisons(a, b):
    return (a/2+5 < b, a/2+5 < 7, 7 < b, a/2+5 <= b, a/2+5 <= 7, 7 <= b,
            a/2+5 == b, a/2+5 == 7, 7 == b, a/2+5 >= b, a/2+5 >= 7, 7 >= b,
            a/2+5 > b, a/2+5 > 7, 7 > b, a/2+5 != b, a/2+5 != 7, 7 != b)


def funcs_basic(a, b, c):
    return a + copy(b+c), a + ones_like(b+c), a + sqrt(b+c), a + abs(b+c), a + conj(b+c)


def funcs_trigonometric(a, b, c):
    return a + sin(b+c), a + cos(b+c), a + tan(b+c), a + arcsin(b+c), a + arccos(b+c), a + arctan(b+c)


def funcs_hyperbolic(a, b, c):
    return a + sinh(b+c), a + cosh(b+c), a + tanh(b+c), a + arcsinh(b+c), a + arccosh(b+c), a + arctanh(b+c)


def funcs_exp_log(a, b, c):
    return a + log(b+c), a + log1p(b+c), a + log10(b+c), a + log2(b+c), a + exp(b+c), a + expm1(b+c)


def funcs_rounding(a, b, c):
    # numexpr's `round` is np.round (Python's round() of an ndarray is a TypeError in NumPy itself)
    return a + ceil(b+c), a + floor(b+c), a + np.round(b+c), a + trunc(b+c), a + sign(b+c)


def funcs_arctan2(a, b, c, d):
    return a + arctan2(b+c, d+1), a + arctan2(b+c, 1), a + arctan2(1, d+1)


def funcs_fmod(a, b, c, d):
    return a + fmod(b+c, d+1), a + fmod(b+c, 1), a + fmod(1, d+1)


def funcs_hypot(a, b, c, d):
    return a + hypot(b+c, d+1), a + hypot(b+c, 1), a + hypot(1, d+1)


def funcs_nextafter(a, b, c, d):
    return a + nextafter(b+c, d+1), a + nextafter(b+c, 1), a + nextafter(1, d+1)


def funcs_copysign(a, b, c, d):
    return a + copysign(b+c, d+1), a + copysign(b+c, 1), a + copysign(1, d+1)


def powers(a):
    return ((a+1)**-7, (a+1)**-2.5, (a+1)**-1.5, (a+1)**-1.3, (a+1)**-.5, (a+1)**0, (a+1)**0.0, (a+1)**1,
            (a+1)**2.3, (a+1)**2.5, (a+1)**3)


ARRAY_SIZE = 100


def _variables(dtype):
    """a, b, c, d, e and a2 as numexpr's test_expressions makes them."""
    a = np.arange(2 * ARRAY_SIZE, dtype=dtype)[::2]
    a2 = np.zeros([ARRAY_SIZE, ARRAY_SIZE], dtype=dtype)
    b = np.arange(ARRAY_SIZE, dtype=dtype) / ARRAY_SIZE
    c = np.arange(ARRAY_SIZE, dtype=dtype)
    d = np.arange(ARRAY_SIZE, dtype=dtype)
    e = np.arange(ARRAY_SIZE, dtype=dtype)
    return {"a": a, "a2": a2, "b": b, "c": c, "d": d, "e": e}


def _take(*names):
    return lambda rng, dtype: tuple(_variables(dtype)[n] for n in names)


# numexpr runs every list on int, float32, float64 and complex128: int where NumPy accepts the whole list
# (int ** -1 raises in NumPy, so not for powers), complex where NumPy defines every function of the list (not
# %, arctan2, fmod, hypot, nextafter, copysign, ceil). Out-of-domain values (arcsin(2), x % 0, x / 0) are part
# of the lists on purpose, so NumPy runs with its warnings off.
FLOATS = ("float32", "float64")
ALL = ("int64", "float32", "float64")
COMPLEX = ("complex128",)
ANY = {"numpy_errors": "ignore"}
PROGRAMS = [
    program(misc_arithmetic, _take("a", "b", "c", "d", "e", "a2"), ALL + COMPLEX, **ANY),
    program(misc_where, _take("a", "b"), ALL + COMPLEX, **ANY),
    program(misc_arctan2, _take("a", "b"), ALL, **ANY),
    program(operations_add, _take("a", "b"), ALL + COMPLEX),
    program(operations_subtract, _take("a", "b"), ALL + COMPLEX),
    program(operations_multiply, _take("a", "b"), ALL + COMPLEX),
    program(operations_divide, _take("a", "b"), ALL + COMPLEX, **ANY),
    program(operations_remainder, _take("a", "b"), ALL, **ANY),
    program(operations_power, _take("a", "b"), FLOATS + COMPLEX, **ANY),
    program(comparisons, _take("a", "b"), ALL + COMPLEX),
    program(funcs_basic, _take("a", "b", "c"), FLOATS + COMPLEX, **ANY),
    program(funcs_trigonometric, _take("a", "b", "c"), FLOATS + COMPLEX, **ANY),
    program(funcs_hyperbolic, _take("a", "b", "c"), FLOATS + COMPLEX, **ANY),
    program(funcs_exp_log, _take("a", "b", "c"), FLOATS + COMPLEX, **ANY),
    program(funcs_rounding, _take("a", "b", "c"), FLOATS, **ANY),
    program(funcs_arctan2, _take("a", "b", "c", "d"), FLOATS, **ANY),
    program(funcs_fmod, _take("a", "b", "c", "d"), FLOATS, **ANY),
    program(funcs_hypot, _take("a", "b", "c", "d"), FLOATS, **ANY),
    program(funcs_nextafter, _take("a", "b", "c", "d"), FLOATS, **ANY),
    program(funcs_copysign, _take("a", "b", "c", "d"), FLOATS, **ANY),
    program(powers, _take("a"), FLOATS + COMPLEX, **ANY),
]
