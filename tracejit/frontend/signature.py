"""Argument signatures: what a compiled plan is specialised on (shapes, dtypes, strides, static args)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ArgumentError, ArgumentValueError, DtypeError
from tracejit.ir.dtypes import check, weak_dtype
from tracejit.runtime.array import Array, ComplexParts


@dataclass(frozen=True)
class Spec:
    """An abstract array argument (shape and dtype, C-contiguous unless strides are given in elements)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...] | None = None
    names: tuple[str | None, ...] | None = None  # per dimension: the name of a symbolic one, else None

    @property
    def element_strides(self) -> tuple[int, ...]:
        return c_strides(self.shape) if self.strides is None else self.strides


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides in elements of a C-contiguous array of this shape."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


SYMBOLIC_TRACE_SIZE = 256  # the size a symbolic dimension given by its name alone is traced at


# one dimension of a tj.spec: a size, the name of a symbolic dimension, or (its name, the size to trace at)
Dimension = int | np.integer | str | tuple[str, int]


def spec(shape: int | str | Sequence[Dimension], dtype: DTypeLike, strides: Sequence[int] | None = None) -> Spec:
    """tj.spec(shape, dtype): an argument for trace / lower / warm that carries no data. A string in the
    shape names a symbolic dimension: tj.spec(("n", 1024), "float32") is n rows of 1024, traced at
    SYMBOLIC_TRACE_SIZE rows; (("n", 4096), 1024) gives the size to trace at. Kernels compiled for it
    take its size as an argument where their code allows (on numba), so a call with any n reuses them."""
    shape = (shape,) if isinstance(shape, (int, str)) else tuple(shape)
    names: list[str | None] = []
    sizes: list[int] = []
    for d, s in enumerate(shape):
        name: str | None = None
        if isinstance(s, str):  # "n": a symbolic dimension traced at a typical size
            s = (s, SYMBOLIC_TRACE_SIZE)
        if isinstance(s, tuple):  # ("n", 1024) inside the shape: a named dimension and the size to trace at
            if len(s) != 2 or not isinstance(s[0], str) or not s[0].isidentifier():
                raise ArgumentError(
                    f"tj.spec({shape!r}, ...): dimension {d} is {s!r}; a symbolic dimension is a "
                    'name ("n") or a name and the size to trace at (("n", 4096))'
                )
            name, s = s
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ArgumentError(
                f"tj.spec({shape!r}, ...): dimension {d} is {s!r}; a dimension is a whole number of elements, 0 or more"
            )
        names.append(name)
        sizes.append(int(s))
    if strides is not None and any(names):
        raise ArgumentError(
            f"tj.spec({shape!r}, ..., strides=...): a spec with symbolic dimensions is C-contiguous; leave strides out"
        )
    return Spec(
        tuple(sizes),
        np.dtype(dtype) if np.dtype(dtype) in _PART else check(dtype, "tj.spec", internal=False),
        None if strides is None else tuple(strides),
        tuple(names) if any(names) else None,
    )


@dataclass(frozen=True)
class Default:
    """A parameter the caller left out: its default value, a constant of the function like a static
    argument (so `def norm(x, axis=-1)` works unchanged), keyed by value."""

    value: object


@dataclass(frozen=True)
class ArgInfo:
    kind: str  # "array" | "scalar" | "static" | "default" (a left-out parameter) | "generator"
    dtype: np.dtype | None = None
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    value: object = None  # static arguments only
    writeable: bool = True  # arrays: whether the kernel may assign into it
    # "array": a complex array, described as its parts (the part dtype, a trailing axis of 2: complex_calls.py);
    # "scalar": a Python complex, as a 2-element float64 array
    complex: str = ""

    @property
    def contiguous(self) -> bool:
        """Arrays: whether the strides are those of C order."""
        return self.strides == c_strides(self.shape)

    @property
    def value_dtype(self) -> np.dtype:
        """The dtype of an array or a scalar, the kinds that have one."""
        assert self.dtype is not None, self.kind
        return self.dtype


def arg_key(a):
    """The cache key of one argument, kept cheap: this runs on every call."""
    t = type(a)
    if t is np.ndarray:
        return (a.dtype, a.shape, a.strides)
    if t is float or t is int or t is bool:
        return t
    if t is Array:
        d = a._data
        return (d.dtype, d.shape, getattr(d, "strides", None), a.device.name)
    if t is Spec:
        return (a.dtype, a.shape, tuple(s * a.dtype.itemsize for s in a.element_strides), a.names)
    if t is Default:
        return a
    return (t, id(t))  # anything else is converted before keying; see describe()


