"""Philox-4x32-10 (Salmon et al., SC'11: "Parallel random numbers: as easy as 1, 2, 3") as element-wise graph
ops on uint32 only, so that it fuses and runs alike on every target (WGSL has no 64-bit integers), and the
conversions of its words to uniform floats and bounded integers."""

from __future__ import annotations

import math

import numpy as np

from tracejit.ir import build
from tracejit.ir.graph import Node, Op

U32 = np.dtype("uint32")
ROUNDS = 10
M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key schedule's increments (golden ratio, sqrt(3) - 1)


def _c(value: int, shape) -> Node:
    return build.const(value, U32, shape)


def _op(op: Op, a: Node, b) -> Node:
    return build.binary(op, a, b if isinstance(b, Node) else _c(b, a.shape))


def mulhilo(a: Node, m: int) -> tuple[Node, Node]:
    """The high and low words of the 64-bit product a * m, from 16-bit halves: no partial sum exceeds 32 bits,
    so nothing depends on how a target wraps a multiplication."""
    al, ah = _op(Op.AND, a, 0xFFFF), _op(Op.SHR, a, 16)
    ml, mh = m & 0xFFFF, m >> 16
    ll, lh, hl, hh = _op(Op.MUL, al, ml), _op(Op.MUL, al, mh), _op(Op.MUL, ah, ml), _op(Op.MUL, ah, mh)
    mid = _op(Op.ADD, _op(Op.ADD, _op(Op.SHR, ll, 16), _op(Op.AND, lh, 0xFFFF)), _op(Op.AND, hl, 0xFFFF))
    hi = _op(Op.ADD, _op(Op.ADD, hh, _op(Op.SHR, lh, 16)), _op(Op.ADD, _op(Op.SHR, hl, 16), _op(Op.SHR, mid, 16)))
    lo = _op(Op.OR, _op(Op.SHL, _op(Op.AND, mid, 0xFFFF), 16), _op(Op.AND, ll, 0xFFFF))
    return hi, lo


def _wrapping_add(a: Node, w: int) -> Node:
    """(a + w) mod 2**32 with sums of 16-bit halves (no sum exceeds 32 bits)."""
    low = _op(Op.ADD, _op(Op.AND, a, 0xFFFF), w & 0xFFFF)
    high = _op(Op.ADD, _op(Op.ADD, _op(Op.SHR, a, 16), w >> 16), _op(Op.SHR, low, 16))
    return _op(Op.OR, _op(Op.SHL, _op(Op.AND, high, 0xFFFF), 16), _op(Op.AND, low, 0xFFFF))


def philox4x32(counter: tuple[Node, Node, Node, Node], key: tuple[Node, Node]) -> tuple[Node, Node, Node, Node]:
    """The four output words of Philox-4x32-10 for uint32 counter words and key words of one shape."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(ROUNDS):
        if r:
            k0, k1 = _wrapping_add(k0, W0), _wrapping_add(k1, W1)
        hi0, lo0 = mulhilo(c0, M0)
        hi1, lo1 = mulhilo(c2, M1)
        c0, c1, c2, c3 = (_op(Op.XOR, _op(Op.XOR, hi1, c1), k0), lo1, _op(Op.XOR, _op(Op.XOR, hi0, c3), k1), lo0)
    return c0, c1, c2, c3


def flat_index(shape: tuple[int, ...]) -> Node:
    """Each element's C-order position, as uint32 (the caller keeps sizes below 2**32)."""
    if not shape:
        return _c(0, ())
    index, stride = None, 1
    for axis in reversed(range(len(shape))):
        term = build.iota(shape, axis, U32)
        term = term if stride == 1 else _op(Op.MUL, term, stride)
        index = term if index is None else _op(Op.ADD, index, term)
        stride *= shape[axis]
    assert index is not None  # shape is not empty
    return index


def uniform(words: tuple[Node, ...], dtype: np.dtype) -> Node:
    """Floats in [0, 1) on the grid of the dtype's mantissa: 24 bits of one word for float32 (and float16,
    rounded from it), 53 bits of two words for float64 (NumPy's own recipe); every conversion is exact."""
    if dtype == np.float64:
        a = build.cast(_op(Op.SHR, words[0], 5), dtype)
        b = build.cast(_op(Op.SHR, words[1], 6), dtype)
        shape = a.shape
        mantissa = build.binary(Op.ADD, build.binary(Op.MUL, a, build.const(2.0**26, dtype, shape)), b)
        return build.binary(Op.MUL, mantissa, build.const(2.0**-53, dtype, shape))
    f32 = np.dtype("float32")
    x = build.cast(_op(Op.SHR, words[0], 8), f32)
    x = build.binary(Op.MUL, x, build.const(2.0**-24, f32, x.shape))
    return x if dtype == f32 else build.cast(x, dtype)


def below(word: Node, n: int) -> Node:
    """Integers in [0, n) for 1 <= n <= 2**32 from one word: the high word of word * n (Lemire's multiply,
    without the rejection step: each value's probability is off by at most n / 2**32 of itself)."""
    if n == 2**32:
        return word
    if n & (n - 1) == 0:  # a power of two: the top bits, exactly uniform
        return _op(Op.SHR, word, 32 - int(math.log2(n))) if n > 1 else _c(0, word.shape)
    return mulhilo(word, n)[0]
