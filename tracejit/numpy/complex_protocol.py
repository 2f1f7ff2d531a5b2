"""NumPy's ufuncs and functions on complex traced values (complex_values.py), written with the parts' real
operations:
- elementwise ufuncs by their formulas (complex_values.py for arithmetic and comparisons, complex_math.py for
  the elementary functions);
- functions that act on each part alone (reshape, concatenate, sum, mean, cumsum, np.where's values, np.pad,
  np.round, ...: PARTWISE), applied to the real parts and to the imaginary parts;
- products (np.dot, np.vdot, @, np.einsum, np.outer, np.kron, np.convolve, ...: MULTILINEAR) expanded into
  products of parts, each one of tracejit's real products (BLAS on the numba device);
- NumPy's lexicographic order for sort, argmax, max and their kin, np.prod as a tree of complex products.
Anything else on a complex value is refused by name, not converted to NumPy."""

from __future__ import annotations

import itertools
import math

import numpy as np

from tracejit.errors import UnsupportedError
from tracejit.ir import build
from tracejit.numpy import standard
from tracejit.numpy import complex_values as C
from tracejit.numpy.complex_values import ComplexTensor, is_complex, lift, parts, result_dtype
from tracejit.numpy.assign import augmented_symbol, inplace
from tracejit.numpy.tensor import Tensor, as_node, picked_view

# -- ufuncs --------------------------------------------------------------------------------------------

_MATH_UNARY = (
    "exp log log10 log2 log1p expm1 sqrt sin cos tan sinh cosh tanh arcsin arccos arctan arcsinh arccosh arctanh "
    "square reciprocal sign"
).split()
_BINARY = {
    np.add: C.add,
    np.subtract: C.subtract,
    np.multiply: C.multiply,
    np.divide: C.divide,
    np.power: C.power,
    np.float_power: lambda a, b: C.power(C.lift(a, np.complex128), b),
    np.equal: C.equal,
    np.not_equal: C.not_equal,
    np.less: C.less,
    np.less_equal: C.less_equal,
    np.greater: C.greater,
    np.greater_equal: C.greater_equal,
    np.maximum: C.maximum,
    np.minimum: C.minimum,
    np.fmax: C.fmax,
    np.fmin: C.fmin,
    np.logical_and: lambda a, b: C.nonzero_values(a) & C.nonzero_values(b),
    np.logical_or: lambda a, b: C.nonzero_values(a) | C.nonzero_values(b),
    np.logical_xor: lambda a, b: C.nonzero_values(a) ^ C.nonzero_values(b),
    np.matmul: lambda a, b: _multilinear(np.matmul, (a, b)),
}


def _math(name: str):
    from tracejit.numpy import complex_math

    fn = getattr(complex_math, name)

    def ufunc(z):
        z = lift(z)
        return ComplexTensor(*fn(z.re, z.im))

    return ufunc


def _unary(ufunc):
    """The complex implementation of a one-operand ufunc, or None."""
    if ufunc is np.negative:
        return lambda z: C.negative(lift(z))
    if ufunc is np.positive:
        return lambda z: C.astype(z, lift(z).dtype)  # (a new array)
    if ufunc is np.conjugate:
        return lambda z: lift(z).conj()
    if ufunc is np.absolute:
        return _absolute
    if ufunc is np.isnan:
        return lambda z: np.isnan(lift(z).re) | np.isnan(lift(z).im)
    if ufunc is np.isinf:
        return lambda z: np.isinf(lift(z).re) | np.isinf(lift(z).im)
    if ufunc is np.isfinite:
        return lambda z: np.isfinite(lift(z).re) & np.isfinite(lift(z).im)
    if ufunc is np.logical_not:
        return lambda z: ~C.nonzero_values(z)
    if ufunc.__name__ in _MATH_UNARY:
        return _math(ufunc.__name__)
    return None


def _absolute(z) -> Tensor:
    from tracejit.numpy import complex_math

    z = lift(z)
    return complex_math.absolute(z.re, z.im)


