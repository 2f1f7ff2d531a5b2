"""NumPy's creation functions called by a kernel function while it is traced make traced arrays:
- np.zeros, np.ones, np.empty and np.full, so the kernel can assign traced values into them
  (`U = np.zeros((n, n)); U[1:-1, 1:-1] = u`), which a NumPy array cannot hold;
- np.arange, np.linspace, np.eye, np.identity and np.tri, so NumPy's own indexing of the result by a traced
  array (`np.eye(n)[labels]`, the one-hot idiom) becomes a gather instead of a conversion error. Their
  values stay known while tracing (Tensor's int(), float(), bool() and np.asarray read them), so Python
  code that uses them as numbers keeps working; an array tracejit cannot embed stays NumPy's;
- numpy.random's functions (np.random.rand, normal, default_rng, ...), which draw from tracejit's own
  generator (random_draws.py) or raise tj.UnsupportedError;
- np.fft.fftfreq and np.fft.rfftfreq, index expressions of any length (fft.py) rather than constants;
- np.ndindex(shape), whose `for pos in np.ndindex(shape)` loop (numpy/loops.py) is compiled over the positions
  as nested `range` loops are, rather than traced step by step;
- np.array and np.asarray of a nested sequence holding traced values (`np.array([[f(x, y) for x in X]
  for y in Y])`) stack them, with NumPy's dtype for the mix; of a traced array, a copy or the array itself;
  of numbers alone (`seq = np.array(range(n))`), a traced array of them, its values known as np.arange's, so
  that traced values can be assigned into it (np.asarray of a NumPy array stays that array).

NumPy offers no protocol for creation functions from shapes alone, so while a trace runs these names of the
numpy module are wrappers: on the tracing thread, called from code outside tracejit and NumPy (the kernel
function and what it calls), they return the traced array (creation.py); everywhere else they are NumPy's
own. Code that imported the function itself (`from numpy import zeros`) keeps NumPy's, and so does C code:
a Cython function of numpy.random calls np.empty with the kernel's frame still the innermost Python frame,
so a call counts as the user's only where the instruction running in that frame calls this very function
(`_calls`); a traced array handed to C code that takes it for an ndarray would crash the interpreter.
"""

from __future__ import annotations

import dis
import functools
import operator
import sys
import threading
from contextlib import contextmanager

import numpy as np

_NAMES = ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "identity", "tri", "array", "asarray")
_FFT_NAMES = ("fftfreq", "rfftfreq")
_INTERNAL = ("tracejit.", "numpy.", "_tracejit")  # callers that keep NumPy's functions (and `numpy` itself; not a
# user's numpy_benchmarks or numpy_utils module, whose np.zeros must make traced arrays)

_lock = threading.Lock()
_tracing = threading.local()
_installed: dict[str, object] = {}  # name -> NumPy's function while the wrappers are in place
_depth = 0  # traces running, on any thread


# the kernel functions' module globals holding NumPy's creation functions by name (`from numpy import zeros`), by
# id: (the globals, {name: NumPy's function}, traces using them); their names are the wrappers while traced
_by_name: dict[int, tuple[dict, dict[str, object], int]] = {}


@contextmanager
def traced_arrays(module_globals: dict | None = None):
    """While the block runs on this thread, np.zeros & co. called by user code make traced arrays; so do the names
    `module_globals` (the kernel function's) binds to them (`from numpy import zeros`: numpy-benchmarks' slowparts)."""
    global _depth
    with _lock:
        if _depth == 0:
            for name in _NAMES:
                _installed[name] = original = getattr(np, name)
                setattr(np, name, _wrapper(name, original))
            _installed["ndindex"] = np.ndindex
            np.ndindex = NDIndex  # type: ignore[misc]  # (a subclass: isinstance and iteration are NumPy's)
            _installed["ndenumerate"] = np.ndenumerate
            np.ndenumerate = _ndenumerate  # type: ignore[misc,assignment]  # (a function: NumPy's class outside a trace)
            # numpy.random where it is imported (7 ms of a fresh process's first call to import): a trace that
            # imports it runs again once it is (kernel._trace), so its draws are never NumPy's numbers as constants
            npr = sys.modules.get("numpy.random")
            for name in _random_names(npr) if npr is not None else ():
                _installed["random." + name] = original = getattr(npr, name)
                setattr(npr, name, _wrapper(name, original, random=True))
            for name in _FFT_NAMES:  # (their results from Python ints: an index expression, not a constant)
                _installed["fft." + name] = original = getattr(np.fft, name)
                setattr(np.fft, name, _wrapper(name, original, fft=True))
        _depth += 1
        if module_globals is not None:
            _bind_names(module_globals)
    outer = getattr(_tracing, "active", False)
    _tracing.active = True
    try:
        yield
    finally:
        _tracing.active = outer
        with _lock:
            if module_globals is not None:
                _unbind_names(module_globals)
            _depth -= 1
            if _depth == 0:
                for name, original in _installed.items():
                    module, _, attr = name.rpartition(".")
                    setattr(np if not module else getattr(np, module), attr, original)
                _installed.clear()


