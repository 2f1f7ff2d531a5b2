"""Autotuning: `@tj.kernel(autotune=True)` and `tj.tune(f, *args)` time a device's layout choices on the user's own
arguments and keep the fastest, in the disk cache, for every later process (Triton's autotune with its cache and
tinygrad's BEAM are the anchors).

The candidates are the device's (`Device.tuning_choices`, runtime/choices.py): on the numba device the tiles a
transposed read walks in and the work from which a kernel runs on several threads; on a SIMT device the
work-group size, the elements of a row each work-item of a group reduces, tiled matrix products or not and the
transpose tiles. Each is compiled on copies of the arguments (a call that assigns into them changes nothing of the
caller's), and those whose kernels come out the same as another's are timed once. A candidate's results must equal
the defaults' (a float reduction may add in another order: within a few units of its precision), else it is left
out with a tj.TuningWarning, as is one that does not compile. The candidates are timed in turns (ROUNDS), each
round a median of calls (frontend/benchmarking.py); the fastest is kept unless it beats the defaults by less than
MARGIN, which is noise.

The record is a small JSON file in the cache directory (tuning/kernels/), named by a hash of what makes the answer
differ: the traced program (its graph, with its shapes and dtypes), the arguments' strides, the device and the
machine (CPU model, cores and caches on numba, the driver's name for the device elsewhere), and tracejit's code
generators. A kernel made with autotune=True reads it before compiling a new signature, so a later process
compiles the winner at once without timing anything; where there is none, the first call of the signature tunes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tracejit.errors import ArgumentError, CacheWarning, TracejitError
from tracejit.frontend.benchmarking import benchmark
from tracejit.runtime import choices, registry
from tracejit.runtime.array import Array
from tracejit.runtime.choices import Choice
from tracejit.runtime.debug import log

ROUNDS = 3  # each candidate timed this many times, in turns; its best median counts
MARGIN = 0.05  # a candidate must beat the defaults by this much to be kept
SECONDS = 2.0  # the time all candidates' timing may take, about (each round of each at least 5 calls)


class TuningWarning(UserWarning):
    """Tuning left a candidate out because it failed to run or computed other values than the device's defaults: a
    fault of tracejit's (or of a plugin device's candidates), worth reporting with the function. The call itself
    runs with the defaults or another candidate that agreed with them."""


@dataclass(frozen=True)
class Tuning:
    """What tuning measured for one signature on one device: `best`, the choice kept (str: its values, or
    "defaults"); `times`, the median seconds per call of each candidate timed, by the same names (the defaults
    first); `skipped`, candidates left out and why; `path`, the record in the disk cache."""

    name: str
    device: str
    best: str
    times: dict[str, float]
    skipped: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def speedup(self) -> float:
        """The defaults' time over the kept choice's."""
        return self.times["defaults"] / self.times[self.best]

    def __str__(self) -> str:
        lines = [f"{self.name} on {self.device}: {self.best} ({self.speedup:.2f}x the defaults)"]
        for name, seconds in sorted(self.times.items(), key=lambda kv: kv[1]):
            mark = "*" if name == self.best else " "
            lines.append(f"  {mark} {seconds * 1e3:10.4f} ms  {name}")
        lines.extend(f"    left out: {name}: {why}" for name, why in self.skipped.items())
        return "\n".join(lines)


def choose(kernel, args: tuple, device: str, compile_only: bool) -> Choice:
    """The choice a new signature of an autotune=True kernel compiles with: its record's, else (where the call
    runs) what tuning it now finds, else (lower, warm: no data to time) the defaults."""
    if compile_only:
        try:
            dev = registry.device(device)
        except TracejitError:  # (a target without its hardware: nothing was tuned for it)
            return choices.DEFAULT
        found = _recorded(kernel, args, dev)
        return choices.DEFAULT if found is None else found
    dev = registry.device(device)
    found = _recorded(kernel, args, dev)
    if found is not None:
        return found
    return _measure(kernel, args, dev, SECONDS).choice


def tune(f, *args: object, device: str | None = None, seconds: float = SECONDS, **kwargs: object) -> Tuning:
    """Time the device's layout choices for `f(*args, **kwargs)` (arguments as for a call; any array the call
    assigns into is copied first, so nothing of the caller's changes), keep the fastest in the disk cache, and
    make `f` compile this signature with it from now on; a kernel made with autotune=True reads the record in
    every later process. `seconds`: about how long the timing takes. Returns a Tuning (str() of it reads well)."""
    from tracejit.frontend.kernel import BoundKernel, Kernel

    if isinstance(f, BoundKernel):
        args, f = (f._bound, *args), f._kernel
    if not isinstance(f, Kernel):
        raise ArgumentError(f"tj.tune needs a function made by @tj.kernel, not {type(f).__name__}")
    if seconds <= 0:
        raise ArgumentError(f"tj.tune: seconds must be > 0 (got {seconds})")
    dev_name = device or f._device or registry.default_device_name()
    bound = f._bind(args, kwargs)
    dev = registry.device(dev_name)

    def measure():
        normalized = f._normalize(bound, dev_name)
        return _measure(f, normalized, dev, seconds), normalized

    measured, normalized = f._with_numbers(measure)
    f._forget(f._key(dev_name, normalized))  # the next call compiles with the choice kept
    f._tuned[f._key(dev_name, normalized)] = measured.choice
    return measured.report


@dataclass
class _Measured:
    choice: Choice
    report: Tuning


def _measure(kernel, args: tuple, dev, seconds: float) -> _Measured:
    """Tune one signature: compile, check and time each candidate on copies of `args` (normalized arguments);
    write the record."""
    name = kernel.__name__
    key, path = _record(kernel, args, dev)
    candidates = [choices.DEFAULT, *dev.tuning_choices()]
    runs: list[tuple[Choice, object, tuple]] = []  # (choice, plan, its arguments)
    seen: dict[tuple, str] = {}
    skipped: dict[str, str] = {}
    reference = None
    for choice in candidates:
        copies = tuple(_copy(a, dev) for a in args)
        shadow = kernel._shadow()
        try:
            with choices.applied(choice):
                plan, normalized = shadow._planned(copies, dev.name)
                result = plan.call(normalized, copies, None)
        except TracejitError as e:
            if choice.default:
                raise
            skipped[str(choice)] = f"does not compile: {e}"
            log(1, f"{name}: tuning left out {choice} on {dev.name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001  (a fault of tracejit's own for this choice: said, not the user's call)
            if choice.default:
                raise
            skipped[str(choice)] = f"failed: {type(e).__name__}: {e}"
            warnings.warn(
                f"tracejit: tuning {name} on {dev.name}: the candidate {choice} failed ({type(e).__name__}: {e}); "
                "it is left out. Please report this with the function.",
                TuningWarning,
                stacklevel=4,
            )
            continue
        values = _values(result, copies)
        if reference is None:
            reference = values
        else:
            differs = _differs(reference, values)
            if differs:
                skipped[str(choice)] = f"computed other values ({differs})"
                warnings.warn(
                    f"tracejit: tuning {name} on {dev.name}: the candidate {choice} computed other values than the "
                    f"defaults ({differs}); it is left out. Please report this with the function.",
                    TuningWarning,
                    stacklevel=4,
                )
                continue
        identity = _identity(plan)
        if identity in seen:  # the same kernels as an earlier candidate: nothing of its own to time
            log(2, f"{name}: {choice} compiles as {seen[identity]} on {dev.name}")
            continue
        seen[identity] = str(choice)
        runs.append((choice, plan, (normalized, copies)))
    times = {str(choice): float("inf") for choice, _, _ in runs}
    per_round = max(seconds / (ROUNDS * len(runs)), 0.01)
    for _ in range(ROUNDS if len(runs) > 1 else 1):  # (a lone candidate is timed once, for the report)
        for choice, plan, (normalized, copies) in runs:
            call = lambda plan=plan, normalized=normalized, copies=copies: plan.call(normalized, copies, None)  # noqa: E731
            measured = benchmark(call, device=dev.name, seconds=per_round, warmup=min(0.05, per_round))
            times[str(choice)] = min(times[str(choice)], measured.median)
    best = min(runs, key=lambda r: times[str(r[0])])[0]
    if times[str(best)] > times["defaults"] * (1 - MARGIN):
        best = choices.DEFAULT
    record = {
        "function": name,
        "device": dev.name,
        "choice": best.to_json(),
        "best": str(best),
        "milliseconds": {k: round(v * 1e3, 6) for k, v in times.items()},
        "skipped": skipped,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "key": key,
    }
    from tracejit.runtime.cache.disk import write_atomic

    try:
        write_atomic(path, json.dumps(record, indent=2).encode())
    except OSError as e:
        warnings.warn(
            f"tracejit: the tuning of {name} could not be kept in {path} ({e}); it is used in this process only",
            CacheWarning,
            stacklevel=4,
        )
    log(1, f"{name}: tuned on {dev.name}: {best} of {len(runs)} distinct candidate(s) ({path})")
    return _Measured(best, Tuning(name, dev.name, str(best), times, skipped, path))


def _recorded(kernel, args: tuple, dev) -> Choice | None:
    """The choice kept for this signature on this device by an earlier tuning, or None."""
    _, path = _record(kernel, args, dev)
    try:
        if not path.exists():
            return None
        choice = Choice.from_json(json.loads(path.read_text())["choice"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        warnings.warn(
            f"tracejit: the tuning record {path} is unreadable ({e}); {kernel.__name__} is tuned again",
            CacheWarning,
            stacklevel=5,
        )
        return None
    if choice not in {choices.DEFAULT, *dev.tuning_choices()}:  # (a tracejit whose candidates changed since)
        log(1, f"{kernel.__name__}: the tuning record {path} holds {choice}, no longer a candidate: tuned again")
        return None
    log(1, f"{kernel.__name__}: {choice} on {dev.name}, as tuned before ({path})")
    return choice


def _record(kernel, args: tuple, dev) -> tuple[dict, Path]:
    """What names a signature's record, and the record's path."""
    from tracejit.runtime.cache.key import tracejit_part

    traced = kernel._trace(args, count=False)
    infos = [
        [info.kind, list(info.shape or ()), str(info.dtype), list(info.strides or ())]
        for info in traced.infos
        if info.kind in ("array", "scalar")
    ]
    key = {
        "program": hashlib.sha256(str(traced).encode()).hexdigest(),
        "arguments": infos,
        "device": dev.name,
        "machine": dev.tuning_fingerprint(),
        "tracejit": tracejit_part(),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return key, cache_dir() / "tuning" / "kernels" / f"{digest}.json"


def cache_dir() -> Path:
    """The cache directory (runtime/cache/directory.py; imported when first asked: platformdirs costs 5 ms)."""
    from tracejit.runtime.cache.directory import cache_dir as directory

    return directory()


def _copy(a, dev):
    """A copy of an argument for the candidates' calls: on the device itself where its arrays live apart from the
    host's (what is timed is the kernels, not the uploads of host arrays every call)."""
    if isinstance(a, np.ndarray):
        if not dev.returns_numpy and a.dtype.kind in "biuf":
            try:
                return Array(dev.from_numpy(np.ascontiguousarray(a)), dev)
            except TracejitError:  # (a dtype the device does not hold: uploaded by each call instead)
                pass
        return a.copy(order="K")
    if type(a) is Array:
        return Array(a.device.clone(a._data), a.device)
    if isinstance(a, np.random.Generator):  # (the caller's keeps its state)
        return copy.deepcopy(a)
    return a