def array_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    casting = kwargs.pop("casting", "same_kind")
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and method == "__call__":
        inputs = tuple(C.astype(x, dtype) for x in inputs)
    if method == "__call__" and ufunc in standard.GUFUNCS and set(kwargs) <= standard.GUFUNCS[ufunc][1]:
        result = standard.GUFUNCS[ufunc][0](*inputs, **kwargs)  # (np.vecdot & co.: conj, products and sums)
    elif method == "__call__":
        if kwargs:
            raise UnsupportedError(f"np.{ufunc.__name__} of complex values with {sorted(kwargs)}: not supported")
        result = _call(ufunc, inputs)
    elif method == "reduce":
        result = _reduce(ufunc, inputs[0], **kwargs)
    elif method == "accumulate" and ufunc is np.add:
        result = np.cumsum(inputs[0], **{"axis": 0, **kwargs})
    elif method == "outer":
        a, b = inputs
        a = np.reshape(a, np.shape(a) + (1,) * np.ndim(b))
        result = _call(ufunc, (a, b))
    elif method == "at" and ufunc in (np.add, np.subtract) and not kwargs:
        return _at(ufunc, *inputs)
    else:
        raise UnsupportedError(f"np.{ufunc.__name__}.{method} of complex values is not supported by tracejit")
    if out is None:
        if where is not True:
            raise UnsupportedError(f"np.{ufunc.__name__}(..., where=...) without out=: NumPy leaves the rest unset")
        return result
    outs = out if isinstance(out, tuple) else (out,)
    return _write_out(ufunc, outs[0], result, where, casting)


def _call(ufunc, inputs):
    if ufunc.nin == 1:
        impl = _unary(ufunc)
    else:
        impl = _BINARY.get(ufunc)
    if impl is None:
        what = f"np.{ufunc.__name__}"
        if ufunc.__name__ in ("floor_divide", "remainder", "fmod", "divmod", "hypot", "arctan2", "floor", "ceil"):
            raise UnsupportedError(f"{what} is not defined for complex numbers in NumPy")
        raise UnsupportedError(f"{what} of complex values is not supported by tracejit")
    return impl(*inputs)


def _write_out(ufunc, out, result, where, casting):
    """ufunc(..., out=out): NumPy's casting rule for the result into out, then stored where `where` holds."""
    if isinstance(result, ComplexTensor) and not isinstance(out, ComplexTensor) and casting != "unsafe":
        raise UnsupportedError(
            f"np.{ufunc.__name__}: cannot cast ufunc output from {result.dtype} to {out.dtype} with casting rule "
            f"{casting!r} (as NumPy)"
        )
    if where is not True:
        result = np.where(where, result, out)
    if isinstance(out, ComplexTensor) and (picked_view(out.re) or picked_view(out.im)):
        # z[i] op= w, i traced: each part written in place and through to z, as a real x[i] op= v (assign.inplace)
        symbol = augmented_symbol(ufunc)
        re, im = parts(result, out.re.dtype)
        inplace(out.re, re, symbol)
        inplace(out.im, im, symbol)
        return out
    out[...] = result
    return out


def _at(ufunc, a, indices, b=None):
    """np.add.at / np.subtract.at into a complex array: each part on its own."""
    if not isinstance(a, ComplexTensor):
        raise UnsupportedError(f"np.{ufunc.__name__}.at of a complex value into a real array (NumPy refuses the cast)")
    br, bi = parts(b, a.re.dtype)
    ufunc.at(a.re, indices, br)
    ufunc.at(a.im, indices, bi)


def _reduce(ufunc, z, axis=0, dtype=None, keepdims=False, initial=None, where=True):
    kwargs = {"axis": axis, "keepdims": keepdims}
    if ufunc is np.add:
        return np.sum(z, dtype=dtype, initial=initial, where=where, **kwargs)
    if ufunc is np.multiply and initial is None and where is True:
        return prod(z, dtype=dtype, **kwargs)
    if ufunc in (np.logical_and, np.logical_or) and initial is None and where is True:
        truth = C.nonzero_values(z)
        return (np.all if ufunc is np.logical_and else np.any)(truth, **kwargs)
    if ufunc in (np.maximum, np.minimum) and initial is None and where is True:
        return (amax if ufunc is np.maximum else amin)(z, **kwargs)
    raise UnsupportedError(f"np.{ufunc.__name__}.reduce of complex values is not supported by tracejit")


# -- functions that act on each part ----------------------------------------------------------------------

