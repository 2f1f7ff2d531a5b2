"""tj.benchmark(f, *args): how long a call takes, measured robustly (Triton's do_bench, and the loop of
benchmarks/ as a function users can call).

The first call is timed on its own (it traces and compiles); calls then run for a warm-up; the rest is rounds of
calls, each round long enough that the clock and the device's synchronisation (tj.synchronize, after every round)
cost next to nothing, until a time budget is spent. The result gives the median time of a call over the rounds
with its spread (quartiles, min, max), the rounds and the calls in each."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tracejit.errors import ArgumentError

ROUND_SECONDS = 0.005  # a round at least this long: the clock and a synchronisation are noise next to it
MIN_ROUNDS = 5


@dataclass(frozen=True)
class Benchmark:
    """What tj.benchmark measured, in seconds per call: `median` (the figure to quote), `q1` and `q3` (the spread:
    half the rounds lie between them), `min`, `max`; `first`: the first call (trace and compile included);
    `rounds` rounds of `calls` calls each; the device synchronised after each round."""

    name: str
    device: str
    median: float
    q1: float
    q3: float
    min: float
    max: float
    first: float
    rounds: int
    calls: int

    @property
    def ms(self) -> float:
        """The median in milliseconds."""
        return self.median * 1e3

    def __str__(self) -> str:
        calls = f"{self.calls} call" + ("s" if self.calls > 1 else "")
        return (
            f"{self.name} on {self.device}: {_time(self.median)} per call (quartiles {_time(self.q1)}-"
            f"{_time(self.q3)}, min {_time(self.min)}; {self.rounds} rounds of {calls}; first call {_time(self.first)})"
        )


def benchmark(
    f: Callable,
    *args: object,
    device: str | None = None,
    seconds: float = 1.0,
    warmup: float = 0.1,
    **kwargs: object,
) -> Benchmark:
    """Time `f(*args, **kwargs)` (a tj.kernel gets `device=`; anything else is called as it is, and `device` names
    what to synchronise): the first call on its own, `warmup` seconds of calls, then rounds of calls for about
    `seconds` (at least 5 rounds), the device synchronised after each. Returns a Benchmark (str() of it reads
    well): the median time of a call and its spread."""
    from tracejit.frontend.kernel import BoundKernel, Kernel
    from tracejit.runtime import registry

    if not callable(f):
        raise ArgumentError(f"tj.benchmark needs a function to call, not {type(f).__name__}")
    if seconds <= 0 or warmup < 0:
        raise ArgumentError(f"tj.benchmark: seconds must be > 0 and warmup >= 0 (got {seconds}, {warmup})")
    is_kernel = isinstance(f, (Kernel, BoundKernel))
    name = getattr(f, "__name__", type(f).__name__)
    target = device or (getattr(f, "_device", None) if isinstance(f, Kernel) else None)
    dev = registry.device(target)

    def call() -> None:
        f(*args, device=device, **kwargs) if is_kernel and device is not None else f(*args, **kwargs)

    def timed(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        dev.synchronize()
        return time.perf_counter() - t0

    first = timed(1)
    spent, calls = 0.0, 0
    while spent < warmup or calls == 0:
        spent += timed(1)
        calls += 1
    per_call = max(spent / calls, 1e-7)
    n = max(1, int(ROUND_SECONDS / per_call))
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < MIN_ROUNDS or time.perf_counter() - start < seconds:
        samples.append(timed(n) / n)
    import statistics  # (4 ms to import: not at `import tracejit`)

    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Benchmark(
        name, dev.name, statistics.median(samples), q1, q3, min(samples), max(samples), first, len(samples), n
    )


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"
