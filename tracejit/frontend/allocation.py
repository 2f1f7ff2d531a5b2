"""np.zeros, np.ones, np.empty and np.full called by a kernel function while it is traced make traced
arrays, so the kernel can assign traced values into them (`U = np.zeros((n, n)); U[1:-1, 1:-1] = u`),
which a NumPy array cannot hold.

NumPy offers no protocol for creation functions from shapes alone, so while a trace runs these four names
of the numpy module are wrappers: on the tracing thread, called from code outside tracejit and NumPy (the
kernel function and what it calls), they return the traced array (creation.py); everywhere else they are
NumPy's own. Code that imported the function itself (`from numpy import zeros`) keeps NumPy's.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import numpy as np

_NAMES = ("zeros", "ones", "empty", "full")
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
            return getattr(creation, name)(*args, **kwargs)
        return original(*args, **kwargs)
    make.__name__, make.__doc__, make.__wrapped__ = name, original.__doc__, original
    return make


def _internal(frame) -> bool:
    return frame.f_globals.get("__name__", "").startswith(_INTERNAL)
