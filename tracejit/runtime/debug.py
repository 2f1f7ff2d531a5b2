"""Diagnostics through the standard `logging` module, on the "tracejit" logger: TRACEJIT_DEBUG (or
tj.set_debug) level 1 compiles with timings (each stage of each compile), 2 launches, 3 the IRs,
4 generated source; and the stage times of one compile."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import time

from tracejit.errors import ArgumentError
from tracejit.runtime import progress

# Each TRACEJIT_DEBUG level is a child logger of "tracejit" logging at its own level, so that the one logger's
# level selects as TRACEJIT_DEBUG does (DEBUG: compiles; three levels below it: launches, IRs, sources) and
# a handler or filter can take one kind alone by its logger's name.
LOGGER = logging.getLogger("tracejit")
KINDS = {1: "compile", 2: "launch", 3: "ir", 4: "source"}
LEVELS = {1: logging.DEBUG, 2: logging.DEBUG - 1, 3: logging.DEBUG - 2, 4: logging.DEBUG - 3}
_LOGGERS = {n: logging.getLogger(f"tracejit.{kind}") for n, kind in KINDS.items()}
_level_callbacks: list = []  # called with the level tj.set_debug sets (runtime/profiler.py: launches timed)


def log(level: int, message: str) -> None:
    """`message` on the logger of TRACEJIT_DEBUG level `level` (tracejit.compile, .launch, .ir or .source)."""
    logger, at = _LOGGERS[min(level, 4)], LEVELS[min(level, 4)]
    if logger.isEnabledFor(at):
        logger.log(at, message, stacklevel=2)


def enabled(level: int) -> bool:
    """Whether messages of TRACEJIT_DEBUG level `level` are logged now (by tj.set_debug, TRACEJIT_DEBUG, or
    the "tracejit" loggers' levels as the application configured them)."""
    return _LOGGERS[min(level, 4)].isEnabledFor(LEVELS[min(level, 4)])


def level() -> int:
    """The TRACEJIT_DEBUG level in force: the highest whose messages are logged, 0 for none."""
    return max((n for n in KINDS if enabled(n)), default=0)


class _StderrHandler(logging.StreamHandler):
    """tracejit's own handler, for a process that configured no logging: sys.stderr as it is when a record
    comes (a notebook's cell output, pytest's capture), and silent where a handler of the application's
    own would take the record too, as logging's lastResort is."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("[tracejit] %(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # (StreamHandler.__init__ sets it)
        pass

    def handle(self, record):
        logger = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self and h.level <= record.levelno for h in logger.handlers):
                return False
            logger = logger.parent if logger.propagate else None
        return super().handle(record)


_HANDLER = _StderrHandler()


def set_debug(level: int) -> None:
    """Log what TRACEJIT_DEBUG=`level` logs from now on: 1 compiles with the time of each stage, 2 also each
    launch (timed alone, so waited for), 3 also the graph and kernel IRs, 4 also the generated source; 0
    turns it off. The messages go to the "tracejit" logger (children tracejit.compile, .launch, .ir and
    .source); where the application has no logging handler of its own they are printed to stderr, in a
    notebook too, and otherwise go through the application's handlers."""
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ArgumentError(f"set_debug({level!r}): give a level from 0 (off) to 4 (generated source)")
    global _requested
    _requested = level
    if level == 0:
        LOGGER.setLevel(logging.WARNING)
        if _HANDLER in LOGGER.handlers:
            LOGGER.removeHandler(_HANDLER)
    else:
        LOGGER.setLevel(LEVELS[min(level, 4)])
        if _HANDLER not in LOGGER.handlers:
            LOGGER.addHandler(_HANDLER)  # (silent while another handler takes the records)
    for callback in _level_callbacks:
        callback(level)


def on_level_set(callback) -> None:
    """Call callback(level) at each tj.set_debug (runtime/profiler.py: launches are timed at level 2)."""
    _level_callbacks.append(callback)


def requested() -> int:
    """The level tj.set_debug (or TRACEJIT_DEBUG at import) last set."""
    return _requested


_requested = max(0, int(os.environ.get("TRACEJIT_DEBUG", "0") or 0))  # (int() refuses a word, as before)
if _requested:
    set_debug(_requested)


OTHER = "other"  # time in no named stage


class CompileTimes:
    """Wall seconds per stage of one compile, each second counted in the innermost stage open at the
    time (a stage inside another is not counted twice), so the stages add up to the whole."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._open: list[list] = []  # [stage, since when it is counted], innermost last

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
            self._open[-1][1] = now  # the enclosing stage counts again from here

    def _pause(self, now: float) -> None:
        if self._open:
            name, since = self._open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - since
            self._open[-1][1] = now

    def summary(self) -> str:
        """'stage 1.2, next stage 30, other 0.5 ms' in the order the stages first ran, then the time in
        none of them (tenths of a ms below 10 ms)."""
        order = [name for name in self.seconds if name != OTHER] + [OTHER] * (OTHER in self.seconds)
        return (
            ", ".join(f"{name} {1e3 * self.seconds[name]:.{1 if self.seconds[name] < 0.01 else 0}f}" for name in order)
            + " ms"
        )


_TIMES: contextvars.ContextVar[CompileTimes | None] = contextvars.ContextVar("tracejit_compile_times", default=None)


@contextlib.contextmanager
def compile_times(wanted: bool = False):
    """Times the stages of the compile run inside (TRACEJIT_DEBUG >= 1 or `wanted`: inside tj.profile();
    else yields None and times nothing). A thread doing part of the compile runs in a copy of this
    context (contextvars.copy_context)."""
    if not wanted and not enabled(1):
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
    """The block as one stage of the compile under way (timed where one is; named beside a progress bar)."""
    if progress.OPEN:
        progress.note(name)
    times = _TIMES.get()
    if times is None:
        yield
        return
    times.enter(name)
    try:
        yield
    finally:
        times.exit()
