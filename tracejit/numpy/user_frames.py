"""Where in the user's code a trace is: the frames of the Python stack outside tracejit, NumPy and installed
libraries. Errors and warnings name the user's line (numpy/host_calls.py's fallback warning, frontend/kernel.py's
error prefix), and a library function the user called is named by its public dotted name (scipy.special.logsumexp)
where it converts a traced value (numpy/tensor.py's __array__)."""

from __future__ import annotations

import os
import sys
import types

import numpy as np

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tracejit's own folder
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


def installed_library(path: str) -> bool:
    """Whether a source file belongs to an installed package (site-packages), not the user's own code."""
    return "site-packages" in path or "dist-packages" in path


def user_site() -> tuple[str, int]:
    """(file, line) of the user's code running now: the innermost frame outside tracejit, NumPy and installed
    libraries (or, where there is none, the innermost library frame)."""
    frame: types.FrameType | None = sys._getframe(1)
    library = None  # (an installed library's frame: the user's call of it is further out)
    while frame is not None:
        name = frame.f_code.co_filename
        path = os.path.abspath(name)
        if not (path.startswith(_PACKAGE) or path.startswith(_NUMPY) or name.startswith("<tracejit")):
            if not installed_library(path):
                return (name if name.startswith("<") else path), frame.f_lineno
            library = library or (path, frame.f_lineno)
        frame = frame.f_back
    return library or ("<unknown>", 0)


def library_entry() -> str | None:
    """The installed library's function the user's code called, running now (scipy.special.logsumexp: the
    outermost frame of an installed package other than NumPy and tracejit, whose caller is the user's), as its
    public dotted name; None where no such frame is on the stack."""
    frame: types.FrameType | None = sys._getframe(1)
    entry = None
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if module.startswith("tracejit.frontend."):
            break  # (the trace's own entry: what calls the kernel is outside it, a test runner or a server)
        top = module.partition(".")[0]
        if top not in ("tracejit", "numpy") and installed_library(frame.f_code.co_filename):
            entry = frame
        elif entry is not None and top not in ("tracejit", "numpy"):
            break  # (the user's frame that called the library)
        frame = frame.f_back
    if entry is None:
        return None
    module = entry.f_globals.get("__name__") or ""
    public = ".".join(part for part in module.split(".") if not part.startswith("_"))
    return f"{public}.{entry.f_code.co_name}"
