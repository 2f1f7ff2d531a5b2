"""Python's RecursionError met while a kernel is traced or lowered, raised as a tj.RecursionLimitError that
says where in the user's code it happened and what to do."""

from __future__ import annotations

import functools
import sys
from collections import Counter

from tracejit.errors import RecursionLimitError


DEEP = 50  # frames of one function that make a recursion


def guarded(doing: str):
    """Decorate a Kernel method (tracing, lowering): a RecursionError inside it becomes a RecursionLimitError."""

    def wrap(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except RecursionLimitError:
                raise
            except RecursionError as e:
                limit = sys.getrecursionlimit()
                sys.setrecursionlimit(limit + 200)  # room to write the message at the depth that ran out
                try:
                    message = _message(self.fn, doing, e.__traceback__, limit)
                finally:
                    sys.setrecursionlimit(limit)
                raise RecursionLimitError(message).with_traceback(None) from None

        return run

    return wrap


def _users(module: str, filename: str) -> bool:
    """Whether a frame is the user's code: not tracejit's, NumPy's, the standard library's, or an installed
    package's (an import hook or a library the limit ran out in is not where the user should look)."""
    installed = "site-packages" in filename or "dist-packages" in filename
    return module not in ("tracejit", "numpy") and module not in sys.stdlib_module_names and not installed


def _message(fn, doing: str, tb, limit: int) -> str:
    frames = []  # (file, line, function, whether it is the user's code) from the outermost in
    while tb is not None:
        code, module = tb.tb_frame.f_code, (tb.tb_frame.f_globals.get("__name__") or "").partition(".")[0]
        frames.append(
            (
                code.co_filename,
                tb.tb_lineno,
                code.co_name,
                _users(module, code.co_filename),
            )
        )
        tb = tb.tb_next
    user = next((f for f in reversed(frames) if f[3]), None)
    code = getattr(fn, "__code__", None)
    if user is not None:
        where = f"{user[0]}:{user[1]}: "
    elif code is not None:
        where = f"{code.co_filename}:{code.co_firstlineno}: "
    else:
        where = ""
    # the function that recursed is the one with the most frames
    counts = Counter((f[0], f[2]) for f in frames)
    (((path, name), deepest),) = counts.most_common(1) or ((("", ""), 0),)
    mine = next((f[3] for f in frames if (f[0], f[2]) == (path, name)), False)
    if deepest < DEEP:
        advice = (
            f"Nothing recursed deeply ({deepest} frames of {name} at most): the limit is lower than "
            "tracing needs, or the kernel was called with Python near it; raise the limit "
            "(sys.setrecursionlimit)."
        )
    elif mine:
        advice = (
            f"The kernel's own code recurses this deep ({deepest} frames of {name} in {path}): write the "
            "recursion as a loop, or raise the limit (sys.setrecursionlimit) for a recursion that is meant."
        )
    else:
        advice = (
            f"tracejit recursed this deep ({deepest} frames of {name} in {path}), though its walks of a "
            "program are iterative: please report this with the program; meanwhile raise the limit "
            "(sys.setrecursionlimit) or split the computation into several kernel calls."
        )
    return (
        f"{where}Python's recursion limit ({limit}) was reached while {doing} "
        f"{getattr(fn, '__name__', 'a kernel')}. {advice}"
    )
