"""Complex arrays in a trace. A ComplexTensor is a pair of real traced arrays, its real and imaginary parts
(float32 for complex64, float64 for complex128), and every operation on it is written with the parts' real
operations: the graph IR, its passes and the six code generators hold no complex dtype, and each device that
has the part's float dtype computes complex numbers (complex128 where it has float64).

A complex kernel argument reaches the trace as a real array of its shape plus a trailing axis of 2 (the same
memory, viewed: kernel.py), whose [..., 0] and [..., 1] views are the parts, so assigning into a part or an
element writes the caller's complex array. A complex result is returned the same way and viewed as complex
again by the call (frontend/complex_calls.py).

NumPy's rules are kept: the dtypes of mixed operands (np.result_type, Python complex scalars weak as NEP 50),
the full complex product and Smith's quotient as NumPy computes them (so infinities and NaNs come out as
NumPy's), lexicographic comparisons and maximum, and a ComplexWarning where a cast drops the imaginary part."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from tracejit.errors import DtypeError, UnsupportedError
from tracejit.ir import build
from tracejit.ir.graph import Op
from tracejit.numpy import functions as F
from tracejit.numpy.selection import MaskedComplex, MaskedSelection
from tracejit.numpy.tensor import Tensor, as_node, python_value

PART: dict[np.dtype, np.dtype] = {
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}
COMPLEX: dict[np.dtype, np.dtype] = {v: k for k, v in PART.items()}


class ComplexTensor(np.lib.mixins.NDArrayOperatorsMixin):
    """A traced complex array: its parts `re` and `im`, real Tensors of one float dtype and shape."""

    __slots__ = ("re", "im", "__weakref__")
    __array_priority__ = 1001
    _tracejit_defer = True  # (Tensor's operators and protocols leave mixed operations to it: numpy/tensor.py)

    def __init__(self, re: Tensor, im: Tensor):
        if not isinstance(re, Tensor):  # (a part NumPy computed from constants, a selection x[mask])
            re = Tensor(as_node(re))
        if not isinstance(im, Tensor):
            im = Tensor(as_node(im))
        if re.shape != im.shape:
            shape = np.broadcast_shapes(re.shape, im.shape)
            re, im = _broadcast(re, shape), _broadcast(im, shape)
        assert re.dtype == im.dtype and re.dtype in COMPLEX, (re.dtype, im.dtype)
        self.re, self.im = re, im

    # -- static facts --
    @property
    def dtype(self) -> np.dtype:
        return COMPLEX[self.re.dtype]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.re.shape

    @shape.setter
    def shape(self, value) -> None:
        """NumPy's `z.shape = s`: this array seen in another shape (its parts reshaped: views of the same memory)."""
        value = python_value(value, "an array's shape")
        self.re, self.im = self.re.reshape(value), self.im.reshape(value)

    @property
    def ndim(self) -> int:
        return self.re.ndim

    @property
    def size(self) -> int:
        return self.re.size

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def __len__(self) -> int:
        return len(self.re)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"ComplexTensor(shape={self.shape}, dtype={self.dtype})"

    def __bool__(self):
        return bool(self.re != 0) or bool(self.im != 0)

    def __complex__(self):
        return complex(float(self.re), float(self.im))

    # -- the parts, as NumPy's views --
    @property
    def real(self) -> Tensor:
        return self.re

    @real.setter
    def real(self, value) -> None:
        self.re[...] = value

    @property
    def imag(self) -> Tensor:
        return self.im

    @imag.setter
    def imag(self, value) -> None:
        self.im[...] = value

    @property
    def T(self) -> ComplexTensor:
        return ComplexTensor(self.re.T, self.im.T)

    @property
    def mT(self) -> ComplexTensor:
        return ComplexTensor(self.re.mT, self.im.mT)

    def conj(self) -> ComplexTensor:
        return ComplexTensor(Tensor(self.re._node), -self.im)  # (a new array, as NumPy's: no view of this one)

    conjugate = conj

    # -- indexing: the same key on both parts (views where NumPy's are) --
    def __getitem__(self, key):
        key = _index_key(key)
        re, im = self.re[key], self.im[key]
        # z[mask]: the elements at their places while only elementwise arithmetic and a store with the mask use them
        selected = MaskedComplex.of(re, im)
        return selected if selected is not None else ComplexTensor(re, im)

    def __setitem__(self, key, value) -> None:
        key = _index_key(key)
        placed = _selected_parts(value, key, self.shape, self.re.dtype)
        re, im = placed if placed is not None else parts(value, self.re.dtype)
        self.re[key] = re
        self.im[key] = im

    def fill(self, value) -> None:
        self[...] = value

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        return astype(self, dtype)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], numbers.Integral) else shape
        return np.reshape(self, shape, order=order)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], numbers.Integral) else axes
        return np.transpose(self, axes or None)

    def flatten(self, order="C"):
        return ComplexTensor(self.re.flatten(order), self.im.flatten(order))

    def view(self, dtype=None):
        if dtype is None or np.dtype(dtype) == self.dtype:
            return self
        raise UnsupportedError(f"viewing a traced complex array as {dtype} is not supported; use .real / .imag")

    def __getattr__(self, name: str):
        # ndarray methods that are the NumPy function of the same name (z.sum(axis=0) is np.sum(z, axis=0))
        if name in _FUNCTION_METHODS:
            fn = _FUNCTION_METHODS[name]
            return lambda *args, **kwargs: fn(self, *args, **kwargs)
        raise AttributeError(f"'ComplexTensor' object (a traced complex ndarray) has no attribute {name!r}")

    def parts_array(self) -> Tensor:
        """The value as a real array of its shape plus a trailing axis of 2 (real, imaginary): how a kernel returns
        it (frontend/complex_calls.py)."""
        shape = self.shape + (2,)
        re, im = (build.expand(build.reshape(p._node, p.shape + (1,)), shape) for p in (self.re, self.im))
        first = build.binary(Op.EQ, build.iota(shape, len(shape) - 1, np.int32), build.const(0, np.int32, shape))
        return Tensor(build.where(first, re, im))

    def _is_scalar(self) -> bool:
        """Whether this is a NumPy (or Python) complex scalar, which `z op= y` rebinds: 0-d, its parts neither
        views nor an argument's (assign.inplace's rule for real values)."""
        return self.shape == () and all(p._base is None and p._argument is None for p in (self.re, self.im))

    # -- NumPy's protocols --
    def __array__(self, dtype=None, copy=None):
        from tracejit.errors import TraceError

        raise TraceError(
            "a traced complex value was converted to a NumPy array (np.asarray, a NumPy function tracejit does not "
            "implement for complex arrays, or an index into a NumPy array); keep it symbolic inside the kernel"
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from tracejit.numpy import complex_protocol

        return complex_protocol.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from tracejit.numpy import complex_protocol

        return complex_protocol.array_function(func, args, kwargs)


def argument(parts: Tensor, kind: str) -> ComplexTensor:
    """A complex kernel argument from its parts' array (shape + (2,)): the views [..., 0] and [..., 1], so writes
    into them reach the caller's array; a Python complex ("scalar") is weak, as NEP 50 has Python scalars."""
    if kind == "scalar":
        re, im = (Tensor(build.cast(parts[k]._node, parts.dtype, weak=True)) for k in (0, 1))
        return ComplexTensor(re, im)
    return ComplexTensor(parts[..., 0], parts[..., 1])


def root(t):
    """The array a kernel argument's value lives in: a complex argument's parts' array."""
    if isinstance(t, ComplexTensor):
        return t.re._root()
    return t


def _broadcast(t: Tensor, shape) -> Tensor:
    return t if t.shape == tuple(shape) else Tensor(build.broadcast_to(t._node, tuple(shape)))


def _index_key(key):
    if isinstance(key, ComplexTensor) or (type(key) is tuple and any(isinstance(k, ComplexTensor) for k in key)):
        raise IndexError("arrays used as indices must be of integer (or boolean) type, not complex")
    return key


# -- what is complex, and the dtype of a mix ---------------------------------------------------------------


def is_complex(x) -> bool:
    """Whether x is a complex value: a ComplexTensor, a Python complex, a NumPy complex scalar or array, or a
    list or tuple holding one."""
    if isinstance(x, (ComplexTensor, MaskedComplex)):
        return True
    if isinstance(x, complex):  # (a Python float is no complex; np.complex128 is one)
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind == "c"
    if isinstance(x, (list, tuple)):
        return any(is_complex(v) for v in x)
    return False


def _probe(x):
    """A stand-in with x's dtype and weakness, for np.result_type."""
    if isinstance(x, MaskedComplex):  # z[mask]: z's own
        x = x.values
    if isinstance(x, ComplexTensor):
        return 0j if x.re._node.weak else np.dtype(x.dtype)  # (a Python complex argument is weak)
    if isinstance(x, Tensor):
        n = x._node
        if n.weak:
            return {"b": False, "i": 0, "u": 0, "f": 0.0}[n.dtype.kind]
        return n.dtype
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return type(x)(0)  # weak (NEP 50)
    if isinstance(x, (list, tuple)):
        return np.asarray(x).dtype
    return np.asarray(x).dtype


def result_dtype(*operands) -> np.dtype:
    """NumPy's complex dtype for an operation mixing these operands (complex64 or complex128)."""
    dt = np.result_type(*(_probe(x) for x in operands))
    if dt.kind != "c":
        dt = np.result_type(dt, np.complex64)
    if dt not in PART:  # clongdouble
        raise DtypeError(f"{dt} is not supported by tracejit (complex64 and complex128 are)")
    return dt


def _selected_parts(value, key, shape, part: np.dtype):
    """z[mask] = value for a selection of the same mask (numpy/selection.py): its parts as selections of that mask,
    which the parts' stores make where()s; None for any other value (or key)."""
    if not isinstance(value, (MaskedComplex, MaskedSelection)):
        return None
    from tracejit.numpy.assign import traced_mask

    mask = traced_mask(key)
    if mask is None:
        return None
    if isinstance(value, MaskedSelection):  # (a real selection: imaginary parts of zero)
        if value.values_for(mask, shape) is None:
            return None
        zeros = build.const(0.0, part, value.values.shape)
        return MaskedSelection(mask, build.cast(value.values, part)), MaskedSelection(mask, zeros)
    found = value.parts_for(mask, shape)
    if found is None:
        return None
    return tuple(MaskedSelection(mask, build.cast(p.values, part)) for p in found)


def parts(x, part: np.dtype) -> tuple[Tensor, Tensor]:
    """x's real and imaginary parts as Tensors of the float dtype `part` (a real x: its value and zeros)."""
    if isinstance(x, MaskedComplex):  # z[mask] where no store of the same mask keeps it at its places: the array
        x = x.array()
    if isinstance(x, ComplexTensor):
        return _cast(x.re, part), _cast(x.im, part)
    if isinstance(x, (complex, np.complexfloating)):
        return Tensor(build.const(x.real, part, ())), Tensor(build.const(x.imag, part, ()))
    if isinstance(x, (np.ndarray, list, tuple)) and is_complex(x):
        a = np.asarray(x)
        return _cast(Tensor(as_node(np.ascontiguousarray(a.real))), part), _cast(
            Tensor(as_node(np.ascontiguousarray(a.imag))), part
        )
    re = _cast(Tensor(as_node(x)), part)
    return re, Tensor(build.const(0.0, part, re.shape))


def _cast(t: Tensor, part: np.dtype) -> Tensor:
    return t if t.dtype == part and not t._node.weak else F.astype(t, part)


def lift(x, dtype=None) -> ComplexTensor:
    """x as a ComplexTensor of `dtype` (default: NumPy's complex dtype for x alone)."""
    dtype = np.dtype(dtype) if dtype is not None else result_dtype(x)
    return ComplexTensor(*parts(x, PART[dtype]))


def zeros(shape, dtype) -> ComplexTensor:
    part = PART[np.dtype(dtype)]
    zero = Tensor(build.const(0.0, part, tuple(shape)))
    return ComplexTensor(zero, zero)


def astype(x, dtype):
    """x cast to dtype as NumPy's astype: complex to complex by parts; complex to real keeps the real part
    (NumPy's ComplexWarning); complex to bool is whether the value is nonzero."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        z = lift(x, result_dtype(np.ones((), dtype)))
        return ComplexTensor(Tensor(z.re._node), Tensor(z.im._node))  # (a copy, as NumPy's astype)
    if not isinstance(x, ComplexTensor):
        return F.astype(x, dtype)
    if dtype.kind == "b":
        return (x.re != 0) | (x.im != 0)
    warnings.warn(
        "Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning, stacklevel=3
    )
    return F.astype(x.re, dtype)


# -- arithmetic, as NumPy computes it ----------------------------------------------------------------------


def add(a, b) -> ComplexTensor:
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return _weak_if(ComplexTensor(ar + br, ai + bi), a, b)


def subtract(a, b) -> ComplexTensor:
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return _weak_if(ComplexTensor(ar - br, ai - bi), a, b)


def multiply(a, b) -> ComplexTensor:
    """NumPy's product: a real operand is a complex one with a zero imaginary part (so inf * (1+1j) has the
    NaN NumPy gives)."""
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return _weak_if(ComplexTensor(ar * br - ai * bi, ar * bi + ai * br), a, b)


def divide(a, b) -> ComplexTensor:
    """NumPy's quotient (Smith's method, with NumPy's branches: the same values, infinities and NaNs)."""
    from tracejit.numpy import complex_math

    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return _weak_if(ComplexTensor(*complex_math.divide(ar, ai, br, bi)), a, b)


