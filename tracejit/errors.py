"""User-facing error classes: one per kind of mistake, each message says what happened and what to do."""
from __future__ import annotations


class TracejitError(Exception):
    """Base class of every error tracejit raises on purpose."""


class TraceError(TracejitError):
    """The kernel function did something that cannot be traced (control flow on a traced value, len(), ...)."""


class ShapeError(TraceError, ValueError):
    """Operand shapes do not fit together (broadcasting, reshape, indexing, reductions)."""


class IndexOutOfBoundsError(TraceError, IndexError):
    """An integer index outside its axis, where NumPy raises IndexError: a constant one while tracing,
    a value of an index array (x[idx], np.take) when the kernel runs, on every device.

    >>> f = tj.kernel(lambda x: x[5])
    >>> f(np.arange(3))              # IndexError: index 5 is out of bounds for axis 0 with size 3
    >>> tj.kernel(lambda x, i: x[i])(np.arange(3), np.array([0, -4]))   # index -4 is out of bounds ...
    Index inside the shape (x[-1] is the last element), or slice (x[5:] is empty, as in NumPy).
    """


class InvalidIndexError(TraceError, IndexError):
    """An index NumPy refuses with IndexError for what it is, whatever the data: an array of floats,
    index arrays that do not broadcast together, a boolean mask of the wrong shape.

    >>> f = tj.kernel(lambda x, i: x[i])
    >>> f(np.arange(5.0), np.array([1.0]))   # IndexError: arrays used as indices must be of integer type
    Index with integers (i.astype(np.int64)), or a boolean mask of the indexed axes' shape.
    """


class UnsupportedError(TraceError, TypeError):
    """A NumPy function, operator or argument that tracejit does not implement."""


class AssignmentError(TraceError, ValueError):
    """An assignment NumPy refuses with ValueError: the destination is read-only (a non-writeable array
    argument, a view made by np.broadcast_to), or a Python float NaN stored into an integer array.

    >>> x = np.ones(3); x.flags.writeable = False
    >>> tj.kernel(lambda a: a.__setitem__(0, 2.0))(x)   # ValueError: assignment destination is read-only
    Pass a writeable array (x.copy()), or build the new values in a fresh array (y = x.copy(); y[0] = 2.0).
    """


class CastingError(TraceError, TypeError):
    """An in-place operation whose result NumPy will not cast back to the destination's dtype under its
    casting rule ('same_kind'), where NumPy raises UFuncTypeError (a TypeError).

    >>> f = tj.kernel(lambda a: a.__iadd__(1.5))
    >>> f(np.zeros(3, np.int64))       # NumPy: Cannot cast ufunc 'add' output from float64 to int64
    Write a = a + 1.5 for a new float array, or cast the operand first (a += np.int64(1)).
    """


class RecursionLimitError(TraceError, RecursionError):
    """Python's recursion limit was reached while a kernel was traced or lowered. tracejit's own walks of the
    graph are iterative, so a program's length is bounded by memory, not by the limit: this is raised for
    recursion in the kernel's own Python code (a function calling itself too deeply), or where Python
    itself was already near its limit when the kernel was called. The message gives the line of the
    kernel's code being traced (or where the kernel is defined, while lowering) and the innermost frame.

    >>> def fact(x, n): return x if n == 0 else fact(x * n, n - 1)
    >>> tj.kernel(lambda x: fact(x, 5000))(np.ones(3))   # RecursionError: ... while tracing
    Write the recursion as a loop, or raise the limit (sys.setrecursionlimit) for a recursion that is meant.
    """


class DtypeError(TracejitError, TypeError):
    """A dtype that tracejit, or the chosen device, cannot represent."""


class ScalarOverflowError(TracejitError, OverflowError):
    """A Python int that the dtype it combines with cannot hold, where NumPy raises OverflowError (NEP 50).

    >>> f = tj.kernel(lambda a: a + 300)
    >>> f(np.zeros(3, np.uint8))      # NumPy: OverflowError: Python integer 300 out of bounds for uint8
    Use a NumPy scalar or array of a wider dtype (np.int16(300)), or cast the array (a.astype(np.int16) + 300).
    """


class ArgumentError(TracejitError, TypeError):
    """A kernel was called with the wrong number or kind of arguments."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument NumPy cannot turn into an array (a ragged list), where NumPy raises ValueError."""


class CompileError(TracejitError):
    """A backend compiler rejected generated code; the message carries its log and the offending line."""


class CompileTimeoutError(CompileError, TimeoutError):
    """A backend compiler ran past TRACEJIT_COMPILE_TIMEOUT seconds (default 120) on one kernel; the
    message names the kernel and its generated source. Raise the limit (0 turns it off) for a kernel
    that is merely big; a kernel that never finishes compiling is a tracejit bug: please report it."""


class DeviceError(TracejitError):
    """A device that is unknown or not usable here."""


class OutOfMemoryError(DeviceError, MemoryError):
    """A device (host memory on numba) could not allocate an array the kernel needs, where NumPy raises
    MemoryError. Make the arrays smaller, or free arrays you no longer need."""


class InternalError(TracejitError):
    """tracejit built an invalid IR: a bug in tracejit, never in the caller's code. Please report it."""


class CacheWarning(UserWarning):
    """The kernel disk cache could not be read or written; tracejit compiled instead."""