def _bind_names(g: dict) -> None:
    """The names of g bound to NumPy's creation functions, the wrappers (lock held; _installed is NumPy's)."""
    found = _by_name.get(id(g))
    if found is not None:
        _by_name[id(g)] = (g, found[1], found[2] + 1)
        return
    originals = {name: original for name, original in _installed.items() if "." not in name}  # (numpy's own names)
    bound = {}
    for key, value in list(g.items()):
        for name, original in originals.items():
            if value is original:
                bound[key] = original
                g[key] = getattr(np, name)  # (the wrapper of np.<name>: it calls NumPy's outside a trace)
    _by_name[id(g)] = (g, bound, 1)


def _unbind_names(g: dict) -> None:
    g_, bound, count = _by_name[id(g)]
    if count > 1:
        _by_name[id(g)] = (g_, bound, count - 1)
        return
    del _by_name[id(g)]
    for key, original in bound.items():
        if getattr(g.get(key), "__wrapped__", None) is original:  # (unless the code bound the name anew)
            g[key] = original


class NDIndex(np.ndindex):
    """np.ndindex while a trace runs: NumPy's, with its shape kept, so that a `for` over one that has not started
    (numpy/loops.py) is compiled over its positions, as nested `range` loops are."""

    __wrapped__ = np.ndindex

    def __init__(self, *shape) -> None:
        super().__init__(*shape)
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        self.shape = tuple(operator.index(n) for n in shape)  # (an int argument: its number, as range() took it)
        self.started = False

    def __next__(self):
        self.started = True
        return super().__next__()


def _ndenumerate(arr):
    """np.ndenumerate while a trace runs: over a traced array, its (index, element) pairs by position
    (numpy/loops.py), so that `for (i, j), v in np.ndenumerate(a)` compiles as a loop; else NumPy's."""
    from tracejit.numpy import loops

    found = loops.ndenumerate_(arr)
    return found if found is not None else _ndenumerate.__wrapped__(arr)


_ndenumerate.__wrapped__ = np.ndenumerate  # type: ignore[attr-defined]  # (NumPy's, as bound at import)


def tracing() -> bool:
    """Whether a kernel function is being traced on this thread."""
    return getattr(_tracing, "active", False)


def _random_names(npr) -> list[str]:
    """numpy.random's functions (not its classes): the kernel's calls of them draw from tracejit's generator
    (random_draws.py) or raise, rather than put NumPy's numbers of the trace into the kernel as constants."""
    return [n for n in npr.__all__ if callable(getattr(npr, n, None)) and not isinstance(getattr(npr, n), type)]


def _wrapper(name: str, original, random: bool = False, fft: bool = False):
    def make(*args, **kwargs):
        caller = sys._getframe(1)
        if getattr(_tracing, "active", False) and not _internal(caller) and _calls(caller, name, make):
            if random:
                from tracejit.numpy import random_draws

                return random_draws.while_tracing(name, original, args, kwargs)
            if fft:
                from tracejit.numpy import fft as fft_module

                return fft_module.while_tracing(name, original, args, kwargs)
            from tracejit.numpy import creation

            return creation.while_tracing(name, original, args, kwargs)
        return original(*args, **kwargs)

    make.__name__, make.__doc__ = name, original.__doc__
    make.__wrapped__ = original  # type: ignore[attr-defined]  # a function takes any attribute; typeshed names none
    return make


def _internal(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "numpy" or name.startswith(_INTERNAL)


_LOADS = frozenset(
    {
        "LOAD_ATTR",
        "LOAD_METHOD",
        "LOAD_GLOBAL",
        "LOAD_NAME",
        "LOAD_FAST",
        "LOAD_DEREF",
        "LOAD_CLASSDEREF",
        "LOAD_FAST_CHECK",
        "LOAD_FAST_AND_CLEAR",
        "LOAD_FROM_DICT_OR_GLOBALS",
    }
)
_VARIABLES = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FAST_CHECK"})


def _calls(frame, name: str, fn) -> bool:
    """Whether the instruction `frame` is running calls `fn` (the wrapper of np.<name>) itself: its callee
    is an attribute `name` (np.zeros, numpy.zeros, xp.zeros) or a variable holding `fn`. A C function the
    frame called (np.random.rand -> np.empty) leaves the frame at the call of that C function instead."""
    callee = _callee(frame.f_code, frame.f_lasti)
    if callee is None:
        return name in frame.f_code.co_names  # Python 3.10: no instruction positions; the code names it
    opname, argval = callee
    if argval == name:
        return True
    if opname in _VARIABLES and isinstance(argval, str):
        value = frame.f_locals.get(argval, frame.f_globals.get(argval))
        return value is fn
    return False


@functools.lru_cache(maxsize=4096)
def _callee(code, lasti: int):
    """(opname, argval) of the instruction that loads the callee of the call at `lasti` (the last load
    starting where the call expression starts), ("", None) where the instruction is no call of a loaded
    name, or None where the interpreter records no positions (Python 3.10)."""
    if sys.version_info < (3, 11):  # (what 3.11 added: code.co_positions)
        return None
    instructions = list(dis.get_instructions(code))
    # (3.11's f_lasti can point into the inline cache after the instruction)
    at = next((i for i in reversed(instructions) if i.offset <= lasti), None)
    if at is None or at.positions is None or at.positions.lineno is None:
        return ("", None)
    start = (at.positions.lineno, at.positions.col_offset)
    found = ("", None)
    for i in instructions:
        if i.offset >= at.offset:
            break
        p = i.positions
        if i.opname in _LOADS and p is not None and (p.lineno, p.col_offset) == start:
            found = (i.opname, i.argval)
    return found