def negative(a) -> ComplexTensor:
    return _weak_if(ComplexTensor(-a.re, -a.im), a)


def _is_weak(x) -> bool:
    if isinstance(x, ComplexTensor):
        return x.re._node.weak
    if isinstance(x, Tensor):
        return x._node.weak
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _weak_if(z: ComplexTensor, *operands) -> ComplexTensor:
    """z, weak where every operand is (Python's 1j * x of a Python-float argument x is a Python complex: NEP 50)."""
    if not all(_is_weak(x) for x in operands):
        return z
    return ComplexTensor(*(Tensor(build.cast(p._node, p.dtype, weak=True)) for p in (z.re, z.im)))


def power(a, b) -> ComplexTensor:
    """a ** b. A Python or NumPy integer exponent below 100 is NumPy's repeated multiplication (its npy_cpow
    does the same, so the values are NumPy's); any other, exp(b log a) with NumPy's special cases."""
    dtype = result_dtype(a, b)
    n = _small_integer(b)
    if n is not None:
        return _weak_if(_integer_power(lift(a, dtype), n), a, b)
    from tracejit.numpy import complex_math

    part = PART[dtype]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return _weak_if(ComplexTensor(*complex_math.power(ar, ai, br, bi)), a, b)


def _small_integer(b) -> int | None:
    if isinstance(b, (bool, np.bool_)):
        return int(b)
    if isinstance(b, (numbers.Integral, np.integer)):
        return int(b) if abs(int(b)) < 100 else None
    value = b.item() if isinstance(b, np.generic) else b
    if isinstance(value, (float, complex)) and not isinstance(value, bool):
        value = complex(value)
        if value.imag == 0 and value.real == int(value.real) and abs(value.real) < 100:
            return int(value.real)
    return None