# NumPy function -> the positions and keywords of its arguments that are data (the rest: axes, indices,
# conditions, shapes, which both parts share); default: the first argument
_DATA = {
    np.where: (1, 2, "x", "y"),
    np.select: (1, 2, "choicelist", "default"),
    np.pad: (0, "array", "constant_values", "end_values"),
    np.append: (0, 1, "arr", "values"),
    np.insert: (0, 2, "arr", "values"),
    np.diff: (0, "a", "prepend", "append"),
    np.interp: (2, "fp", "left", "right"),
    np.atleast_1d: "all",
    np.atleast_2d: "all",
    np.atleast_3d: "all",
    np.broadcast_arrays: "all",
}
PARTWISE = frozenset(
    {
        np.reshape,
        np.transpose,
        np.moveaxis,
        np.swapaxes,
        np.squeeze,
        np.expand_dims,
        np.broadcast_to,
        np.broadcast_arrays,
        np.atleast_1d,
        np.atleast_2d,
        np.atleast_3d,
        np.ravel,
        np.flip,
        np.fliplr,
        np.flipud,
        np.rot90,
        np.roll,
        np.concatenate,
        np.stack,
        np.hstack,
        np.vstack,
        np.dstack,
        np.column_stack,
        np.split,
        np.array_split,
        np.hsplit,
        np.vsplit,
        np.dsplit,
        np.unstack,
        np.tile,
        np.repeat,
        np.take,
        np.take_along_axis,
        np.diag,
        np.diagonal,
        np.diagflat,
        np.triu,
        np.tril,
        np.trace,
        np.sum,
        np.cumsum,
        np.diff,
        np.gradient,
        np.where,
        np.select,
        np.pad,
        np.copy,
        np.ascontiguousarray,
        np.average,
        np.trapezoid,
        np.append,
        np.delete,
        np.insert,
        np.round,
        np.around,
        np.nan_to_num,
        np.interp,
        np.real_if_close,
    }
)


def _data_positions(func):
    return _DATA.get(func, (0,))


# functions of several arrays that give one array for each, of its own dtype: a real array beside a complex one
# stays real (the rest of PARTWISE computes in the arrays' common dtype)
_EACH_ITS_OWN = frozenset({np.broadcast_arrays, np.atleast_1d, np.atleast_2d, np.atleast_3d})


def _partwise(func, args, kwargs):
    if func in _EACH_ITS_OWN and len(args) > 1:
        if func is np.broadcast_arrays:
            shape = np.broadcast_shapes(*(np.shape(a) for a in args))
            return tuple(np.broadcast_to(a, shape) for a in args)
        return tuple(func(a, **kwargs) for a in args)
    spec = _data_positions(func)
    data = list(args) if spec == "all" else [a for i, a in enumerate(args) if i in spec]
    data += [v for k, v in kwargs.items() if spec != "all" and k in spec]
    leaves = [v for d in data for v in (d if isinstance(d, (list, tuple)) else (d,))]
    dtype = result_dtype(*[v for v in leaves if v is not None])
    part = C.PART[dtype]
    halves = []
    for k in (0, 1):
        a = [_pick(v, part, k) if spec == "all" or i in spec else v for i, v in enumerate(args)]
        kw = {n: (_pick(v, part, k) if spec != "all" and n in spec else v) for n, v in kwargs.items()}
        if "dtype" in kw and kw["dtype"] is not None:
            kw["dtype"] = C.PART[result_dtype(np.ones((), kw["dtype"]))]
        halves.append(func(*a, **kw))
    re, im = halves
    if isinstance(re, (list, tuple)):
        return type(re)(ComplexTensor(r, i) for r, i in zip(re, im))
    return ComplexTensor(re, im)


