"""Complex elementary functions on (re, im) pairs of real float arrays, with the values of NumPy's complex
ufuncs: written with NumPy ufuncs and operators only (no branches on values), so the same code runs on
ndarrays and traces into kernels."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

Array = Any  # an ndarray or a traced array: anything with .dtype, .shape and NumPy's operators and ufuncs
Pair = tuple[Array, Array]

# The worst error against NumPy's complex ufunc (float32, float64) measured on every pair of special values,
# random values spanning magnitudes and points near the unit circle, +-1, +-i and the axes
# (tests/test_complex_math.py), on ndarrays and traced on the numba and opencl (PoCL) devices; 0 = NumPy's bits.
# In units in the last place of NumPy's result, part by part: each part in ulps of itself, but not finer than
# the ulps of max(|re|, |im|) / 1024. The functions in NORMWISE are measured in ulps of max(|re|, |im|): NumPy's
# own formula cancels there (log1p, expm1), its loop rounds once in an FMA (multiply, square), numba fuses
# a*b + c where NumPy rounds twice (divide, reciprocal: the same bits on ndarrays and opencl), or the error of
# the logarithm comes multiplied by the exponent (power, for |b log a| < 100). NaN, infinities and signed zeros
# are NumPy's on the special values, except where power's and divide's docstrings say.
ULPS: dict[str, tuple[int, int]] = {
    "exp": (4, 3),
    "log": (4, 3),
    "log10": (4, 4),
    "log2": (3, 3),
    "log1p": (3, 8),
    "expm1": (6, 5),
    "sqrt": (1, 1),
    "sin": (5, 3),
    "cos": (4, 3),
    "tan": (8, 6),
    "sinh": (5, 3),
    "cosh": (5, 3),
    "tanh": (8, 6),
    "arcsin": (5, 5),
    "arccos": (5, 5),
    "arctan": (5, 5),
    "arcsinh": (5, 5),
    "arccosh": (5, 5),
    "arctanh": (5, 4),
    "absolute": (2, 2),
    "angle": (3, 1),
    "sign": (0, 2),
    "reciprocal": (2, 2),
    "square": (1, 1),
    "multiply": (1, 1),
    "divide": (3, 2),
    "power": (126, 104),
}
NORMWISE = frozenset({"log1p", "expm1", "multiply", "square", "divide", "reciprocal", "power"})

_LN2 = math.log(2.0)
_LOG10E = math.log10(math.e)  # NumPy's NPY_LOG10E
_LOG2E = 1.0 / _LN2  # NumPy's NPY_LOG2E


class _Limits(NamedTuple):
    """Per-dtype constants, as Python floats (weak: they take the pair's dtype)."""

    eps: float
    tiny: float  # smallest normal
    max: float
    exp_split: float  # T, glibc's (MAX_EXP - 1) * ln 2 truncated: e**T is finite; larger x uses e**T * e**(x - T)
    exp_split_value: float  # e**T
    tanh_split: float  # glibc's T / 2 for ctanh: beyond it tanh(x + iy) is sign(x) + i 4 sin y cos y e**(-2|x|)
    exp_2tanh_split: float  # e**(2 T / 2)
    splitter: float  # Veltkamp's 2**ceil(p / 2) + 1: a * splitter splits a into two halves of p / 2 bits
    sqrt_up: float  # csqrt scales |z| < 4 tiny up by sqrt_up**2 (its result down by sqrt_up) so no bit is lost
    log_big: float  # clog scales |z| > log_big down by log_down (and adds log_big_shift) so hypot cannot overflow
    log_down: float
    log_big_shift: tuple[float, float]  # log(1 / log_down) as hi + lo, hi exact in the dtype
    log_small: float  # ... and |z| < log_small up by log_up so hypot keeps all bits of subnormal parts
    log_up: float
    log_small_shift: tuple[float, float]


@functools.cache
def _limits(dtype: np.dtype) -> _Limits:
    f = np.finfo(dtype)
    t = float(int((f.maxexp - 1) * _LN2))
    half = int(t / 2)
    root_shift = (f.nmant + 1) // 2 + 1  # 2**(2 root_shift) lifts the smallest subnormal into the normal range
    big, small = f.maxexp // 2, -f.minexp // 2
    up = small + f.nmant + 1
    ln2_hi = math.floor(_LN2 * 2.0 ** (f.nmant - 10)) * 2.0 ** (10 - f.nmant)  # k * ln2_hi exact for k < 2**11

    def k_ln2(k: int) -> tuple[float, float]:
        return k * ln2_hi, k * (_LN2 - ln2_hi)

    return _Limits(
        eps=float(f.eps),
        tiny=float(f.tiny),
        max=float(f.max),
        exp_split=t,
        exp_split_value=math.exp(t),
        tanh_split=float(half),
        exp_2tanh_split=math.exp(2 * half),
        splitter=2.0 ** ((f.nmant + 2) // 2) + 1,
        sqrt_up=2.0**root_shift,
        log_big=2.0**big,
        log_down=2.0**-big,
        log_big_shift=k_ln2(big),
        log_small=2.0**-small,
        log_up=2.0**up,
        log_small_shift=k_ln2(up),
    )


def _parts(*parts: Array) -> tuple[Array, ...]:
    """The parts broadcast together, after checking they share one real float dtype."""
    dtypes = {np.dtype(p.dtype) for p in parts}
    if len(dtypes) != 1 or next(iter(dtypes)).kind != "f":
        raise TypeError(f"complex pairs are arrays of one real float dtype, not {', '.join(map(str, dtypes))}")
    return np.broadcast_arrays(*parts)


def _pair(re: Array, im: Array) -> tuple[Array, Array, _Limits]:
    re, im = _parts(re, im)
    return re, im, _limits(np.dtype(re.dtype))


def _full(like: Array, value: float) -> Array:
    """value in like's dtype and shape."""
    return np.full_like(like, value)


def _nonfinite(re: Array, im: Array) -> Array:
    return ~np.isfinite(re) | ~np.isfinite(im)


def _swap_i(pair: Pair) -> Pair:
    """-i * (re + i im): how f(z) = -i g(iz) turns g's result into f's."""
    return pair[1], -pair[0]


# --- arithmetic ------------------------------------------------------------------------------------


def multiply(ar: Array, ai: Array, br: Array, bi: Array) -> Pair:
    """(ar*br - ai*bi, ar*bi + ai*br). NumPy's SIMD loop fuses each sum into one FMA where the CPU has one
    (x86 with FMA3, arm64), so its last bits differ from these where the products nearly cancel: the error
    is stated against max(|re|, |im|). Where a product overflows, the fused sum's infinity is followed (an
    FMA sees the exact finite product beside the infinite one: max * max - inf is -inf, not NaN)."""
    ar, ai, br, bi = _parts(ar, ai, br, bi)
    return _fused(ar, br, -(ai * bi)), _fused(ar, bi, ai * br)


def _fused(a: Array, b: Array, c: Array) -> Array:
    """a*b + c with the infinities of one FMA: an infinite c beside a finite product is c; a product that
    overflows beside a finite c may come back in range, so it is taken at half scale."""
    finite_ab = np.isfinite(a) & np.isfinite(b)
    p = a * b
    out = np.where(np.isinf(p) & finite_ab & np.isfinite(c), 2.0 * ((a * 0.5) * b + c * 0.5), p + c)
    return np.where(np.isinf(c) & finite_ab, c, out)


def square(re: Array, im: Array) -> Pair:
    """(re*re - im*im, 2 re im) as NumPy's multiply of z by itself (fused as in `multiply`)."""
    re, im, _ = _pair(re, im)
    return _fused(re, re, -(im * im)), re * im + im * re


def divide(ar: Array, ai: Array, br: Array, bi: Array) -> Pair:
    """a / b with NumPy's loop exactly (Smith's method, its branches and order of operations): the same bits,
    except on a device that fuses a*b + c into one FMA (numba), where they may differ in the last ones, and a
    zero part that comes of an underflowing product may have the other sign."""
    ar, ai, br, bi = _parts(ar, ai, br, bi)
    abs_br, abs_bi = np.abs(br), np.abs(bi)
    real_larger = abs_br >= abs_bi  # False for a NaN, as C's comparison
    by_zero = (abs_br == 0) & (abs_bi == 0)
    # NumPy's two ways, (ar + ai r) s and (ai - ar r) s with r = bi / br, s = 1 / (br + bi r), and (ar r + ai) s and
    # (ai r - ar) s with r = br / bi, s = 1 / (bi + br r), share their divisions once the branch picks the operands:
    # the same bits (a sum's order does not change it, FMAs included), two divisions where computing both ways and
    # the division by zero took six (a select runs both of its sides: on every device, in loops over elements too).
    # The imaginary parts stay two differences: x - y is +0 where x == y, and so is y - x, not its negation
    big, small = _picked(real_larger, br, bi)
    first, second = _picked(real_larger, ar, ai)
    rat = small / big
    scl = 1.0 / (big + small * rat)
    re_ = (first + second * rat) * scl
    # dividing by zero (both parts): NumPy's ar / |br| with |br| = +0 is ar * inf, the same value (0 and NaN: NaN)
    re = np.where(real_larger, np.where(by_zero, ar * np.inf, re_), re_)
    im = np.where(
        real_larger, np.where(by_zero, ai * np.inf, (second - first * rat) * scl), (first * rat - second) * scl
    )
    return re, im


def _picked(test: Array, x: Array, y: Array) -> Pair:
    """(x, y) where test holds, else (y, x): the operands of the way a branch of Smith's method takes."""
    return np.where(test, x, y), np.where(test, y, x)


def reciprocal(re: Array, im: Array) -> Pair:
    """1 / z with NumPy's loop exactly: the same bits (but for FMAs, as `divide`)."""
    re, im, _ = _pair(re, im)
    real_larger = np.abs(im) <= np.abs(re)
    # NumPy's two ways (r = im / re, d = re + im r: 1 / d, -r / d; r = re / im, d = re r + im: r / d, -1 / d) as one
    # of operands picked by the branch, as `divide`: the same bits, three divisions for six
    big, small = _picked(real_larger, re, im)
    r = small / big
    d = big + small * r
    one, ratio = 1.0 / d, r / d
    return np.where(real_larger, one, ratio), np.where(real_larger, -ratio, -one)


def absolute(re: Array, im: Array) -> Array:
    """|z| (one real array), as sqrt(re**2 + im**2) scaled by a power of two where the squares would overflow or
    lose bits (NumPy's loop has its own hypot; this is within 2 ulps of it). Written without a hypot call, so it
    vectorises: the C library's hypot is a scalar call on the CPU devices (13 ms against NumPy's 0.6 ms for 2**20
    values)."""
    re, im, lim = _pair(re, im)
    a, b = np.abs(re), np.abs(im)
    big = np.maximum(a, b)
    double = re.dtype == np.float64
    high, low = (2.0**500, 2.0**-500) if double else (2.0**60, 2.0**-60)
    down, up = (2.0**-600, 2.0**600) if double else (2.0**-70, 2.0**70)
    kind = re.dtype.type  # (np.where of Python floats alone would be float64)
    scale = np.where(big > high, kind(down), np.where(big < low, kind(up), kind(1.0)))
    x, y = a * scale, b * scale
    h = np.sqrt(x * x + y * y) / scale
    return np.where(np.isinf(a) | np.isinf(b), kind(np.inf), h)


def angle(re: Array, im: Array) -> Array:
    """np.angle: arctan2(im, re) (one real array)."""
    re, im, _ = _pair(re, im)
    return np.arctan2(im, re)


def sign(re: Array, im: Array) -> Pair:
    """NumPy 2's z / |z| (0 for 0) with its loop's cases: NaN |z| gives NaN; an infinite part gives its unit
    (both infinite: NaN)."""
    re, im, _ = _pair(re, im)
    h = np.hypot(re, im)
    re_inf, im_inf = np.isinf(re), np.isinf(im)
    zero = np.zeros_like(re)
    out_re = np.where(h == 0, zero, re / h)
    out_im = np.where(h == 0, zero, im / h)
    inf_re = np.where(re_inf, np.where(im_inf, np.nan, np.copysign(1.0, re)), zero)
    inf_im = np.where(re_inf, np.where(im_inf, np.nan, zero), np.copysign(1.0, im))
    out_re = np.where(np.isinf(h), inf_re, out_re)
    out_im = np.where(np.isinf(h), inf_im, out_im)
    nan = np.isnan(h)
    return np.where(nan, np.nan, out_re), np.where(nan, np.nan, out_im)


# --- exponential and logarithms ----------------------------------------------------------------------


def _times_exp(x: Array, c: Array, s: Array, lim: _Limits, factor: float = 1.0) -> Pair:
    """(factor c e**x, factor s e**x) as glibc's cexp (factor 1/2: its csinh and ccosh): beyond T it multiplies
    c and s by factor e**T first (then e**T again, if need be) and takes e**(x - T), so e**x overflowing alone
    does not overflow a product that is finite, nor does factor underflow a subnormal c or s."""
    big = x > lim.exp_split
    x = np.where(big, x - lim.exp_split, x)
    c = np.where(big, c * (factor * lim.exp_split_value), c * factor)
    s = np.where(big, s * (factor * lim.exp_split_value), s * factor)
    big = x > lim.exp_split
    x = np.where(big, x - lim.exp_split, x)
    c = np.where(big, c * lim.exp_split_value, c)
    s = np.where(big, s * lim.exp_split_value, s)
    e = np.exp(x)
    return c * e, s * e


def exp(re: Array, im: Array) -> Pair:
    """glibc's cexp: e**re (cos im, sin im), with C99 Annex G's infinities and NaNs."""
    re, im, lim = _pair(re, im)
    out_re, out_im = _times_exp(re, np.cos(im), np.sin(im), lim)
    # C99 Annex G: exp(+-inf + i(inf or NaN)) is (inf, NaN) or (0, +-0); an imaginary zero is kept
    inf_nonfinite = np.isinf(re) & ~np.isfinite(im)
    out_re = np.where(inf_nonfinite, np.where(re > 0, re, 0.0), out_re)
    out_im = np.where(inf_nonfinite, np.where(re > 0, np.nan, np.copysign(0.0, im)), out_im)
    return out_re, np.where(im == 0, im, out_im)


def _two_square(a: Array, lim: _Limits) -> Pair:
    """(p, e) with p + e == a * a exactly (Dekker's product of a's two halves, split as Veltkamp)."""
    p = a * a
    c = a * lim.splitter
    hi = c - (c - a)
    lo = a - hi
    return p, ((hi * hi - p) + 2.0 * hi * lo) + lo * lo


def _two_sum(a: Array, b: Array) -> Pair:
    """(s, e) with s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _x2y2m1(x: Array, y: Array, lim: _Limits) -> Array:
    """x*x + y*y - 1 to a few ulps of itself where it cancels (|z| near 1), as glibc's __x2y2m1."""
    px, ex = _two_square(x, lim)
    py, ey = _two_square(y, lim)
    s, t = _two_sum(px, -1.0)
    s, u = _two_sum(s, py)
    return s + ((t + u) + (ex + ey))


def _log_abs(re: Array, im: Array, lim: _Limits) -> Array:
    """log|z|: log1p(|z|**2 - 1) / 2 near |z| == 1, else log(hypot) of the pair scaled into range."""
    ax, ay = np.abs(re), np.abs(im)
    m = np.maximum(ax, ay)
    big, small = m > lim.log_big, m < lim.log_small

    def scaled(v):
        return np.where(big, v * lim.log_down, np.where(small, v * lim.log_up, v))

    h = np.hypot(scaled(ax), scaled(ay))
    far = np.log(h)
    (big_hi, big_lo), (small_hi, small_lo) = lim.log_big_shift, lim.log_small_shift
    far = np.where(big, (far + big_lo) + big_hi, np.where(small, (far - small_lo) - small_hi, far))
    near = (h > 0.5) & (h < 2.0) & ~big & ~small
    d = _x2y2m1(np.where(near, ax, 1.0), np.where(near, ay, 0.0), lim)
    return np.where(near, 0.5 * np.log1p(d), far)


def log(re: Array, im: Array) -> Pair:
    """(log|z|, arctan2(im, re)), log|z| accurate near the unit circle as glibc's clog."""
    re, im, lim = _pair(re, im)
    return _log_abs(re, im, lim), np.arctan2(im, re)


def log10(re: Array, im: Array) -> Pair:
    """log(z) * log10(e), as NumPy (both parts multiplied by its constant)."""
    lr, li = log(re, im)
    return lr * _LOG10E, li * _LOG10E


def log2(re: Array, im: Array) -> Pair:
    """log(z) * log2(e), as NumPy."""
    lr, li = log(re, im)
    return lr * _LOG2E, li * _LOG2E


def log1p(re: Array, im: Array) -> Pair:
    """NumPy's own formula, (log(hypot(re + 1, im)), arctan2(im, re + 1)): it loses the digits of a small z
    (log1p(1e-20) is 0), and so does this, to give NumPy's values. Where hypot rounds to near 1, an ulp of
    difference in a device's hypot (PoCL's float64) is an ulp of 1 in the real part, however small that is."""
    re, im, _ = _pair(re, im)
    x1 = re + 1.0
    return np.log(np.hypot(x1, im)), np.arctan2(im, x1)


def expm1(re: Array, im: Array) -> Pair:
    """NumPy's own formula: (expm1(re) cos(im) - 2 sin(im/2)**2, exp(re) sin(im))."""
    re, im, _ = _pair(re, im)
    a = np.sin(im / 2.0)
    return np.expm1(re) * np.cos(im) - 2.0 * a * a, np.exp(re) * np.sin(im)


def sqrt(re: Array, im: Array) -> Pair:
    """Principal square root, as glibc's csqrt: t = sqrt((|re| + |z|) / 2), the other part im / (2t), with
    the pair scaled by a power of 4 where |re| + |z| could overflow or lose bits below the normal range."""
    re, im, lim = _pair(re, im)
    ax, ay = np.abs(re), np.abs(im)
    m = np.maximum(ax, ay)
    big, small = m > lim.max / 4.0, m < 4.0 * lim.tiny
    up = lim.sqrt_up * lim.sqrt_up

    def scaled(v):
        return np.where(big, v * 0.25, np.where(small, v * up, v))

    xs, ys = scaled(re), scaled(im)
    t = np.sqrt(0.5 * (np.abs(xs) + np.hypot(xs, ys)))
    w = 0.5 * (ys / t)
    positive = xs > 0
    r = np.where(positive | (xs == 0), t, np.abs(w))
    s = np.where(positive, w, np.copysign(t, ys))

    def unscaled(v):
        return np.where(big, v * 2.0, np.where(small, v * (1.0 / lim.sqrt_up), v))

    r, s = unscaled(r), unscaled(s)
    # glibc's exact cases: a real z (sqrt(re), or i sqrt(-re)), and the infinities
    neg = re < 0
    root = np.sqrt(np.abs(re))
    real_axis = (im == 0) & ~np.isnan(re)
    r = np.where(real_axis, np.where(neg, 0.0, root), r)
    s = np.where(real_axis, np.where(neg, np.copysign(root, im), im), s)
    re_inf, im_nan = np.isinf(re), np.isnan(im)
    r = np.where(re_inf, np.where(neg, np.where(im_nan, im, 0.0), re), r)
    s = np.where(re_inf, np.where(neg, np.copysign(np.inf, im), np.where(im_nan, im, np.copysign(0.0, im))), s)
    im_inf = np.isinf(im)
    return np.where(im_inf, np.inf, r), np.where(im_inf, im, s)


def power(ar: Array, ai: Array, br: Array, bi: Array) -> Pair:
    """a ** b as NumPy's npy_cpow decides per element: b == 0 gives 1; a == 0 gives 0 for re(b) > 0, else NaN;
    a real integer b, |b| < 100, NumPy's repeated multiplication (binary powering, then 1 / the result for
    b < 0), so the same bits; otherwise exp(b log a), the C library's cpow (C's complex multiply included).

    That last one's error grows with |b log a|, in NumPy's result as in this one (an ulp of log a times b), so
    it is stated normwise for |b log a| < 100. Where |b log a| is larger, or the phase of b log a is within a
    few ulps of an axis, NumPy's result is not determined by a and b to its last bits: the sign of a part that
    underflows to zero or overflows may differ, and a result at the overflow threshold may be finite here (the
    C library's atan2f, in clogf, is not NumPy's). On a device that fuses a*b + c (numba), the repeated
    multiplication rounds otherwise, each squaring doubling the difference, and where |a|**|b| leaves the
    dtype's range its products meet inf - inf as an infinity where NumPy has NaN."""
    ar, ai, br, bi = _parts(ar, ai, br, bi)
    out_re, out_im = exp(*_annex_g_multiply(br, bi, *log(ar, ai)))
    # NumPy's integer exponents: binary powering over the 7 bits of |b| < 100
    n = np.abs(br)
    one, zero = np.ones_like(ar), np.zeros_like(ar)
    acc = (one, zero)
    p = (ar, ai)
    for bit in range(7):
        on = np.fmod(np.floor(n * 2.0**-bit), 2.0) == 1.0
        t = _cmul(acc, p)
        acc = np.where(on, t[0], acc[0]), np.where(on, t[1], acc[1])
        p = _cmul(p, p)
    inv = divide(one, zero, acc[0], acc[1])
    acc = np.where(br < 0, inv[0], acc[0]), np.where(br < 0, inv[1], acc[1])
    sq = _cmul((ar, ai), (ar, ai))
    cube = _cmul((ar, ai), sq)
    picks = [(br == 1, (ar, ai)), (br == 2, sq), (br == 3, cube)]
    integer = (bi == 0) & (br > -100) & (br < 100) & (np.trunc(br) == br)
    for cond, val in picks:
        acc = np.where(cond, val[0], acc[0]), np.where(cond, val[1], acc[1])
    out_re, out_im = np.where(integer, acc[0], out_re), np.where(integer, acc[1], out_im)
    a_zero = (ar == 0) & (ai == 0)
    out_re = np.where(a_zero, np.where(br > 0, 0.0, np.nan * one), out_re)
    out_im = np.where(a_zero, np.where(br > 0, 0.0, np.nan * one), out_im)
    b_zero = (br == 0) & (bi == 0)
    return np.where(b_zero, 1.0, out_re), np.where(b_zero, 0.0, out_im)


def _annex_g_multiply(a: Array, b: Array, c: Array, d: Array) -> Pair:
    """(a + ib)(c + id) as C's complex multiply (libgcc's __muldc3, in the C library's cpow): the plain
    products, except where both parts come out NaN: then an infinite operand, or else an overflowing
    product, is recovered as C99 Annex G says (NaN parts taken as zeros, infinite ones as +-1, times inf)."""
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    x, y = ac - bd, ad + bc
    zero = np.zeros_like(a)

    def box(v):
        return np.copysign(np.where(np.isinf(v), 1.0, zero), v)

    def unnan(v, cond):
        return np.where(cond & np.isnan(v), np.copysign(zero, v), v)

    ab_inf = np.isinf(a) | np.isinf(b)
    cd_inf = np.isinf(c) | np.isinf(d)
    a, b = np.where(ab_inf, box(a), a), np.where(ab_inf, box(b), b)
    c, d = unnan(c, ab_inf), unnan(d, ab_inf)
    c, d = np.where(cd_inf, box(c), c), np.where(cd_inf, box(d), d)
    a, b = unnan(a, cd_inf), unnan(b, cd_inf)
    overflow = ~ab_inf & ~cd_inf & (np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc))
    a, b, c, d = unnan(a, overflow), unnan(b, overflow), unnan(c, overflow), unnan(d, overflow)
    recalc = np.isnan(x) & np.isnan(y) & (ab_inf | cd_inf | overflow)
    return (np.where(recalc, np.inf * (a * c - b * d), x), np.where(recalc, np.inf * (a * d + b * c), y))


def _cmul(a: Pair, b: Pair) -> Pair:
    """npymath's cmul: each product rounded."""
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


# --- trigonometric and hyperbolic ----------------------------------------------------------------------


def _sinh_cosh_times(x: Array, a: Array, b: Array, lim: _Limits) -> Pair:
    """(sinh(x) a, cosh(x) b), as glibc: beyond T both are sign(x) e**|x| / 2, taken by _times_exp so that it
    overflows only where the product does."""
    big = np.abs(x) > lim.exp_split
    far_a, far_b = _times_exp(np.where(big, np.abs(x), 0.0), a * np.copysign(1.0, x), b, lim, 0.5)
    near = np.where(big, 0.0, x)
    return np.where(big, far_a, np.sinh(near) * a), np.where(big, far_b, np.cosh(near) * b)


def sinh(re: Array, im: Array) -> Pair:
    """(sinh re cos im, cosh re sin im), with C99 Annex G's (glibc's) infinities and NaNs."""
    re, im, lim = _pair(re, im)
    out_re, out_im = _sinh_cosh_times(re, np.cos(im), np.sin(im), lim)
    re_inf, im_fin = np.isinf(re), np.isfinite(im)
    # finite re, im infinite or NaN: (+-0, NaN) for a zero re, else NaN; infinite re: (inf, NaN)
    out_re = np.where(~im_fin, np.where(re == 0, re, np.where(re_inf, np.abs(re), np.nan)), out_re)
    out_im = np.where(~im_fin, np.nan, out_im)
    # a zero im stays (sinh re, im): inf * 0 would be NaN
    out_re = np.where(re_inf & (im == 0), re, out_re)
    return out_re, np.where(im == 0, im, out_im)


def cosh(re: Array, im: Array) -> Pair:
    """(cosh re cos im, sinh re sin im), with C99 Annex G's (glibc's) infinities and NaNs."""
    re, im, lim = _pair(re, im)
    out_im, out_re = _sinh_cosh_times(re, np.sin(im), np.cos(im), lim)
    re_inf, im_fin = np.isinf(re), np.isfinite(im)
    out_re = np.where(~im_fin, np.where(re_inf, np.abs(re), np.nan), out_re)
    out_im = np.where(~im_fin, np.where(re == 0, np.abs(re), np.nan), out_im)
    zero_im = im == 0
    out_re = np.where(re_inf & zero_im, np.inf, out_re)
    out_im = np.where(zero_im, np.where(np.isnan(re), im, im * np.copysign(1.0, re)), out_im)
    return out_re, out_im


def tanh(re: Array, im: Array) -> Pair:
    """glibc's ctanh: (sinh x cosh x, sin y cos y) / (sinh**2 x + cos**2 y); beyond |x| = T/2 it is
    (sign x, 4 sin y cos y e**(-2|x|)), the exponential divided out in two steps."""
    re, im, lim = _pair(re, im)
    s, c = np.sin(im), np.cos(im)
    ax = np.abs(re)
    big = ax > lim.tanh_split
    xs = np.where(big, 0.0, re)
    sh, ch = np.sinh(xs), np.cosh(xs)
    den = sh * sh + c * c
    out_re = sh * ch / den
    out_im = s * c / den
    rest = ax - lim.tanh_split
    far = (4.0 * s * c) / lim.exp_2tanh_split
    far = np.where(rest > lim.tanh_split, far / lim.exp_2tanh_split, far / np.exp(2.0 * np.where(big, rest, 0.0)))
    out_re = np.where(big, np.copysign(1.0, re), out_re)
    out_im = np.where(big, far, out_im)
    # glibc's cases for a part infinite or NaN: an infinite re gives (+-1, +-0), the zero's sign that of
    # sin(2 im) for a finite |im| > 1, else im's; otherwise (re, im) for a zero im, (+-0, NaN) for a zero re,
    # else NaN
    nonfinite = _nonfinite(re, im)
    re_inf = np.isinf(re)
    inf_im = np.where(np.isfinite(im) & (np.abs(im) > 1.0), np.copysign(0.0, s * c), np.copysign(0.0, im))
    other_re = np.where((im == 0) | (re == 0), re, np.nan)
    other_im = np.where(im == 0, im, np.nan)
    out_re = np.where(nonfinite, np.where(re_inf, np.copysign(1.0, re), other_re), out_re)
    out_im = np.where(nonfinite, np.where(re_inf, inf_im, other_im), out_im)
    return out_re, out_im


def sin(re: Array, im: Array) -> Pair:
    """-i sinh(iz) (C99's definition); glibc's +inf imaginary part for an infinite im and a re that is not
    finite."""
    re, im, _ = _pair(re, im)
    out_re, out_im = _swap_i(sinh(-im, re))
    return out_re, np.where(np.isinf(im) & ~np.isfinite(re), np.inf, out_im)


def cos(re: Array, im: Array) -> Pair:
    """cosh(iz) (C99's definition)."""
    return cosh(-im, re)


def tan(re: Array, im: Array) -> Pair:
    """-i tanh(iz) (C99's definition)."""
    return _swap_i(tanh(-im, re))


# --- inverse functions -------------------------------------------------------------------------------


def _asin_finite(re: Array, im: Array, lim: _Limits) -> Pair:
    """Kahan's arcsin of a finite z: (arctan2(re, Re(sqrt(1-z) sqrt(1+z))), arcsinh(Im(conj(sqrt(1-z))
    sqrt(1+z)))); the products' two terms never cancel, so each part is accurate. A tiny z is its own arcsine
    (the square roots would lose a subnormal's bits)."""
    ar, ai = sqrt(1.0 - re, -im)
    br, bi = sqrt(1.0 + re, im)
    out_re = np.arctan2(re, ar * br - ai * bi)
    out_im = np.arcsinh(ar * bi - ai * br)
    tiny = np.maximum(np.abs(re), np.abs(im)) < 0.5 * math.sqrt(lim.eps)
    return np.where(tiny, re, out_re), np.where(tiny, im, out_im)


def _asinh_nonfinite(re: Array, im: Array) -> Pair:
    """glibc's casinh where a part is infinite or NaN: an infinite im gives (+-inf, +-pi/4 for an infinite re,
    +-pi/2 for a finite one, NaN for a NaN one); an infinite or NaN re (im finite or NaN) gives (re, +-0 for a
    finite im beside an infinite re or a zero im beside a NaN re, else NaN); a NaN im beside a finite re, NaN."""
    re_inf, im_inf, re_nan, im_nan = np.isinf(re), np.isinf(im), np.isnan(re), np.isnan(im)
    corner = np.where(re_inf, 0.25 * math.pi, _full(re, 0.5 * math.pi))
    out_re = np.where(im_inf, np.copysign(np.inf, re), np.where(re_inf | re_nan, re, np.nan))
    zero = (re_inf & ~im_nan) | (re_nan & (im == 0))
    out_im = np.where(
        im_inf, np.where(re_nan, np.nan, np.copysign(corner, im)), np.where(zero, np.copysign(0.0, im), np.nan)
    )
    return out_re, out_im


def _asin_nonfinite(re: Array, im: Array) -> Pair:
    """glibc's casin where a part is infinite or NaN: -i casinh(iz), except its own NaN cases: (+-0, NaN) for a
    zero re, (NaN, +-inf) beside an infinity, else NaN."""
    out_re, out_im = _swap_i(_asinh_nonfinite(-im, re))
    nan = np.isnan(re) | np.isnan(im)
    inf = np.copysign(np.where(np.isinf(re) | np.isinf(im), np.inf, _full(im, np.nan)), im)
    out_re = np.where(nan, np.where(re == 0, re, np.nan), out_re)
    out_im = np.where(nan, np.where(re == 0, im, inf), out_im)
    return out_re, out_im


def arcsin(re: Array, im: Array) -> Pair:
    """Kahan's arcsin; glibc's infinities and NaNs."""
    re, im, lim = _pair(re, im)
    out_re, out_im = _asin_finite(re, im, lim)
    special = _nonfinite(re, im)
    nf_re, nf_im = _asin_nonfinite(re, im)
    return np.where(special, nf_re, out_re), np.where(special, nf_im, out_im)


def arcsinh(re: Array, im: Array) -> Pair:
    """i arcsin(-iz) by Kahan's arcsin (C99's definition); glibc's infinities and NaNs."""
    re, im, lim = _pair(re, im)
    p, q = _asin_finite(im, -re, lim)
    special = _nonfinite(re, im)
    nf_re, nf_im = _asinh_nonfinite(re, im)
    return np.where(special, nf_re, -q), np.where(special, nf_im, p)


def arccos(re: Array, im: Array) -> Pair:
    """Kahan's arccos: (2 arctan2(Re sqrt(1-z), Re sqrt(1+z)), arcsinh(Im(conj(sqrt(1+z)) sqrt(1-z)))); where a
    part is infinite or NaN, glibc's pi/2 - arcsin(z) (a +0 real part, never -0)."""
    re, im, lim = _pair(re, im)
    ar, ai = sqrt(1.0 - re, -im)
    br, bi = sqrt(1.0 + re, im)
    out_re = 2.0 * np.arctan2(ar, br)
    out_im = np.arcsinh(br * ai - bi * ar)
    tiny = np.maximum(np.abs(re), np.abs(im)) < 0.5 * math.sqrt(lim.eps)
    out_im = np.where(tiny, -im, out_im)
    special = _nonfinite(re, im)
    nf_re, nf_im = _asin_nonfinite(re, im)
    nf_re = 0.5 * math.pi - nf_re
    return np.where(special, np.where(nf_re == 0, 0.0, nf_re), out_re), np.where(special, -nf_im, out_im)


def arccosh(re: Array, im: Array) -> Pair:
    """Kahan's arccosh: (arcsinh(Re(conj(sqrt(z-1)) sqrt(z+1))), 2 arctan2(Im sqrt(z-1), Re sqrt(z+1)));
    C99 Annex G's (glibc's) infinities and NaNs."""
    re, im, lim = _pair(re, im)
    ar, ai = sqrt(re - 1.0, im)
    br, bi = sqrt(re + 1.0, im)
    out_re = np.arcsinh(ar * br + ai * bi)
    out_im = 2.0 * np.arctan2(ai, br)
    re_inf, im_inf = np.isinf(re), np.isinf(im)
    re_nan, im_nan = np.isnan(re), np.isnan(im)
    # im infinite: (inf, +-pi/2, or +-pi/4 / +-3pi/4 for an infinite re, NaN for a NaN re)
    corner = np.where(re < 0, 0.75 * math.pi, _full(re, 0.25 * math.pi))
    angle_ = np.where(re_inf, corner, 0.5 * math.pi)
    out_re = np.where(im_inf, np.inf, out_re)
    out_im = np.where(im_inf, np.where(re_nan, np.nan, np.copysign(angle_, im)), out_im)
    # re infinite, im finite or NaN: (inf, +-0 or +-pi, NaN for NaN im)
    side = np.where(np.signbit(re), math.pi, _full(re, 0.0))
    infinite_re = re_inf & ~im_inf
    out_re = np.where(infinite_re, np.inf, out_re)
    out_im = np.where(infinite_re, np.where(im_nan, np.nan, np.copysign(side, im)), out_im)
    # a NaN part otherwise: (NaN, pi/2 for a zero re, else NaN)
    nan_rest = (re_nan | im_nan) & ~re_inf & ~im_inf
    out_re = np.where(nan_rest, np.nan, out_re)
    out_im = np.where(nan_rest, np.where(re == 0, 0.5 * math.pi, _full(re, np.nan)), out_im)
    zero = (re == 0) & (im == 0)
    out_re = np.where(zero, 0.0, out_re)
    out_im = np.where(zero, np.copysign(0.5 * math.pi, im), out_im)
    return out_re, out_im


def _real_of_reciprocal(x: Array, y: Array) -> Array:
    """Re(1 / (x + iy)) for a huge |z| as glibc's catanh (no overflow of x*x + y*y)."""
    h = np.hypot(0.5 * x, 0.5 * y)
    return np.where(np.abs(y) <= 1.0, 1.0 / x, np.where(np.abs(x) <= 1.0, x / y / y, x / h / h / 4.0))


def arctanh(re: Array, im: Array) -> Pair:
    """glibc's catanh: (log1p(4|x| / ((1 - |x|)**2 + y**2)) / 4, arctan2(2y, (1 - x)(1 + x) - y**2) / 2), signs
    from z, the denominator by _x2y2m1 near |z| == 1; Re(1/z) and +-pi/2 for a huge z."""
    re, im, lim = _pair(re, im)
    ax, ay = np.abs(re), np.abs(im)
    # real part
    d = (1.0 - ax) * (1.0 - ax) + np.where(ay < lim.eps * lim.eps, 0.0, ay * ay)
    out_re = np.copysign(0.25 * np.log1p(4.0 * ax / d), re)
    pole = (ax == 1.0) & (ay < lim.eps * lim.eps)
    out_re = np.where(pole, np.copysign(0.5 * (_LN2 - np.log(np.where(pole, ay, 1.0))), re), out_re)
    # imaginary part: the denominator (1 - |z|**2) by the larger and smaller parts
    m, n = np.maximum(ax, ay), np.minimum(ax, ay)
    plain = (1.0 - m) * (1.0 + m) - np.where(n < 0.5 * lim.eps, 0.0, n * n)
    near = (m < 1.0) & ((m >= 0.75) | (n >= 0.5)) & (n >= 0.5 * lim.eps)
    den = np.where(near, -_x2y2m1(np.where(near, m, 1.0), np.where(near, n, 0.0), lim), plain)
    den = np.where(den == 0, 0.0, den)  # +0, as glibc: the cut's side comes from im's sign alone
    out_im = 0.5 * np.arctan2(2.0 * im, den)
    huge = (ax >= 16.0 / lim.eps) | (ay >= 16.0 / lim.eps)
    out_re = np.where(huge, _real_of_reciprocal(re, im), out_re)
    out_im = np.where(huge, np.copysign(0.5 * math.pi, im), out_im)
    # glibc's cases for a part infinite or NaN: (+-0, +-pi/2) for an infinite im, and for an infinite or zero
    # re (NaN for a NaN im); else NaN
    nonfinite = ~np.isfinite(re) | ~np.isfinite(im)
    edge = np.isinf(im) | np.isinf(re) | (re == 0)
    out_re = np.where(nonfinite, np.where(edge, np.copysign(0.0, re), np.nan), out_re)
    out_im = np.where(nonfinite, np.where(edge & ~np.isnan(im), np.copysign(0.5 * math.pi, im), np.nan), out_im)
    zero = (re == 0) & (im == 0)
    return np.where(zero, re, out_re), np.where(zero, im, out_im)


def arctan(re: Array, im: Array) -> Pair:
    """-i arctanh(iz) (C99's definition)."""
    return _swap_i(arctanh(-im, re))
