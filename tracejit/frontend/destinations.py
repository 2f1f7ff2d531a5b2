"""Where a call's values go besides fresh arrays: into the argument arrays the kernel assigned to (as NumPy
changes them for the caller), and into the arrays given as `out=`.

The traced program computes the new value of each assigned argument as an extra output. A destination
is handed to the device to write straight into (no allocation, no copy) when its memory has the layout
the kernel writes and nothing the program reads overlaps it, or, for an argument written in place, when
the program reads that argument only at the element it writes (Program.writes_in_place); otherwise the
value is computed into fresh memory and copied in after the launch.
"""

from __future__ import annotations

import numpy as np

from tracejit.errors import ArgumentError, AssignmentError, UnsupportedError
from tracejit.runtime.array import Array


def check_assigned(name: str, assigned: tuple[int, ...], args, originals) -> None:
    """The arguments the kernel assigns to must be arrays the caller can see change: writeable, not
    converted on the way in, sharing memory with no other argument (NumPy would see the write through
    that one too; the kernel reads it as it was)."""
    for j in assigned:
        a = originals[j]
        if not isinstance(a, (np.ndarray, Array)):
            raise UnsupportedError(
                f"{name} assigns into argument {j}, a {type(a).__name__} that became an array on the "
                "way in, so the caller would not see the change; pass a numpy array or tj.Array"
            )
        if not _writeable(a):
            raise AssignmentError(
                f"assignment destination is read-only: {name} assigns into argument {j}, which is "
                "not writeable; pass a writeable array (x.copy())"
            )
        for k, b in enumerate(originals):
            if k != j and isinstance(b, (np.ndarray, Array)) and overlap(a, b):
                raise UnsupportedError(
                    f"{name} assigns into argument {j}, which shares memory with argument {k}; in "
                    "NumPy a write through one shows through the other, which tracejit does not "
                    "follow between arguments: pass a copy of one of them"
                )


def out_destinations(name: str, out, shapes: list, dtypes: list, device) -> list:
    """The out= argument as one destination (or None) per result; ArgumentError naming both sides when a
    shape, dtype or device does not match."""
    outs = list(out) if isinstance(out, tuple) else [out]
    if len(outs) != len(shapes):
        raise ArgumentError(f"{name} returns {len(shapes)} value(s); out= gave {len(outs)}")
    for i, (o, shape, dtype) in enumerate(zip(outs, shapes, dtypes)):
        if o is None:
            continue
        what = f"{name}: out[{i}]" if len(outs) > 1 else f"{name}: out"
        if not isinstance(o, (np.ndarray, Array)):
            raise ArgumentError(f"{what} must be a numpy array or tj.Array, got {type(o).__name__}")
        if type(o) is Array and o.device is not device:
            raise ArgumentError(
                f"{what} is a tj.Array on {o.device.name}; this call runs on {device.name}: pass an "
                f"array of {device.name} (or a numpy array)"
            )
        if tuple(o.shape) != tuple(shape) or np.dtype(o.dtype) != np.dtype(dtype):
            raise ArgumentError(
                f"{what} has shape {tuple(o.shape)} and dtype {np.dtype(o.dtype)}; the result has "
                f"shape {tuple(shape)} and dtype {np.dtype(dtype)}"
            )
        if not _writeable(o):
            raise AssignmentError(f"{what} is read-only; pass a writeable array")
    return outs


def _writeable(a) -> bool:
    data = a._data if type(a) is Array else a
    if isinstance(data, np.ndarray):
        return data.flags.writeable
    return not getattr(data, "readonly", False)


def _host(a) -> np.ndarray | None:
    """The NumPy array holding a's memory where a lives in host memory (numba's tj.Arrays too)."""
    data = a._data if type(a) is Array else a
    return data if isinstance(data, np.ndarray) else None


def overlap(a, b) -> bool:
    """Whether two arrays (numpy or tj.Array) may touch the same memory."""
    ha, hb = _host(a), _host(b)
    if ha is not None and hb is not None:
        return np.may_share_memory(ha, hb) and np.shares_memory(ha, hb)
    if ha is not None or hb is not None or a.device is not b.device:
        return False
    da, db = a._data, b._data
    if hasattr(da, "span"):  # raw device addresses (cuda)
        (lo_a, n_a), (lo_b, n_b) = da.span(), db.span()
        return n_a > 0 and n_b > 0 and lo_a < lo_b + n_b and lo_b < lo_a + n_a
    return a.device.memory_of(a) == a.device.memory_of(b)


def writable_memory(dest, device, shape, dtype):
    """The device memory a kernel can write a result of this shape and dtype into directly: dest's own
    when it is of this device and contiguous, else None."""
    if device.returns_numpy:
        data = _host(dest)
        ok = data is not None and data.flags.c_contiguous and data.flags.writeable
    else:
        data = dest._data if type(dest) is Array and dest.device is device else None
        ok = data is not None and getattr(data, "contiguous", True)
    ok = ok and tuple(data.shape) == tuple(shape) and np.dtype(data.dtype) == np.dtype(dtype)
    return data if ok else None


def copy_into(dest, value, device) -> None:
    """A computed value (memory of `device`) copied into dest: a NumPy array, or a tj.Array of any device."""
    host = _host(dest)
    if host is not None:
        np.copyto(host, value if device.returns_numpy else device.to_numpy(value))
        return
    if not getattr(dest._data, "contiguous", True):
        raise UnsupportedError(
            f"writing into a non-contiguous tj.Array on {dest.device.name} (a view of another "
            "library's memory) is not supported; pass a contiguous array"
        )
    dest.device.feed(dest, Array(value, device))  # on the device, or through the host from another one