def value_key(a):
    """A value that keys a plan or a graph (a static argument, an object's constant attribute, a tj.jit
    scalar), telling apart what == does not where the code it becomes differs: the type (1, 1.0, True and
    np.float32(1) are equal, and give other dtypes) and the sign of a zero (1 / -0.0 is -inf); item by item
    in tuples. NaN keys as itself (one plan, not a new one per call)."""
    t = type(a)
    if t is float:
        return (float, a.hex())
    if t is tuple:
        return (tuple, tuple(value_key(v) for v in a))
    if isinstance(a, np.generic) or t is np.ndarray and a.ndim == 0 and not a.flags.writeable:
        # (a NumPy scalar and the read-only 0-d array a call makes of it, scalar_array, key alike: an integer one the
        # code used as a size is keyed by value from then on, kernel.py's numbers, and the call that found so held
        # the 0-d array)
        return (np.generic, a.dtype.str, a.tobytes())
    if t is complex:
        return (complex, a.real.hex(), a.imag.hex())
    if t is dict:  # a dict of settings (conv_param = {"stride": 1, "pad": 1}), item by item in its order
        return (dict, tuple((value_key(k), value_key(v)) for k, v in a.items()))
    if t is list:
        return (list, tuple(value_key(v) for v in a))
    return (t, a)


_SETTING_LEAVES = (bool, int, float, complex, str, type(None))


def is_setting(a) -> bool:
    """Whether an argument is a dict of settings: a dict whose keys and values are Python numbers, strings, None
    and tuples, lists and dicts of them (no arrays). Such an argument keys the plan by value, as static= does."""
    if type(a) is not dict:
        return False

    def plain(v) -> bool:
        if isinstance(v, _SETTING_LEAVES):
            return True
        if type(v) in (tuple, list):
            return all(plain(x) for x in v)
        if type(v) is dict:
            return all(plain(k) and plain(x) for k, x in v.items())
        return False

    return plain(a)


def describe(a, position: int) -> ArgInfo:
    """What a kernel argument looks like to the tracer."""
    info = _describe(a, position)
    if info.dtype is None or info.dtype.kind != "c" or info.complex:
        return info
    part = _PART.get(info.dtype)
    if part is None:
        raise DtypeError(
            f"argument {position} has dtype {info.dtype}, which tracejit does not support "
            "(complex64 and complex128 are)"
        )
    strides = tuple(s * 2 for s in info.strides) + (1,)
    return ArgInfo("array", part, info.shape + (2,), strides, writeable=info.writeable, complex="array")


_PART: dict[np.dtype, np.dtype] = {
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}


