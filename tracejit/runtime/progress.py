"""Progress of long work (a compile, tj.warm) on stderr through tqdm: shown once the work has gone on for
DELAY seconds, and only where stderr is a terminal outside CI and tests (TRACEJIT_PROGRESS=0: never)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

DELAY = 2.0  # seconds of work before a bar shows: shorter work shows nothing
REFRESH = 0.25  # seconds between redraws (the elapsed time moves while one long step runs)

OPEN: list[Task] = []  # the tasks under way in every thread, first opened first; stage() tests it
_cond = threading.Condition()
_watcher: threading.Thread | None = None
_broken = False  # the display failed once: none from then on


class Task:
    """One piece of long work: `done` of `total` steps (None: not counted), `step` what it is doing now."""

    def __init__(self, description: str, total: int | None):
        self.description, self.total = description, total
        self.done, self.step = 0, ""
        self.opened = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done += n


class _Idle:
    """What `task` yields where no progress is shown: the same methods, doing nothing."""

    def advance(self, n: int = 1) -> None:
        pass


_IDLE = _Idle()


def wanted() -> bool:
    """Whether progress may show: stderr is a terminal, and this is neither CI nor a test run."""
    if (
        _broken
        or os.environ.get("TRACEJIT_PROGRESS", "").strip() == "0"
        or os.environ.get("CI")
        or "PYTEST_CURRENT_TEST" in os.environ
    ):
        return False
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


@contextlib.contextmanager
def task(description: str, total: int | None = None):
    """The block as one piece of long work, with a bar once it has taken DELAY seconds where `wanted`;
    yields the Task (advance() it per step), or an object whose methods do nothing."""
    if not wanted():
        yield _IDLE
        return
    t = Task(description, total)
    with _cond:
        OPEN.append(t)
        _start_watcher()
        _cond.notify()
    try:
        yield t
    finally:
        with _cond:
            OPEN.remove(t)
            if t is _shown_for:
                _close()


def note(step: str) -> None:
    """What the work under way is doing now (a compile's stage), shown beside its bar."""
    if OPEN:
        OPEN[-1].step = step


# -- the display: one thread, drawing the first open task's bar (the innermost's step beside it); a thread of
# our own because tqdm redraws only when told, and one Numba or PoCL compile can take tens of seconds --
_bar = None  # the tqdm bar shown now, for OPEN[0]
_shown_for: Task | None = None


def _start_watcher() -> None:
    global _watcher
    if _watcher is None or not _watcher.is_alive():
        _watcher = threading.Thread(target=_watch, name="tracejit progress", daemon=True)
        _watcher.start()


def _watch() -> None:
    global _broken
    with _cond:
        while True:
            if not OPEN:
                _cond.wait()
                continue
            _cond.wait(REFRESH)
            try:
                _draw()
            except Exception:  # noqa: BLE001 - a display that fails must not fail the work: none from now on
                _broken = True
                with contextlib.suppress(Exception):
                    _close()
                return


def _draw() -> None:
    """Under _cond: the bar of the first open task once it is DELAY seconds old, brought up to date."""
    global _bar, _shown_for
    if not OPEN:
        return
    first, last = OPEN[0], OPEN[-1]
    if _shown_for is not first:
        _close()
        if time.monotonic() - first.opened < DELAY:
            return
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # (its own thread: this one redraws)
        _bar = tqdm(
            total=first.total,
            desc=first.description,
            file=sys.stderr,
            leave=False,
            dynamic_ncols=True,
            initial=first.done,
            mininterval=0,
            bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}"
            if first.total
            else "{desc}: {elapsed}{postfix}",
        )
        _bar.start_t -= time.monotonic() - first.opened  # elapsed since the work began
        _shown_for = first
    bar = _bar
    if bar is None:
        return
    bar.n = first.done
    detail = " ".join(p for p in ((last.description if last is not first else ""), last.step) if p)
    bar.set_postfix_str(detail, refresh=False)
    bar.refresh()


def _close() -> None:
    global _bar, _shown_for
    if _bar is not None:
        _bar.close()
    _bar, _shown_for = None, None