def _integer_power(z: ComplexTensor, n: int) -> ComplexTensor:
    """npy_cpow's binary powering for |n| < 100 (1 / z**|n| for a negative n, with NumPy's quotient)."""
    part = z.re.dtype
    if n == 0:
        one = Tensor(build.const(1.0, part, z.shape))
        return ComplexTensor(one, Tensor(build.const(0.0, part, z.shape)))
    if n == 1:
        return ComplexTensor(Tensor(z.re._node), Tensor(z.im._node))
    if n == 2:
        return multiply(z, z)
    if n == 3:
        return multiply(multiply(z, z), z)
    m, mask = abs(n), 1
    result, power_ = None, z
    while mask <= m:  # (npy_cpow: aa = 1; p = a; while mask <= n: if n & mask: aa *= p; mask <<= 1; p *= p)
        if m & mask:
            result = power_ if result is None else multiply(result, power_)
        mask <<= 1
        if mask <= m:
            power_ = multiply(power_, power_)
    assert result is not None
    if n < 0:
        return divide(1.0, result)
    return result


def equal(a, b) -> Tensor:
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return (ar == br) & (ai == bi)


def not_equal(a, b) -> Tensor:
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return (ar != br) | (ai != bi)


def less(a, b) -> Tensor:
    """NumPy's lexicographic order of complex numbers (the real parts, then the imaginary), false with NaNs."""
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return ((ar < br) & ~np.isnan(ai) & ~np.isnan(bi)) | ((ar == br) & (ai < bi))