def _pick(x, part, k: int):
    """The real (k = 0) or imaginary (1) part of a data argument, item by item in sequences."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return type(x)(_pick(v, part, k) for v in x)
    return parts(x, part)[k]


# -- products -------------------------------------------------------------------------------------------

MULTILINEAR = {
    np.dot: None,
    np.matmul: None,
    np.inner: None,
    np.outer: None,
    np.tensordot: None,
    np.kron: None,
    np.einsum: "subscripts",
    np.convolve: None,
    np.cross: None,
    np.vdot: "conj",
    np.correlate: "conj last",
}


def _multilinear(func, operands, before=(), kwargs=None, conj=()):
    """func(*before, *operands, **kwargs) for a func linear in each operand: the sum over the choices of a
    part of each operand of func of those parts, times i to the number of imaginary parts chosen. A real operand
    has only its real part (so a real matrix times a complex vector is two real products)."""
    kwargs = kwargs or {}
    dtype = result_dtype(*operands)
    part = C.PART[dtype]
    choices = []
    for k, x in enumerate(operands):
        re, im = parts(x, part) if is_complex(x) else (C._cast(Tensor(C.as_node(x)), part), None)
        if k in conj and im is not None:
            im = -im
        choices.append([(re, 0)] + ([(im, 1)] if im is not None else []))
    total_re, total_im = None, None
    for picked in itertools.product(*choices):
        value = func(*before, *(p for p, _ in picked), **kwargs)
        power = sum(j for _, j in picked) % 4
        sign = 1 if power < 2 else -1
        if power % 2 == 0:
            total_re = _accumulate(total_re, value, sign)
        else:
            total_im = _accumulate(total_im, value, sign)
    if total_im is None:
        total_im = Tensor(build.const(0.0, part, np.shape(total_re)))
    if total_re is None:
        total_re = Tensor(build.const(0.0, part, np.shape(total_im)))
    return ComplexTensor(_cast_result(total_re, part), _cast_result(total_im, part))


def _cast_result(t, part):
    return t if t.dtype == part else t.astype(part)


def _accumulate(total, value, sign):
    if total is None:
        return value if sign > 0 else -value
    return total + value if sign > 0 else total - value


def _products(func, args, kwargs):
    how = MULTILINEAR[func]
    if how == "subscripts":
        if not args or not isinstance(args[0], str):
            raise UnsupportedError("np.einsum of complex values: give the subscripts as a string")
        return _multilinear(func, args[1:], before=args[:1], kwargs=kwargs)
    operands, rest = args[:2], args[2:]
    if how == "conj":  # np.vdot(a, b): conj(a) . b, both flattened
        operands = tuple(np.ravel(x) for x in operands)
        return _multilinear(np.dot, operands, conj=(0,))
    if how == "conj last":  # np.correlate(a, v): sum over k of a[n + k] * conj(v[k])
        return _multilinear(np.correlate, operands, kwargs=dict(kwargs, **dict(zip(("mode",), rest))), conj=(1,))
    return _multilinear(lambda *ops: func(*ops, *rest, **kwargs), operands)


# -- reductions and order --------------------------------------------------------------------------------


def prod(z, axis=None, dtype=None, keepdims=False):
    """The product along axis as a tree of complex products (NumPy multiplies one after the other: the
    values agree to rounding)."""
    z = lift(z, dtype)
    axes = tuple(range(z.ndim)) if axis is None else tuple(a % z.ndim for a in np.atleast_1d(axis).tolist())
    keep = [d for d in range(z.ndim) if d not in axes]
    moved = np.transpose(z, keep + list(axes))
    n = math.prod(z.shape[d] for d in axes)
    flat = np.reshape(moved, tuple(z.shape[d] for d in keep) + (n,))
    width = 1 << max(n - 1, 0).bit_length()
    if width > n:
        one = ComplexTensor(
            Tensor(build.const(1.0, z.re.dtype, flat.shape[:-1] + (width - n,))),
            Tensor(build.const(0.0, z.re.dtype, flat.shape[:-1] + (width - n,))),
        )
        flat = np.concatenate([flat, one], axis=-1)
    while flat.shape[-1] > 1:
        half = flat.shape[-1] // 2
        flat = C.multiply(flat[..., :half], flat[..., half:])
    result = flat[..., 0] if n else lift(1.0, z.dtype)
    if keepdims:
        result = np.reshape(result, tuple(1 if d in axes else s for d, s in enumerate(z.shape)))
    return result


def _nan_mask(z: ComplexTensor):
    return np.isnan(z.re) | np.isnan(z.im)


def argmax(z, axis=None, out=None, *, keepdims=False, smallest=False):
    """NumPy's lexicographic argmax (argmin: smallest) of complex values: the first NaN where one is."""
    z = lift(z)
    if axis is None:
        z = np.ravel(z)
        axis = 0
    best_re = (np.min if smallest else np.max)(np.where(_nan_mask(z), 0.0, z.re), axis=axis, keepdims=True)
    tie = (z.re == best_re) & ~_nan_mask(z)
    fill = np.inf if smallest else -np.inf
    best_im = (np.min if smallest else np.max)(np.where(tie, z.im, fill), axis=axis, keepdims=True)
    hit = tie & (z.im == best_im)
    nan = _nan_mask(z)
    index = np.where(
        np.any(nan, axis=axis, keepdims=True),
        np.argmax(nan, axis=axis, keepdims=True),
        np.argmax(hit, axis=axis, keepdims=True),
    )
    return index if keepdims else np.squeeze(index, axis=axis)


