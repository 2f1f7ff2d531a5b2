"""User-facing error classes: one per kind of mistake, each message says what happened and what to do."""

from __future__ import annotations

from numpy.linalg import LinAlgError  # noqa: F401  NumPy's own class: a generated np.linalg kernel raises it as NumPy does


class TracejitError(Exception):
    """Base class of every error tracejit raises on purpose. Where NumPy raises a built-in exception, the
    subclass tracejit raises is an instance of it too (ValueError, TypeError, IndexError, OverflowError,
    MemoryError), so the `except` clauses of NumPy code keep working.

    >>> try:
    ...     tj.kernel(lambda a, b: a + b)(np.ones((2, 3)), np.ones(4))
    ... except ValueError as e:   # a tj.ShapeError: a TracejitError and a ValueError, as NumPy's error is
    ...     raise tj.TracejitError(f"caught: {e}") from e
    Catch the subclass of the mistake you expect, or the built-in class NumPy would raise.
    """


class TraceError(TracejitError):
    """The kernel function did something that cannot be traced: a value read from an array used where Python
    needs it while tracing: in an `if` whose branch raises an exception of your own class or returns from inside
    nested loops, in a lambda's conditional or `bool()`, as an index into a NumPy array or a Python sequence (its value
    is not known while tracing; an int or float argument so used is fine: the kernel is specialised on its
    value); iterating over more than 64 rows of a traced value in a way that is not compiled as a loop.
    (Conditional expressions, `if`s that bind names, assign, return early or raise a built-in exception,
    `while`, `for` over arrays, `and`/`or`/`not`, `float()`, `int()` and `bool()` in the kernel function and your
    helpers compile: see Loops and branches.) The message starts with the file and line of your code.

    >>> tj.kernel(lambda x: x if x.sum() > 0 else -x)(np.ones(3))   # a traced value was used as a Python bool
    Select values with np.where(x.sum() > 0, x, -x) (or tj.where); a number that decides control flow can be
    passed as an int or float argument, which the kernel is specialised on.
    """


class ShapeError(TraceError, ValueError):
    """Operand shapes do not fit together, where NumPy raises ValueError: shapes that do not broadcast (both
    shapes are in the message), a bad reshape or axis, einsum subscripts that disagree with the operands.

    >>> tj.kernel(lambda a, b: a + b)(np.ones((2, 3)), np.ones(4))   # could not be broadcast: (2, 3) (4,)
    Make the shapes broadcast as NumPy requires: reshape, slice or add an axis (b[:, None]) first.
    """


class IndexOutOfBoundsError(TraceError, IndexError):
    """An integer index outside its axis, where NumPy raises IndexError with the same message: a constant
    one while tracing, a value of an index array (x[idx], np.take) when the kernel runs, on every device.

    >>> tj.kernel(lambda x: x[5])(np.arange(3))   # IndexError: index 5 is out of bounds for axis 0 with size 3
    Index inside the shape (x[-1] is the last element), or slice (x[5:] is empty, as in NumPy). An index
    array read from data is checked when the kernel runs: index -4 of 3 elements raises the same way.
    """


class InvalidIndexError(TraceError, IndexError):
    """An index NumPy refuses with IndexError for what it is, whatever the data: an array of floats,
    index arrays that do not broadcast together, a boolean mask of the wrong shape.

    >>> tj.kernel(lambda x, i: x[i])(np.arange(5.0), np.array([1.0]))   # arrays used as indices must be integers
    Index with integers (i.astype(np.int64)), or a boolean mask of the indexed axes' shape.
    """


class UnsupportedError(TraceError, TypeError):
    """A NumPy function, ndarray method, operator or argument that tracejit does not implement (named in the
    message, with the user's line) where no fallback to NumPy runs it (fallback=False, TRACEJIT_FALLBACK=0, an
    in-place call, one whose result is real or complex as the values decide, a captured graph), something a
    captured graph or f.trace() cannot hold (a size that depends on the data, read back when the kernel runs), or
    one NumPy itself refuses for these dtypes (np.positive of bools).

    >>> tj.kernel(lambda x: np.unwrap(x), fallback=False)(np.ones(3))   # not compiled, and no fallback asked
    Use what the message names as compiling instead (np.argpartition: tj.topk), let the call fall back to NumPy
    (the default: a tj.FallbackWarning says what it cost), or call the function with NumPy outside the kernel.
    The supported API is listed in the docs (reference/numpy-api.md).
    """


class AssignmentError(TraceError, ValueError):
    """An assignment NumPy refuses with ValueError: the destination is read-only (a non-writeable array
    argument, a view made by np.broadcast_to), or a Python float NaN stored into an integer array.

    >>> x = np.ones(3); x.flags.writeable = False
    >>> tj.kernel(lambda a: a.__setitem__(0, 2.0))(x)   # ValueError: assignment destination is read-only
    Pass a writeable array (x.copy()), or build the new values in a fresh array (y = x.copy(); y[0] = 2.0).
    """


