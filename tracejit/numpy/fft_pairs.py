"""NumPy's np.fft on complex arrays held as pairs (re, im) of real arrays, in whole-array operations that trace:
a Stockham mixed-radix FFT (radix 4, 2, 3, 5) for lengths 2^a 3^b 5^c, Bluestein's chirp-z for any other."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tracejit.numpy import creation
from tracejit.numpy.tensor import Tensor

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

Pair = tuple  # (re, im): two real arrays (ndarrays or traced) of one float dtype and shape

fftfreq = np.fft.fftfreq
rfftfreq = np.fft.rfftfreq

_NORMS = ("backward", "ortho", "forward")


# --- the public functions, NumPy's signatures with a pair for each complex array -------------------------------


def fft(re, im, n: int | None = None, axis: int = -1, norm: str | None = None, inverse: bool = False) -> Pair:
    """np.fft.fft (np.fft.ifft with inverse=True) of re + 1j*im along `axis`, cropped or zero-padded to n."""
    n = re.shape[axis] if n is None else n
    scale = _scale(norm, n, inverse)
    re, im = (_resized(np.moveaxis(v, axis, -1), n) for v in (re, im))
    re, im = _transform(re, im, 1.0 if inverse else -1.0)
    return _moved_back(_scaled((re, im), scale), axis)


def ifft(re, im, n: int | None = None, axis: int = -1, norm: str | None = None) -> Pair:
    """np.fft.ifft."""
    return fft(re, im, n, axis, norm, inverse=True)


def rfft(x, n: int | None = None, axis: int = -1, norm: str | None = None) -> Pair:
    """np.fft.rfft of the real x: the n//2 + 1 non-negative frequencies."""
    n = x.shape[axis] if n is None else n
    scale = _scale(norm, n, False)
    x = _resized(np.moveaxis(x, axis, -1), n)
    out = _real_forward(x) if n % 2 == 0 else _real_forward_odd(x)
    return _moved_back(_scaled(out, scale), axis)


