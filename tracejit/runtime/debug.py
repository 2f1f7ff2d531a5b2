"""TRACEJIT_DEBUG levels: 1 compiles with timings (each stage of each compile), 2 launches, 3 the IRs,
4 generated source."""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time

LEVEL = int(os.environ.get("TRACEJIT_DEBUG", "0") or 0)


def log(level: int, message: str) -> None:
    if LEVEL >= level:
        print(f"[tracejit] {message}", file=sys.stderr)


OTHER = "other"   # time in no named stage


class CompileTimes:
    """Wall seconds per stage of one compile, each second counted in the innermost stage open at the
    time (a stage inside another is not counted twice), so the stages add up to the whole."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._open: list[list] = []   # [stage, since when it is counted], innermost last

    def enter(self, name: str) -> None:
        now = time.perf_counter()
        self._pause(now)
        self._open.append([name, now])

    def exit(self) -> None:
        now = time.perf_counter()
        self._pause(now)
        if self._open:
            self._open.pop()
        if self._open:
            self._open[-1][1] = now   # the enclosing stage counts again from here

    def _pause(self, now: float) -> None:
        if self._open:
            name, since = self._open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - since
            self._open[-1][1] = now

    def summary(self) -> str:
        """'stage 1.2, next stage 30, other 0.5 ms' in the order the stages first ran, then the time in
        none of them (tenths of a ms below 10 ms)."""
        order = [name for name in self.seconds if name != OTHER] + [OTHER] * (OTHER in self.seconds)
        return ", ".join(f"{name} {1e3 * self.seconds[name]:.{1 if self.seconds[name] < 0.01 else 0}f}"
                         for name in order) + " ms"


_TIMES: contextvars.ContextVar[CompileTimes | None] = contextvars.ContextVar("tracejit_compile_times", default=None)


@contextlib.contextmanager
def compile_times(wanted: bool = False):
    """Times the stages of the compile run inside (TRACEJIT_DEBUG >= 1 or `wanted`: inside tj.profile();
    else yields None and times nothing). A thread doing part of the compile runs in a copy of this
    context (contextvars.copy_context)."""
    if LEVEL < 1 and not wanted:
        yield None
        return
    times = CompileTimes()
    token = _TIMES.set(times)
    times.enter(OTHER)
    try:
        yield times
    finally:
        times.exit()
        _TIMES.reset(token)


def current_times() -> CompileTimes | None:
    """The stage times of the compile under way in this context, or None when none is timed."""
    return _TIMES.get()


@contextlib.contextmanager
def stage(name: str):
    """The block as one stage of the compile under way (nothing when none is being timed)."""
    times = _TIMES.get()
    if times is None:
        yield
        return
    times.enter(name)
    try:
        yield
    finally:
        times.exit()
