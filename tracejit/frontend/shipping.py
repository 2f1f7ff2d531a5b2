"""Kernels sent to other processes (Dask workers): by name where their module can be imported (the kernel
there is that module's own), else as their function and options, rebuilt once per process. Either way every
task a process runs finds the plans and compiled kernels of the ones before it."""

from __future__ import annotations

import sys
import threading
import uuid
import weakref

# token -> the kernel of this process (alive while a task, a cached plan or the caller holds it)
_rebuilt: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
_lock = threading.Lock()


def token(kernel) -> str:
    """A name for this kernel that stays the same wherever it is sent."""
    t = kernel.__dict__.get("_shipping_token")
    if t is None:
        with _lock:
            t = kernel.__dict__.setdefault("_shipping_token", f"{kernel.__name__}-{uuid.uuid4().hex}")
            _rebuilt.setdefault(t, kernel)
    return t


def reduce(kernel):
    """Kernel.__reduce__."""
    fn = kernel.fn
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", "")
    if module is not None and module.__name__ != "__main__" and "<" not in qualname:
        obj = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is kernel:  # pickle's own by-name reference: the other process imports it (its __module__)
            return qualname
    names = kernel._names
    static = tuple(names[i] for i in sorted(kernel._static))
    # A function of the main script (a notebook's too) or a closure cannot be found by name in another
    # process: it travels by value, through the cloudpickle Numba ships (as Numba's own dispatchers do), so
    # multiprocessing's spawn, fork and forkserver workers and joblib can run it.
    from numba import cloudpickle

    return rebuild_pickled, (
        _importable_class(kernel),
        token(kernel),
        cloudpickle.dumps(fn),
        static,
        kernel._device,
        kernel._dynamic,
        kernel._binds,
    )


def _importable_class(kernel) -> type:
    """The class a process can import to rebuild `kernel` (its own class may be made per parameter count)."""
    for cls in type(kernel).__mro__:
        if getattr(sys.modules.get(cls.__module__), cls.__qualname__, None) is cls:
            return cls
    raise TypeError(f"no importable class for {kernel!r}")


def rebuild_pickled(cls, token: str, pickled: bytes, static, device, dynamic, binds: str = "self"):
    """The kernel `token` names in this process: made once from its pickled function, then the same one."""
    import pickle

    with _lock:
        kernel = _rebuilt.get(token)
        if kernel is None:
            kernel = _rebuilt[token] = cls(pickle.loads(pickled), static, device, dynamic)
            kernel.__dict__["_shipping_token"] = token
            kernel._binds = binds  # (a staticmethod's or classmethod's function travels unwrapped)
        return kernel