def irfft(re, im, n: int | None = None, axis: int = -1, norm: str | None = None):
    """np.fft.irfft: the real signal of length n (default 2*(m-1)) whose rfft is re + 1j*im; as NumPy, the
    imaginary parts of the zero-frequency bin and (n even) of the Nyquist bin are ignored."""
    n = 2 * (re.shape[axis] - 1) if n is None else n
    scale = _scale(norm, n, True)
    re, im = (_resized(np.moveaxis(v, axis, -1), n // 2 + 1) for v in (re, im))
    x = _real_inverse(re, im, n) if n % 2 == 0 else _real_inverse_odd(re, im, n)
    return np.moveaxis(x * scale if scale != 1.0 else x, -1, axis)


def hfft(re, im, n: int | None = None, axis: int = -1, norm: str | None = None):
    """np.fft.hfft: the real spectrum of a signal with Hermitian symmetry, given its first half."""
    n = 2 * (re.shape[axis] - 1) if n is None else n
    return irfft(re, -im, n, axis, _swapped(norm))


def ihfft(x, n: int | None = None, axis: int = -1, norm: str | None = None) -> Pair:
    """np.fft.ihfft: the inverse of hfft."""
    re, im = rfft(x, n, axis, _swapped(norm))
    return re, -im


def fftn(
    re,
    im,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    inverse: bool = False,
) -> Pair:
    """np.fft.fftn (ifftn with inverse=True): fft along each of `axes` (default: all, or the last len(s))."""
    s, axes = _shape_and_axes(re, s, axes)
    for size, axis in reversed(list(zip(s, axes))):
        re, im = fft(re, im, size, axis, norm, inverse)
    return re, im


def ifftn(re, im, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Pair:
    """np.fft.ifftn."""
    return fftn(re, im, s, axes, norm, inverse=True)


def fft2(
    re,
    im,
    s: Sequence[int] | None = None,
    axes: Sequence[int] = (-2, -1),
    norm: str | None = None,
    inverse: bool = False,
) -> Pair:
    """np.fft.fft2 (ifft2 with inverse=True): fftn over the last two axes."""
    return fftn(re, im, s, axes, norm, inverse)


def ifft2(re, im, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Pair:
    """np.fft.ifft2."""
    return fftn(re, im, s, axes, norm, inverse=True)


def rfftn(x, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Pair:
    """np.fft.rfftn: rfft along the last of `axes`, then fft along the others."""
    s, axes = _shape_and_axes(x, s, axes)
    re, im = rfft(x, s[-1], axes[-1], norm)
    for size, axis in reversed(list(zip(s[:-1], axes[:-1]))):
        re, im = fft(re, im, size, axis, norm)
    return re, im


def irfftn(re, im, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None):
    """np.fft.irfftn: ifft along all but the last of `axes`, then irfft along the last (default length
    2*(m-1))."""
    shapeless = s is None
    s, axes = _shape_and_axes(re, s, axes)
    if shapeless:
        s[-1] = 2 * (re.shape[axes[-1]] - 1)
    for size, axis in zip(s[:-1], axes[:-1]):
        re, im = fft(re, im, size, axis, norm, inverse=True)
    return irfft(re, im, s[-1], axes[-1], norm)


def rfft2(x, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Pair:
    """np.fft.rfft2."""
    return rfftn(x, s, axes, norm)


def irfft2(re, im, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None):
    """np.fft.irfft2."""
    return irfftn(re, im, s, axes, norm)


def fftshift(x, axes: int | Sequence[int] | None = None):
    """np.fft.fftshift: the zero frequency moved to the middle of each of `axes` (default: all)."""
    return _rolled(x, axes, lambda size: size // 2)


def ifftshift(x, axes: int | Sequence[int] | None = None):
    """np.fft.ifftshift: the inverse of fftshift."""
    return _rolled(x, axes, lambda size: -(size // 2))


# --- arguments ---------------------------------------------------------------------------------------------------


def _scale(norm: str | None, n: int, inverse: bool) -> float:
    """The factor NumPy multiplies the unnormalised transform of length n by."""
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _swapped(norm: str | None) -> str | None:
    """hfft's and ihfft's norm: the one of the opposite direction."""
    return {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}.get(norm, norm)


def _shape_and_axes(x, s: Sequence[int] | None, axes: Sequence[int] | None) -> tuple[list, list]:
    """fftn's lengths and axes as NumPy derives them (a length of -1 or None: the whole axis)."""
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(-len(s), 0))
    axes = [int(a) for a in axes]
    s = [x.shape[a] for a in axes] if s is None else list(s)
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    return [x.shape[a] if size in (-1, None) else size for size, a in zip(s, axes)], axes


def _rolled(x, axes, shift: Callable[[int], int]):
    """np.roll of x by shift(length) along each of `axes` (default: all)."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    if isinstance(axes, (int, np.integer)):
        return np.roll(x, shift(x.shape[axes]), axes)
    return np.roll(x, tuple(shift(x.shape[a]) for a in axes), tuple(axes))


# --- array plumbing ----------------------------------------------------------------------------------------------


def _resized(x, n: int):
    """x cropped or zero-padded to n along its last axis."""
    m = x.shape[-1]
    if n <= m:
        return x[..., :n]
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - m)])


def _moved_back(pair: Pair, axis: int) -> Pair:
    return np.moveaxis(pair[0], -1, axis), np.moveaxis(pair[1], -1, axis)


def _scaled(pair: Pair, scale: float) -> Pair:
    # a Python float is weak (NEP 50): float32 stays float32
    return pair if scale == 1.0 else (pair[0] * scale, pair[1] * scale)


def _arange(like, n: int, dtype):
    """np.arange(n) as an index array for arithmetic with `like`: a traced index expression when `like` is
    traced (this module is tracejit's, so np.arange here is NumPy's and would be embedded as a table)."""
    return creation.arange(n, dtype=dtype) if isinstance(like, Tensor) else np.arange(n, dtype=dtype)


def _index_dtype(largest: int) -> np.dtype:
    """int32 where the index products fit (every device has it; webgpu has no int64), else int64."""
    return np.dtype(np.int32) if largest < 2**31 else np.dtype(np.int64)


def _unit(like, k, n: int, sign: float) -> Pair:
    """exp(sign * 2j*pi * k/n) for the integer array k with 0 <= k < n, in like's dtype. k is brought to
    [-n/2, n/2) first, exactly in integers, so the angle's rounding error stays at most pi times eps."""
    k = (k + n // 2) % n - n // 2
    angle = k.astype(like.dtype) * (sign * 2.0 * math.pi / n)
    return np.cos(angle), np.sin(angle)


def _powers(like, k, n: int, count: int, sign: float) -> list[Pair]:
    """w^(s*k) for s = 1 .. count, w = exp(sign * 2j*pi / n). In float64 one cos and sin, the rest products of
    them (a few ulps, far below NumPy's error); float32 computes each power's own, since a product adds up its
    factors' angle errors (up to ulp(pi)) and would take the error towards 1e-6."""
    if like.dtype != np.float64:
        return [_unit(like, k * s, n, sign) for s in range(1, count + 1)]
    out = [_unit(like, k, n, sign)]
    for s in range(2, count + 1):
        out.append(_mul(out[s // 2 - 1], out[s - s // 2 - 1]))
    return out


# --- complex arithmetic on pairs ---------------------------------------------------------------------------------


def _add(a: Pair, b: Pair) -> Pair:
    return a[0] + b[0], a[1] + b[1]


def _sub(a: Pair, b: Pair) -> Pair:
    return a[0] - b[0], a[1] - b[1]


def _mul(a: Pair, b: Pair) -> Pair:
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def _times(a: Pair, c: float) -> Pair:
    return a[0] * c, a[1] * c


def _times_i(a: Pair, c: float) -> Pair:
    """a * (c*1j) for a real c."""
    return -a[1] * c, a[0] * c


# --- butterflies: out[p] = sum_s w^(s*p) z[s], w = exp(sign * 2j*pi / r) -----------------------------------------

_SIN60 = math.sqrt(3.0) / 2.0
_COS72, _SIN72 = math.cos(2 * math.pi / 5), math.sin(2 * math.pi / 5)
_COS144, _SIN144 = math.cos(4 * math.pi / 5), math.sin(4 * math.pi / 5)


def _radix2(z: list, sign: float) -> list:
    return [_add(z[0], z[1]), _sub(z[0], z[1])]


def _radix3(z: list, sign: float) -> list:
    t1 = _add(z[1], z[2])
    t2 = _sub(z[0], _times(t1, 0.5))
    t3 = _times_i(_sub(z[1], z[2]), sign * _SIN60)
    return [_add(z[0], t1), _add(t2, t3), _sub(t2, t3)]


def _radix4(z: list, sign: float) -> list:
    a0, a1 = _add(z[0], z[2]), _sub(z[0], z[2])
    a2, a3 = _add(z[1], z[3]), _times_i(_sub(z[1], z[3]), sign)
    return [_add(a0, a2), _add(a1, a3), _sub(a0, a2), _sub(a1, a3)]


def _radix5(z: list, sign: float) -> list:
    a1, b1 = _add(z[1], z[4]), _sub(z[1], z[4])
    a2, b2 = _add(z[2], z[3]), _sub(z[2], z[3])
    c1 = _add(z[0], _add(_times(a1, _COS72), _times(a2, _COS144)))
    c2 = _add(z[0], _add(_times(a1, _COS144), _times(a2, _COS72)))
    s1 = _times_i(_add(_times(b1, _SIN72), _times(b2, _SIN144)), sign)
    s2 = _times_i(_sub(_times(b1, _SIN144), _times(b2, _SIN72)), sign)
    return [_add(z[0], _add(a1, a2)), _add(c1, s1), _add(c2, s2), _sub(c2, s2), _sub(c1, s1)]


_BUTTERFLIES = {2: _radix2, 3: _radix3, 4: _radix4, 5: _radix5}


def _radices(n: int) -> list[int] | None:
    """n's factors among 4, 2, 3, 5 (fours first, at most one two), or None where n has another prime factor."""
    out = []
    for r in (4, 2, 3, 5):
        while n % r == 0:
            out.append(r)
            n //= r
    return out if n == 1 else None


# --- complex transforms along the last axis, unnormalised -----------------------------------------------------


def _transform(re, im, sign: float) -> Pair:
    """sum_j x[j] exp(sign * 2j*pi * j*k/n) along the last axis."""
    n = re.shape[-1]
    radices = _radices(n)
    if radices is None:
        return _bluestein(re, im, sign)
    return _stockham(re, im, radices, sign)


def _stockham(re, im, radices: list[int], sign: float) -> Pair:
    """Stockham's autosort FFT, decimation in time. Before a stage of radix r the data is (..., L, M): for each
    q < M the length-L transforms of the subsequence x[q + M*j]; the stage splits q = s*M/r + q', combines the r
    transforms of x[q' + (M/r)*(s + r*j)] into one of length L*r, and leaves (..., L*r, M/r)."""
    shape, n = re.shape, re.shape[-1]
    y = (re.reshape(*shape[:-1], 1, n), im.reshape(*shape[:-1], 1, n))
    length = 1
    for r in radices:
        y = _stage(y, r, length, n // (length * r), sign)
        length *= r
    return y[0].reshape(shape), y[1].reshape(shape)


def _stage(y: Pair, r: int, length: int, m: int, sign: float) -> Pair:
    """(..., L, r*m) -> (..., r*L, m): out[..., k + L*p, q] = sum_s w_r^(s*p) * w_(L*r)^(s*k) * y[..., k, s*m + q]."""
    batch = y[0].shape[:-2]
    re, im = (v.reshape(*batch, length, r, m) for v in y)
    z = [(re[..., s, :], im[..., s, :]) for s in range(r)]
    if length > 1:
        k = _arange(y[0], length, _index_dtype(2 * length * r)).reshape(length, 1)
        z = [z[0]] + [_mul(z[s], w) for s, w in enumerate(_powers(y[0], k, length * r, r - 1, sign), 1)]
    out = _BUTTERFLIES[r](z, sign)
    return tuple(np.stack([o[part] for o in out], axis=-3).reshape(*batch, r * length, m) for part in (0, 1))


def _bluestein(re, im, sign: float) -> Pair:
    """Bluestein's chirp-z: with c[j] = exp(sign * 1j*pi * j^2/n), X[k] = c[k] * sum_j (x[j] c[j]) conj(c[k-j]),
    a convolution done by power-of-two FFTs of length m >= 2n - 1."""
    shape, n = re.shape, re.shape[-1]
    m = 1 << (2 * n - 2).bit_length()
    batch = math.prod(shape[:-1])
    dt = _index_dtype((n - 1) ** 2 + 2 * n)
    chirp = _chirp(re, _arange(re, n, dt), n, sign)
    a = _resized_pair(_mul((re.reshape(batch, n), im.reshape(batch, n)), chirp), m)
    # conj(c) at the distances j = 0 .. n-1 and m-j = 1 .. n-1 (the convolution wraps around), zero between
    j = _arange(re, m, dt)
    j = np.minimum(j, m - j)
    filter_ = _chirp(re, np.minimum(j, n - 1), n, -sign)
    rows = [(v * (j < n)).reshape(1, m) for v in filter_]
    # the filter is transformed as one more row of the batch: alone, made of constants, its stages would be
    # fused into one another's index expressions (or evaluated while tracing) instead of stored between
    both = _transform(np.concatenate([a[0], rows[0]], axis=0), np.concatenate([a[1], rows[1]], axis=0), -1.0)
    spectrum = _mul((both[0][:batch], both[1][:batch]), (both[0][batch:], both[1][batch:]))
    conv = _resized_pair(_transform(spectrum[0], spectrum[1], 1.0), n)
    out = _mul(_scaled(conv, 1.0 / m), chirp)
    return out[0].reshape(shape), out[1].reshape(shape)


def _chirp(like, j, n: int, sign: float) -> Pair:
    """exp(sign * 1j*pi * j^2/n) = exp(sign * 2j*pi * (j^2 mod 2n) / 2n), in integers until the last step."""
    return _unit(like, (j * j) % (2 * n), 2 * n, sign)


def _resized_pair(pair: Pair, n: int) -> Pair:
    return _resized(pair[0], n), _resized(pair[1], n)


# --- real transforms along the last axis, unnormalised ---------------------------------------------------------


def _real_forward(x) -> Pair:
    """rfft for an even length n by one complex FFT of half the length: z = x[0::2] + 1j*x[1::2], then
    X[k] = E[k] + w^k O[k] with E[k] = (Z[k] + conj(Z[h-k]))/2, O[k] = (Z[k] - conj(Z[h-k]))/2j, w = e^(-2j*pi/n)."""
    n = x.shape[-1]
    h = n // 2
    pairs = x.reshape(*x.shape[:-1], h, 2)
    z = _transform(pairs[..., 0], pairs[..., 1], -1.0)
    # Z[k] and Z[(h-k) mod h] for k = 0 .. h
    ahead = tuple(np.concatenate([v, v[..., :1]], axis=-1) for v in z)
    mirror = tuple(np.flip(v, axis=-1) for v in ahead)
    even = _times(_add(ahead, (mirror[0], -mirror[1])), 0.5)
    odd = _times_i(_sub(ahead, (mirror[0], -mirror[1])), -0.5)
    twiddle = _unit(x, _arange(x, h + 1, _index_dtype(2 * n)), n, -1.0)
    return _add(even, _mul(odd, twiddle))


def _real_forward_odd(x) -> Pair:
    """rfft for an odd length: the complex FFT of x + 0j, its first n//2 + 1 bins."""
    n = x.shape[-1]
    re, im = _transform(x, np.zeros_like(x), -1.0)
    return re[..., : n // 2 + 1], im[..., : n // 2 + 1]


def _real_inverse(re, im, n: int):
    """irfft for an even length n (h + 1 = n/2 + 1 bins) by one complex inverse FFT of length h:
    Z[k] = (X[k] + conj(X[h-k])) + 1j * w^-k (X[k] - conj(X[h-k])), x[2j] + 1j*x[2j+1] = IFFT(Z)[j]."""
    h = n // 2
    # NumPy ignores the imaginary parts of the zero-frequency and Nyquist bins
    zero = np.zeros_like(im[..., :1])
    im = np.concatenate([zero, im[..., 1:h], zero], axis=-1)
    mirror = (np.flip(re, axis=-1)[..., :h], -np.flip(im, axis=-1)[..., :h])
    ahead = (re[..., :h], im[..., :h])
    twiddle = _unit(re, _arange(re, h, _index_dtype(2 * n)), n, 1.0)
    z = _add(_add(ahead, mirror), _times_i(_mul(_sub(ahead, mirror), twiddle), 1.0))
    even, odd = _transform(z[0], z[1], 1.0)
    return np.stack([even, odd], axis=-1).reshape(*re.shape[:-1], n)


def _real_inverse_odd(re, im, n: int):
    """irfft for an odd length: the real part of the complex inverse FFT of the Hermitian spectrum."""
    full_re = np.concatenate([re, np.flip(re[..., 1:], axis=-1)], axis=-1)
    full_im = np.concatenate([im, -np.flip(im[..., 1:], axis=-1)], axis=-1)
    return _transform(full_re, full_im, 1.0)[0]