def argmin(z, axis=None, out=None, *, keepdims=False):
    return argmax(z, axis, out, keepdims=keepdims, smallest=True)


def amax(z, axis=None, out=None, keepdims=False, smallest=False):
    z = lift(z)
    flat = np.ravel(z) if axis is None else z
    ax = 0 if axis is None else axis
    index = argmax(flat, ax, keepdims=True, smallest=smallest)
    picked = ComplexTensor(np.take_along_axis(flat.re, index, ax), np.take_along_axis(flat.im, index, ax))
    if keepdims:
        return picked if axis is not None else np.reshape(picked, (1,) * z.ndim)
    return np.squeeze(picked, axis=ax)


def amin(z, axis=None, out=None, keepdims=False):
    return amax(z, axis, out, keepdims, smallest=True)


def sort(z, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's order: lexicographic, then values with a NaN imaginary part, a NaN real part, both."""
    return _sorted(z, axis)[0]


def argsort(z, axis=-1, kind=None, order=None, *, stable=None):
    return _sorted(z, axis)[1].astype(np.int64)


def _sorted(z, axis):
    """z sorted along axis, and the positions (int32: the sort's own, so that sorting needs no 64-bit integer on
    webgpu) its elements come from."""
    from tracejit.numpy.functions import _axis

    z = lift(z)
    if axis is None:
        z, axis = np.ravel(z), 0
    axis = _axis(axis, z.ndim)
    re_nan, im_nan = np.isnan(z.re), np.isnan(z.im)
    rank = np.where(re_nan, np.int32(2), np.int32(0)) + np.where(im_nan, np.int32(1), np.int32(0))

    def positions(key) -> Tensor:
        return Tensor(build.sort(as_node(key), axis, indices=True))

    order = positions(z.im)  # (stable passes: the last key sorted last)
    for key in (z.re, rank):
        order = np.take_along_axis(order, positions(np.take_along_axis(key, order, axis)), axis)
    picked = ComplexTensor(np.take_along_axis(z.re, order, axis), np.take_along_axis(z.im, order, axis))
    return picked, order


def mean(z, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    """NumPy's: the sum divided by the count as a complex quotient (an infinite sum's other part is NaN, as there)."""
    z = lift(z) if dtype is None else lift(z, dtype)
    total = np.sum(z, axis=axis, keepdims=keepdims, where=where)
    if where is True:
        count = z.size if axis is None else math.prod(z.shape[a % z.ndim] for a in np.atleast_1d(axis).tolist())
    else:
        count = np.sum(np.broadcast_to(where, z.shape), axis=axis, keepdims=keepdims)
    return C.divide(total, count)


def var(z, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None, correction=None):
    """NumPy's variance of complex values: the mean of |z - mean(z)|^2, a real number."""
    z = lift(z)
    centred = z - np.mean(z, axis=axis, keepdims=True)
    squares = centred.re * centred.re + centred.im * centred.im
    n = z.size if axis is None else math.prod(z.shape[a % z.ndim] for a in np.atleast_1d(axis).tolist())
    return np.sum(squares, axis=axis, keepdims=keepdims) / max(n - (correction if correction is not None else ddof), 0)


def std(z, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None, correction=None):
    return np.sqrt(var(z, axis, dtype, out, ddof, keepdims, correction=correction))


def _like(fill):
    def like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
        target = np.dtype(dtype) if dtype is not None else np.dtype(a.dtype)
        shape = np.shape(a) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        value = fill if fill is not None else kwargs.get("fill_value", 0)
        if target.kind != "c":
            real = value.real if isinstance(value, complex) else value
            return Tensor(build.const(real, target, shape))
        part = C.PART[target]
        re, im = parts(value, part)
        return ComplexTensor(np.broadcast_to(re, shape), np.broadcast_to(im, shape))

    return like


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    return _like(None)(a, dtype, order, subok, shape, fill_value=fill_value)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """NumPy's: |a - b| <= atol + rtol |b| between finite values, equality between infinite ones."""
    from tracejit.numpy import complex_math

    dtype = result_dtype(a, b)
    a, b = lift(a, dtype), lift(b, dtype)
    d = a - b
    finite = np.isfinite(a.re) & np.isfinite(a.im) & np.isfinite(b.re) & np.isfinite(b.im)
    near = complex_math.absolute(d.re, d.im) <= atol + rtol * complex_math.absolute(b.re, b.im)
    close = (finite & near) | C.equal(a, b)
    if equal_nan:
        close = close | (_nan_mask(a) & _nan_mask(b))
    return close


def _norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    if ord not in (None, 2, "fro") or (ord == 2 and axis is None and np.ndim(x) != 1):
        raise UnsupportedError(f"np.linalg.norm(ord={ord!r}) of complex values is not supported by tracejit")
    z = lift(x)
    return np.sqrt(np.sum(z.re * z.re + z.im * z.im, axis=axis, keepdims=keepdims))


FUNCTIONS = {
    np.real: lambda z: lift(z).re,
    np.imag: lambda z: lift(z).im,
    np.conj: lambda z: lift(z).conj(),
    np.conjugate: lambda z: lift(z).conj(),
    np.angle: lambda z, deg=False: _angle(z, deg),
    np.abs: _absolute,
    np.absolute: _absolute,
    np.iscomplexobj: lambda x: is_complex(x),
    np.isrealobj: lambda x: not is_complex(x),
    np.iscomplex: lambda x: lift(x).im != 0,
    np.isreal: lambda x: lift(x).im == 0,
    np.prod: prod,
    np.argmax: argmax,
    np.argmin: argmin,
    np.max: amax,
    np.amax: amax,
    np.min: amin,
    np.amin: amin,
    np.sort: sort,
    np.argsort: argsort,
    np.sort_complex: lambda a: sort(a),
    np.mean: mean,
    np.var: var,
    np.std: std,
    np.any: lambda z, axis=None, out=None, keepdims=False: np.any(C.nonzero_values(z), axis=axis, keepdims=keepdims),
    np.all: lambda z, axis=None, out=None, keepdims=False: np.all(C.nonzero_values(z), axis=axis, keepdims=keepdims),
    np.count_nonzero: lambda z, axis=None, *, keepdims=False: np.count_nonzero(
        C.nonzero_values(z), axis=axis, keepdims=keepdims
    ),
    np.zeros_like: _like(0.0),
    np.ones_like: _like(1.0),
    np.empty_like: _like(0.0),
    np.full_like: _full_like,
    np.isclose: _isclose,
    np.allclose: lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: np.all(_isclose(a, b, rtol, atol, equal_nan)),
    np.array_equal: lambda a, b, equal_nan=False: np.all(C.equal(a, b)) if np.shape(a) == np.shape(b) else False,
    np.linalg.norm: _norm,
    np.result_type: lambda *xs: np.result_type(*(x.dtype if isinstance(x, (Tensor, ComplexTensor)) else x for x in xs)),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.linalg.matrix_transpose: lambda z: lift(z).mT,
}


def _angle(z, deg):
    z = lift(z)
    a = np.arctan2(z.im, z.re)
    return np.degrees(a) if deg else a


def array_function(func, args, kwargs):
    out = kwargs.pop("out", None)
    if func in FUNCTIONS:
        result = FUNCTIONS[func](*args, **kwargs)
    elif func in MULTILINEAR:
        result = _products(func, args, kwargs)
    elif func in PARTWISE:
        result = _partwise(func, args, kwargs)
    else:
        fft = _fft_function(func)
        if fft is None:  # NumPy's, on the host in the middle of the kernel (host_calls.py), or refused there
            from tracejit.numpy import host_calls
            from tracejit.numpy.numpy_protocol import _name

            library = func in host_calls.LINALG_ON_HOST
            why = "LAPACK" if library else "not implemented for complex values"
            return host_calls.fallback(
                func, args, dict(kwargs, **({"out": out} if out is not None else {})), _name(func), why, library=library
            )
        result = fft(*args, **kwargs)
    if out is None:
        return result
    out[...] = result
    return out


def _fft_function(func):
    from tracejit.numpy import fft

    return fft.NUMPY_FUNCTIONS.get(func)
