"""NumPy's creation functions called by a kernel function while it is traced make traced arrays:
- np.zeros, np.ones, np.empty and np.full, so the kernel can assign traced values into them
  (`U = np.zeros((n, n)); U[1:-1, 1:-1] = u`), which a NumPy array cannot hold;
- np.arange, np.linspace, np.eye, np.identity and np.tri, so NumPy's own indexing of the result by a traced
  array (`np.eye(n)[labels]`, the one-hot idiom) becomes a gather instead of a conversion error. Their
  values stay known while tracing (Tensor's int(), float(), bool() and np.asarray read them), so Python
  code that uses them as numbers keeps working; an array tracejit cannot embed stays NumPy's;
- np.array and np.asarray of a nested sequence holding traced values (`np.array([[f(x, y) for x in X]
  for y in Y])`) stack them, with NumPy's dtype for the mix; of a traced array, a copy or the array itself.

NumPy offers no protocol for creation functions from shapes alone, so while a trace runs these names of the
numpy module are wrappers: on the tracing thread, called from code outside tracejit and NumPy (the kernel
function and what it calls), they return the traced array (creation.py); everywhere else they are NumPy's
own. Code that imported the function itself (`from numpy import zeros`) keeps NumPy's.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import numpy as np

_NAMES = ("zeros", "ones", "empty", "full", "arange", "linspace", "eye", "identity", "tri", "array", "asarray")
_INTERNAL = ("tracejit.", "numpy", "_tracejit")   # callers that keep NumPy's functions

_lock = threading.Lock()
_tracing = threading.local()
_installed: dict[str, object] = {}   # name -> NumPy's function while the wrappers are in place
_depth = 0                           # traces running, on any thread


@contextmanager
def traced_arrays():
    """While the block runs on this thread, np.zeros & co. called by user code make traced arrays."""
    global _depth
    with _lock:
        if _depth == 0:
            for name in _NAMES:
                _installed[name] = original = getattr(np, name)
                setattr(np, name, _wrapper(name, original))
        _depth += 1
    outer = getattr(_tracing, "active", False)
    _tracing.active = True
    try:
        yield
    finally:
        _tracing.active = outer
        with _lock:
            _depth -= 1
            if _depth == 0:
                for name, original in _installed.items():
                    setattr(np, name, original)
                _installed.clear()


def _wrapper(name: str, original):
    def make(*args, **kwargs):
        if getattr(_tracing, "active", False) and not _internal(sys._getframe(1)):
            from . import creation
            return creation.while_tracing(name, original, args, kwargs)
        return original(*args, **kwargs)
    make.__name__, make.__doc__, make.__wrapped__ = name, original.__doc__, original
    return make


def _internal(frame) -> bool:
    return frame.f_globals.get("__name__", "").startswith(_INTERNAL)