def less_equal(a, b) -> Tensor:
    part = PART[result_dtype(a, b)]
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    return ((ar < br) & ~np.isnan(ai) & ~np.isnan(bi)) | ((ar == br) & (ai <= bi))


def greater(a, b) -> Tensor:
    return less(b, a)


def greater_equal(a, b) -> Tensor:
    return less_equal(b, a)


def _nan(z: ComplexTensor) -> Tensor:
    return F.isnan(z.re) | F.isnan(z.im)


def _select(cond, a: ComplexTensor, b: ComplexTensor) -> ComplexTensor:
    return ComplexTensor(F.where(cond, a.re, b.re), F.where(cond, a.im, b.im))


def _chosen(a, b, first_where, nan_in_first: bool) -> ComplexTensor:
    """a where first_where(a, b) holds or where a NaN is (in a: nan_in_first, else in b), b elsewhere."""
    dtype = result_dtype(a, b)
    a, b = lift(a, dtype), lift(b, dtype)
    return _select(first_where(a, b) | _nan(a if nan_in_first else b), a, b)


def maximum(a, b) -> ComplexTensor:
    """NumPy's: the lexicographically greater, the first operand where it holds a NaN, else the second."""
    return _chosen(a, b, greater_equal, True)


def minimum(a, b) -> ComplexTensor:
    return _chosen(a, b, less_equal, True)