def _values(result, copies: tuple) -> list[np.ndarray]:
    """The call's results and the arrays it may have assigned into, as NumPy arrays."""
    out: list[np.ndarray] = []

    def walk(v):
        if isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif v is not None:
            out.append(np.asarray(v))

    walk(result)
    for a in copies:
        if isinstance(a, np.ndarray) or type(a) is Array:
            out.append(np.asarray(a))
    return out


def _differs(expected: list[np.ndarray], got: list[np.ndarray]) -> str:
    """'' where every value agrees (floats within a few units of their precision of the largest magnitude), else
    which one does not."""
    if len(expected) != len(got):
        return f"{len(got)} values, not {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape or e.dtype != g.dtype:
            return f"value {i}: {g.dtype}{list(g.shape)}, not {e.dtype}{list(e.shape)}"
        if e.dtype.kind in "fc":
            finite = e[np.isfinite(e)]
            scale = float(np.max(np.abs(finite))) if finite.size else 0.0
            rtol = float(np.finfo(e.dtype).eps) ** 0.5 * 4
            if not np.allclose(g, e, rtol=rtol, atol=rtol * scale, equal_nan=True):
                return f"value {i}: largest difference {float(np.nanmax(np.abs(g.astype(complex) - e))):.3g}"
        elif e.dtype.kind == "V" or not np.array_equal(e, g):
            if e.dtype.kind == "V" and e.tobytes() == g.tobytes():
                continue
            return f"value {i} differs"
    return ""


def _identity(plan) -> tuple:
    """What a plan runs: its kernels' sources and launch shapes, how each loops."""
    return tuple(
        (
            getattr(k, "source", ""),
            getattr(getattr(k, "launch", None), "local_size", None),
            getattr(k, "parallel", None),
        )
        for k in getattr(plan, "kernels", ())
    )
