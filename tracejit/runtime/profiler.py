"""tj.profile(): every kernel launch and every compile while it is open.

    with tj.profile() as p:
        f(x); g(y)
    print(p)                          # per kernel: calls, total, mean, GB/s; then the compiles
    p.export_chrome_trace("t.json")   # Perfetto / chrome://tracing

Inside a profile each launch runs on its own and is waited for, so its time is its own: measured by the
device's clock where tracejit reads one (OpenCL's profiling queue: `clock` "device"), else host time
around the synchronised launch (`clock` "wall": numba, where it is the kernel's own run, and the GPU
runtimes without a timer read here). Outside a profile nothing is timed or waited for (the launch
paths test one list). Events of every thread go into every open profile. TRACEJIT_DEBUG=2 (tj.set_debug(2))
logs the same launches: it opens a profile that keeps nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from tracejit.runtime import debug
from tracejit.runtime.debug import log

ACTIVE: list[Profile] = []  # the profiles open, innermost last; launch paths test it
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Event:
    """One launch or compile: `start` and `end` in seconds of time.perf_counter() (a device-timed launch:
    its device duration, placed at the host time it was waited for)."""

    kind: str  # "launch" | "compile"
    name: str  # the kernel, or the function compiled
    device: str
    start: float
    end: float
    thread: int
    grid: int | None = None  # work-groups (blocks) launched; None where the runtime has none (numba)
    block: int | None = None  # work-items per group
    nbytes: int = 0  # bytes the kernel's parameters span (read and written)
    clock: str = "wall"  # "device" | "wall"
    detail: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.end - self.start


def timing() -> bool:
    """Whether launches are timed one by one now: a profile is open (TRACEJIT_DEBUG=2's among them)."""
    return bool(ACTIVE)


def launched(
    device: str,
    name: str,
    start: float,
    end: float,
    nbytes: int,
    grid=None,
    block=None,
    clock: str = "wall",
    note: str = "",
) -> None:
    """A timed launch finished: logged at TRACEJIT_DEBUG=2 and recorded in every open profile."""
    dt = max(end - start, 1e-12)
    log(2, f"{name}: {1e6 * dt:.1f} us, {nbytes / dt / 1e9:.2f} GB/s ({clock} clock{', ' + note if note else ''})")
    if ACTIVE:
        event = Event("launch", name, device, start, end, threading.get_ident(), grid, block, nbytes, clock)
        with _LOCK:
            for p in ACTIVE:
                p.events.append(event)


def compiled(device: str, name: str, start: float, end: float, kernels: int, cached: int, stages: str) -> None:
    """A signature was lowered and compiled (or loaded): recorded in every open profile."""
    if ACTIVE:
        event = Event(
            "compile",
            name,
            device,
            start,
            end,
            threading.get_ident(),
            detail={"kernels": kernels, "loaded": cached, "stages": stages},
        )
        with _LOCK:
            for p in ACTIVE:
                p.events.append(event)


class Profile:
    """The launches and compiles recorded while open (`events`, in the order they ended)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.opened: float | None = None  # perf_counter() when the block began, and ended
        self.closed: float | None = None

    def __enter__(self) -> Profile:
        self.opened = time.perf_counter()
        with _LOCK:
            ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _LOCK:
            ACTIVE.remove(self)
        self.closed = time.perf_counter()

    @property
    def launches(self) -> list[Event]:
        return [e for e in self.events if e.kind == "launch"]

    @property
    def compiles(self) -> list[Event]:
        return [e for e in self.events if e.kind == "compile"]

    def kernels(self) -> list[dict]:
        """Per kernel and device, in order of total time: calls, total and mean seconds, GB/s."""
        rows: dict[tuple, dict] = {}
        for e in self.launches:
            r = rows.setdefault(
                (e.name, e.device),
                {"kernel": e.name, "device": e.device, "calls": 0, "total": 0.0, "bytes": 0, "clock": e.clock},
            )
            r["calls"] += 1
            r["total"] += e.seconds
            r["bytes"] += e.nbytes
        out = sorted(rows.values(), key=lambda r: -r["total"])
        for r in out:
            r["mean"] = r["total"] / r["calls"]
            r["gb_per_s"] = r["bytes"] / r["total"] / 1e9 if r["total"] > 0 else None
        return out

    def __str__(self) -> str:
        rows = self.kernels()
        lines = [f"{'kernel':<28} {'device':<8} {'calls':>6} {'total ms':>10} {'mean us':>10} {'GB/s':>8}  clock"]
        for r in rows:
            gbs = f"{r['gb_per_s']:.2f}" if r["gb_per_s"] is not None else "-"
            lines.append(
                f"{r['kernel'][:28]:<28} {r['device']:<8} {r['calls']:>6} {1e3 * r['total']:>10.3f} "
                f"{1e6 * r['mean']:>10.1f} {gbs:>8}  {r['clock']}"
            )
        total = sum(r["total"] for r in rows)
        lines.append(f"{len(self.launches)} launch(es) of {len(rows)} kernel(s), {1e3 * total:.3f} ms in kernels")
        for e in self.compiles:
            d = e.detail
            lines.append(
                f"compile {e.name} on {e.device}: {d['kernels']} kernel(s), {d['loaded']} loaded, "
                f"{1e3 * e.seconds:.1f} ms ({d['stages']})"
            )
        return "\n".join(lines)

    def export_chrome_trace(self, path) -> None:
        """The events as Chrome trace JSON (Perfetto, chrome://tracing): one process per device, one
        track per thread, launches and compiles as complete ("X") events in microseconds."""
        origin = self.opened if self.opened is not None else min((e.start for e in self.events), default=0.0)
        devices = sorted({e.device for e in self.events})
        pid = {d: i + 1 for i, d in enumerate(devices)}
        trace = [{"name": "process_name", "ph": "M", "pid": pid[d], "args": {"name": d}} for d in devices]
        for e in self.events:
            args = {"clock": e.clock, "bytes": e.nbytes} if e.kind == "launch" else dict(e.detail)
            if e.grid is not None:
                args.update(grid=e.grid, block=e.block)
            trace.append(
                {
                    "name": e.name,
                    "cat": e.kind,
                    "ph": "X",
                    "pid": pid[e.device],
                    "tid": e.thread,
                    "ts": 1e6 * (e.start - origin),
                    "dur": 1e6 * e.seconds,
                    "args": args,
                }
            )
        with open(os.fspath(path), "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)


def profile() -> Profile:
    """A context manager recording every launch and compile while open: print(p) is a table per kernel and
    device, p.export_chrome_trace(path) a trace for Perfetto (see this module)."""
    return Profile()


class _Nowhere(list):
    def append(self, item) -> None:
        pass


class _LaunchLog(Profile):
    """TRACEJIT_DEBUG=2: a profile open for as long as the level is set, keeping no events, so that launches
    are timed one by one (and logged by `launched`) on the very paths a profile takes; the cached call's
    path tests one list for both."""

    def __init__(self):
        super().__init__()
        self.events = _Nowhere()


_LAUNCH_LOG = _LaunchLog()


def _log_launches(level: int) -> None:
    with _LOCK:
        if level >= 2 and _LAUNCH_LOG not in ACTIVE:
            ACTIVE.append(_LAUNCH_LOG)
        elif level < 2 and _LAUNCH_LOG in ACTIVE:
            ACTIVE.remove(_LAUNCH_LOG)


debug.on_level_set(_log_launches)
_log_launches(debug.requested())