def _describe(a, position: int) -> ArgInfo:
    if type(a) is Default:
        return ArgInfo("default", value=a.value)
    if type(a) in (bool, int, float):  # np.float64 is a float too, but a strong one (NEP 50)
        return ArgInfo("scalar", weak_dtype(a))
    if isinstance(a, Spec):
        return ArgInfo("array", a.dtype, a.shape, a.element_strides)
    if isinstance(a, Array):
        d = a._data
        if type(d) is ComplexParts:  # (its parts' info: a complex one made of it by describe)
            return replace(_describe(Array(d.parts, a.device), position), complex="array")
        writeable = d.flags.writeable if isinstance(d, np.ndarray) else not getattr(d, "readonly", False)
        return ArgInfo(
            "array",
            np.dtype(d.dtype),
            tuple(d.shape),
            tuple(s // d.dtype.itemsize for s in d.strides),
            writeable=writeable,
        )
    if type(a).__name__ == "Generator" and type(a).__module__.startswith("numpy.random"):
        return ArgInfo("generator")  # its methods draw from tracejit's generator (random_draws.py)
    if type(a) is complex:  # (the call passes it as a 2-element array of its parts: complex_calls.py)
        from tracejit.frontend.complex_calls import SCALAR_PARTS

        part = SCALAR_PARTS.get() or np.dtype(np.float64)
        return ArgInfo("array", part, (2,), (1,), writeable=False, complex="scalar")
    if type(a) is dict:  # (a dict of settings is keyed by value before this: kernel._planned, is_setting)
        held = sorted({type(v).__name__ for v in a.values() if not is_setting({0: v})})
        raise ArgumentError(
            f"argument {position} is a dict holding {', '.join(held)} values: a dict of settings (numbers, strings, "
            "tuples of them) keys the kernel by value, but one holding arrays cannot be an argument; pass its "
            "arrays as arguments of their own"
        )
    if not isinstance(a, np.ndarray):
        raise ArgumentError(
            f"argument {position} of type {type(a).__name__} is not an array; pass a numpy "
            "array, tj.Array or Python scalar (or name it in static= if it is a setting)"
        )
    dt = a.dtype if a.dtype.kind == "c" else check(a.dtype, f"argument {position}", internal=False)
    item = a.itemsize
    if any(s % item for s in a.strides):
        raise ArgumentError(
            f"argument {position} has strides {a.strides} that are not a multiple of its "
            f"item size {item}; pass np.ascontiguousarray(x)"
        )
    return ArgInfo("array", dt, a.shape, tuple(s // item for s in a.strides), writeable=a.flags.writeable)


CUDA_DLPACK = 2  # kDLCUDA


def _dlpack_device_type(a) -> int | None:
    try:
        return int(a.__dlpack_device__()[0])
    except Exception:
        return None


def cuda_array(a, device=None) -> Array:
    """A tj.Array over another library's CUDA array, without a copy, on the GPU of `device` when that
    is a cuda device, else the default GPU."""
    from tracejit.runtime import registry

    name = getattr(device, "name", device)
    dev = registry.device(name if isinstance(name, str) and name.startswith("cuda") else "cuda")
    return dev.import_foreign(a)


def scalar_array(a: np.generic) -> np.ndarray:
    """A NumPy scalar as the 0-d array a kernel takes it as: read-only, as the scalar is immutable (an integer one is
    then a number the code may use as a size: kernel.py's numbers; an assignment into it raises, as NumPy's does)."""
    out = np.array(a)
    out.flags.writeable = False
    return out


def normalize(a, device: str | None = None):
    """Convert array-likes (lists, DLPack objects, NumPy scalars) to numpy arrays, and tj.Arrays of
    another device than `device` to host arrays; leave the rest."""
    t = type(a)
    if t is Array and device is not None and a.device.name != getattr(device, "name", device):
        return a.numpy()
    if t is np.ndarray:
        # another byte order is NumPy's business, not the kernel's: compute on a native copy
        return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
    if t is float or t is int or t is bool or t is Array or t is Spec or t is Default:
        return a
    if isinstance(a, np.generic):
        return scalar_array(a)
    for builtin in (bool, int, float):  # subclasses (IntEnum members, ...) are their base's numbers
        if isinstance(a, builtin):
            return builtin(a)
    if isinstance(a, np.ma.MaskedArray):
        raise ArgumentError(
            "a masked array argument: tracejit computes on plain arrays and would drop the "
            "mask; pass a.filled(value), or a.data and the mask np.ma.getmaskarray(a) as two "
            "arguments and use np.where inside the kernel"
        )
    if isinstance(a, np.matrix):
        raise ArgumentError(
            "an np.matrix argument: its * and ** are matrix operations, which a kernel's "
            "arrays do not follow; pass np.asarray(m) (and write @ for a matrix product)"
        )
    if hasattr(a, "__cuda_array_interface__"):  # CuPy, PyTorch, Numba device arrays: read in place
        arr = cuda_array(a, device)
        return normalize(arr, device)
    if hasattr(a, "__dlpack_device__") and _dlpack_device_type(a) == CUDA_DLPACK:
        raise ArgumentError(
            f"a {type(a).__name__} on a CUDA device offers DLPack but no __cuda_array_interface__, "
            "which tracejit reads GPU arrays through; convert it (e.g. cupy.from_dlpack(x)) first"
        )
    if isinstance(a, (list, tuple, memoryview)) or hasattr(a, "__array__") or hasattr(a, "__array_interface__"):
        try:
            return np.asarray(a)
        except ValueError as e:  # a ragged list: NumPy's "inhomogeneous shape"
            raise ArgumentValueError(
                f"a {type(a).__name__} argument cannot become an array: {e}; pass lists of "
                "equal length at each level (or a numpy array)"
            ) from None
    if hasattr(a, "__dlpack__"):
        return np.from_dlpack(a)
    return a
