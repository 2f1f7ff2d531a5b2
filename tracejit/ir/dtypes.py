"""The dtypes tracejit knows, and NumPy's promotion rules (NEP 50) applied to traced values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracejit.errors import DtypeError

# uint64 is internal: NumPy sums uint8/16/32 into it.
SUPPORTED = tuple(
    np.dtype(n)
    for n in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
_SUPPORTED_SET = frozenset(SUPPORTED)

BOOL = np.dtype("bool")
INT64 = np.dtype("int64")
UINT64 = np.dtype("uint64")
FLOAT64 = np.dtype("float64")


@dataclass(frozen=True)
class NarrowFloat:
    """The layout of one of ml_dtypes' narrow float types: stored as bits, computed in float32 (ir/narrow_floats.py)."""

    exponent: int  # exponent bits
    mantissa: int  # explicit significand bits
    infinity: bool  # the top exponent is IEEE's (inf and NaN); else (e4m3fn) only S.1111.111 is NaN, no inf

    @property
    def bias(self) -> int:
        return (1 << (self.exponent - 1)) - 1

    @property
    def bits(self) -> int:
        return 1 + self.exponent + self.mantissa


# ml_dtypes' types tracejit computes with, by name (NumPy user dtypes: ml_dtypes itself is never imported here, so
# tracejit imports without it; a caller holding such a dtype has imported it)
NARROW_FLOATS = {
    "bfloat16": NarrowFloat(8, 7, True),
    "float8_e5m2": NarrowFloat(5, 2, True),
    "float8_e4m3fn": NarrowFloat(4, 3, False),
}


def narrow_float(dt: np.dtype) -> NarrowFloat | None:
    """The layout of dt where it is one of ml_dtypes' NARROW_FLOATS, else None."""
    if dt.isbuiltin != 2:  # (a NumPy type: not a user dtype)
        return None
    layout = NARROW_FLOATS.get(dt.name)
    return (
        layout if layout is not None and dt.type.__module__ == "ml_dtypes" and dt.itemsize * 8 == layout.bits else None
    )


def is_narrow_float(dt: np.dtype) -> bool:
    return narrow_float(dt) is not None


def check(dtype, what: str = "argument", internal: bool = True) -> np.dtype:
    """Return dtype as np.dtype, or raise DtypeError naming it and what is supported.

    `internal=False` (kernel arguments) excludes uint64, which tracejit uses only for NumPy's sums.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        if not isinstance(dtype, str) or dtype not in NARROW_FLOATS:
            raise DtypeError(f"{what}: {dtype!r} is not a dtype") from e
        try:  # a name ("bfloat16", in a manifest) that NumPy knows once ml_dtypes is imported
            import ml_dtypes
        except ImportError:
            raise DtypeError(f"{what}: {dtype} needs ml_dtypes (pip install ml_dtypes)") from None
        dt = np.dtype(getattr(ml_dtypes, dtype))
    if (dt not in _SUPPORTED_SET and not is_narrow_float(dt)) or (not internal and dt == UINT64):
        names = ", ".join([*(d.name for d in SUPPORTED if d != UINT64), *(f"ml_dtypes.{n}" for n in NARROW_FLOATS)])
        raise DtypeError(
            f"{what} has dtype {dt} which tracejit does not support; "
            f"supported dtypes: {names}. Convert with .astype() before the call."
        )
    return dt


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or is_narrow_float(dt)


def is_inexact(dt: np.dtype) -> bool:
    """NumPy's `np.issubdtype(dt, np.inexact)` for the real dtypes: ml_dtypes' narrow floats are not, so NumPy's
    nan-functions (nansum, nanmean, nanargmax, nan_to_num) treat them as they treat integers; tracejit does too."""
    return dt.kind == "f" and not is_narrow_float(dt)


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def weak_dtype(value) -> np.dtype:
    """The dtype a Python scalar takes when nothing stronger is around (NEP 50)."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, int):
        return INT64
    if isinstance(value, float):
        return FLOAT64
    raise DtypeError(
        f"Python scalar {value!r} of type {type(value).__name__} is not supported (use bool, int or float)"
    )


def _scalar_proxy(dt: np.dtype, weak: bool):
    # np.result_type treats Python scalars as weak; a value of the right *kind* is all it looks at.
    if not weak:
        return dt
    return {"b": True, "i": 0, "u": 0, "f": 0.0}[dt.kind]


def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote (dtype, weak) pairs as NumPy 2 does; the result is weak only if every operand is."""
    if all(weak for _, weak in operands):
        order = "bif"
        kind = max((dt.kind for dt, _ in operands), key=lambda k: order.index(k if k != "u" else "i"))
        return {"b": BOOL, "i": INT64, "u": INT64, "f": FLOAT64}[kind], True
    dt = np.result_type(*(_scalar_proxy(dt, weak) for dt, weak in operands))
    return check(dt, "result"), False


def finfo(dt: np.dtype):
    """np.finfo, and ml_dtypes.finfo for its narrow floats (NumPy's knows only its own float types)."""
    if is_narrow_float(dt):
        import ml_dtypes

        return ml_dtypes.finfo(dt)
    return np.finfo(dt)


def sum_dtype(dt: np.dtype) -> np.dtype:
    """The accumulator/result dtype NumPy's sum and prod use."""
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return INT64
    if dt.kind == "u" and dt.itemsize < 8:
        return UINT64
    return dt


def identity(op: str, dt: np.dtype):
    """Identity element of a reduction, as a Python value."""
    if op == "sum":
        return False if dt.kind == "b" else 0
    if op == "prod":
        return True if dt.kind == "b" else 1
    if is_float(dt):
        return -np.inf if op == "max" else np.inf
    if dt.kind == "b":
        return op == "min"
    info = np.iinfo(dt)
    return int(info.min) if op == "max" else int(info.max)