def fmax(a, b) -> ComplexTensor:
    """NumPy's: as maximum, but a NaN loses to a number."""
    return _chosen(a, b, greater_equal, False)


def fmin(a, b) -> ComplexTensor:
    return _chosen(a, b, less_equal, False)


def nonzero_values(z) -> Tensor:
    """Where a complex value is true (nonzero), as NumPy's bool cast."""
    z = lift(z)
    return (z.re != 0) | (z.im != 0)


# ndarray methods of a ComplexTensor that are NumPy functions of the same name
_FUNCTION_METHODS = {
    name: getattr(np, name)
    for name in (
        "sum",
        "mean",
        "prod",
        "cumsum",
        "cumprod",
        "var",
        "std",
        "ravel",
        "squeeze",
        "swapaxes",
        "repeat",
        "take",
        "diagonal",
        "trace",
        "dot",
        "round",
        "copy",
        "any",
        "all",
        "nonzero",
        "argmax",
        "argmin",
        "max",
        "min",
        "argsort",
        "sort",
    )
}
_FUNCTION_METHODS["sort"] = lambda z, axis=-1, kind=None, order=None: z.__setitem__(Ellipsis, np.sort(z, axis))


def _augmented(ufunc):
    """`z op= y`: into z's memory as NumPy computes it (the mixin's ufunc with out=z), except for a complex
    scalar (`s = 0j` then `s += x[t]`), which Python rebinds to the new value: its parts, made from Python's
    numbers, never change in place (a loop carrying `s` compiles as a loop over elements)."""

    def method(self, other):
        if self._is_scalar():
            return ufunc(self, other)
        return ufunc(self, other, out=(self,))

    method.__name__ = f"__i{ufunc.__name__}__"
    return method


for _name, _ufunc in (
    ("add", np.add),
    ("sub", np.subtract),
    ("mul", np.multiply),
    ("truediv", np.true_divide),
    ("pow", np.power),
    ("matmul", np.matmul),
):
    setattr(ComplexTensor, f"__i{_name}__", _augmented(_ufunc))