class CastingError(TraceError, TypeError):
    """An in-place operation (x op= y, or a ufunc's out=) whose result NumPy will not cast back to the
    destination's dtype under its casting rule ('same_kind'), where NumPy raises UFuncTypeError (a TypeError).

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
    """A dtype that tracejit, or the chosen device, cannot represent: an argument of a dtype tracejit does
    not support (uint64, clongdouble, object, strings), or one the device lacks (webgpu: no float64, int64 or
    uint64, so no complex128; metal: no float64 or complex128). The message names the dtype and the device, and
    the argument that has it or the line of the function that makes such a value (a Python float's arithmetic
    `t ** 2`, np.argmax's int64).

    >>> tj.kernel(lambda x: x * 2)(np.ones(3, np.complex128), device="webgpu")   # complex128: float64 parts
    Convert with .astype() before the call (float32 or int32 on webgpu and metal), or use a device that has
    the dtype.
    """


class ScalarOverflowError(TracejitError, OverflowError):
    """A Python int that the dtype it combines with cannot hold, where NumPy raises OverflowError (NEP 50):
    in arithmetic (u8 + 300, written in the kernel or passed as an argument), or an int argument beyond
    int64 used other than in a comparison, on every device.

    >>> f = tj.kernel(lambda a: a + 300)
    >>> f(np.zeros(3, np.uint8))      # NumPy: OverflowError: Python integer 300 out of bounds for uint8
    Use a NumPy scalar or array of a wider dtype (np.int16(300)), or cast the array (a.astype(np.int16) + 300).
    """


class ArgumentError(TracejitError, TypeError):
    """A kernel was called with the wrong number or kind of arguments: a call Python would refuse (a
    missing or unexpected argument, with Python's own reason), an argument that is not an array or a
    number, an unhashable static argument, an out= of the wrong shape or dtype.

    >>> tj.kernel(lambda x, y: x + y)(np.ones(3))   # <lambda>(x, y): missing a required argument: 'y'
    Call the kernel as you would call the function; name settings that are not arrays in static=.
    """


class ArgumentValueError(ArgumentError, ValueError):
    """An argument NumPy cannot turn into an array (a ragged list), where NumPy raises ValueError.

    >>> tj.kernel(lambda x: x * 2)([[1.0, 2.0], [3.0]])   # a list argument cannot become an array
    Pass lists of equal length at each level, or a NumPy array.
    """


class CompileError(TracejitError):
    """A backend compiler rejected generated code, or a raw kernel's source; the message carries the
    compiler's log, each message followed by the line of the source it points at.

    >>> tj.RawKernel("__kernel void k(__global float* x) { x[0] = y; }", "k", device="opencl")   # undeclared 'y'
    Fix the source of a raw kernel. For a kernel tracejit generated this is a tracejit bug: please report it
    with the message (TRACEJIT_DEBUG=4 prints the generated source).
    """


class CompileTimeoutError(CompileError, TimeoutError):
    """A backend compiler ran past TRACEJIT_COMPILE_TIMEOUT seconds (default 120) on one kernel; the
    message names the kernel and its generated source.

    >>> os.environ["TRACEJIT_COMPILE_TIMEOUT"] = "0.001"   # seconds; read at each compile
    >>> tj.kernel(lambda x: np.cbrt(x) * 2)(np.ones(3))      # numba did not finish compiling kernel k0_...
    Raise the limit (0 turns it off) for a kernel that is merely big; a kernel that never finishes compiling
    is a tracejit bug: please report it.
    """


class DeviceError(TracejitError):
    """A device that is unknown or not usable here, or an allocation, launch or module load the device
    refused (the message names the call and the driver's error).

    >>> tj.kernel(lambda x: x * 2)(np.ones(3), device="nosuch")   # unknown device 'nosuch'; known devices: ...
    Name a device tj.devices() lists as available (its reason says what to install), or leave device=
    out to use the default.
    """


class OutOfMemoryError(DeviceError, MemoryError):
    """A device (host memory on numba) could not allocate an array the kernel needs, or an allocation
    would pass the limit of tj.set_memory_limit / TRACEJIT_MEMORY_LIMIT, where NumPy raises MemoryError.

    >>> tj.set_memory_limit(1 << 20, device="opencl")
    >>> tj.asarray(np.ones(1 << 18), device="opencl")   # 2097152 bytes would pass the memory limit
    Make the arrays smaller, free arrays you no longer need, or raise the limit (None lifts it).
    """


class InternalError(TracejitError):
    """tracejit built an invalid IR: a bug in tracejit, never in the caller's code. No example: no correct
    program should meet it.

    Please report it with the message and the kernel's code (TRACEJIT_DEBUG=3 prints the IRs).
    """


class CacheWarning(UserWarning):
    """The kernel disk cache could not be read or written (read-only, full, not a directory); tracejit
    compiled instead, and warns once. A cache that is only read-only is still used for what it holds.

    >>> os.environ["TRACEJIT_CACHE_DIR"] = "/dev/null/tracejit"   # a path that cannot be a directory
    >>> tj.kernel(lambda x: x * 2 + 1)(np.ones(3))   # CacheWarning: cannot read the kernel cache at ...
    Point TRACEJIT_CACHE_DIR at a writable directory of your own (it is created private, 0700).
    """


class FallbackWarning(UserWarning):
    """A call tracejit does not compile ran with NumPy (or the library called) on the host, in the middle of the
    kernel: the compiled parts before and after it still fuse, and its result is NumPy's. Said once per call
    site, with what it cost the first time.

    >>> os.environ["TRACEJIT_FALLBACK"] = "1"   # the default (tracejit's own test suite turns fallback off)
    >>> warnings.simplefilter("error", tj.FallbackWarning)   # (raised, to show it here)
    >>> tj.kernel(lambda a: np.i0(a) * 2)(np.eye(3))   # FallbackWarning: np.i0 is not compiled by tracejit ...
    Silence it with warnings.filterwarnings("ignore", category=tj.FallbackWarning); refuse such calls
    instead with @tj.kernel(fallback=False) or TRACEJIT_FALLBACK=0 (a tj.UnsupportedError at the line).
    """
