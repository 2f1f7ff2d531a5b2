"""Ahead-of-time warming: compile kernels for given signatures and devices into the disk cache without
running them, or what a manifest (manifest.py) names."""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tracejit.errors import ArgumentError, TracejitError
from tracejit.runtime import progress, registry
from tracejit.runtime.cache.ahead import ahead_of_time
from tracejit.frontend import hooks
from tracejit.frontend.manifest import parse_arg, read_manifest
from tracejit.frontend.signature import Spec

if TYPE_CHECKING:  # for the annotations only, as warm() imports Kernel where it uses it (and Dask is optional)
    from distributed import Client
    from tracejit.frontend.kernel import Kernel


@dataclass
class WarmResult:
    function: str
    device: str
    signature: str
    kernels: list[str] = field(default_factory=list)
    compiled: int = 0  # kernels compiled now
    cached: int = 0  # kernels already in the disk cache
    library: int = 0  # kernels a library runs (numba's BLAS products, NumPy sorts): nothing to compile
    seconds: float = 0.0
    error: str | None = None
    worker: str | None = None  # the Dask worker it was warmed on (tj.warm(..., client=client))

    def __str__(self) -> str:
        where = f"{self.device} at {self.worker}" if self.worker else self.device
        if self.error:
            return f"{self.function}({self.signature}) on {where}: FAILED: {self.error}"
        what = f"{self.compiled} compiled, {self.cached} already cached" + (
            f", {self.library} run by a library" if self.library else ""
        )
        return (
            f"{self.function}({self.signature}) on {where}: {len(self.kernels)} kernel(s), {what} "
            f"in {self.seconds:.2f} s"
        )


class WarmReport(list):
    """One WarmResult per (signature, device); str() is a readable summary."""

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self)

    def __str__(self) -> str:
        return "\n".join(map(str, self))


def warm(
    kernel: Kernel | str | os.PathLike[str],
    *args: object,
    devices: str | Sequence[str] | None = None,
    client: Client | None = None,
    **static: object,
) -> WarmReport:
    """Compile `kernel` for these arguments (tj.spec, arrays, or scalars standing for their type) on each
    device into the disk cache, running nothing. Returns a report of what was compiled or already cached.

    kernel may instead be the path of a manifest (what TRACEJIT_RECORD wrote): each of its entries is warmed.
    With Dask arrays among the arguments, what a call with them runs is warmed: each stage's kernel at each
    block shape (dask/arrays.py). client (a dask.distributed Client): warmed on each of its workers,
    the first before the others, which then load its kernels from a shared TRACEJIT_CACHE_DIR."""
    with ahead_of_time():  # (what a compile stores may differ: runtime/cache/ahead.py)
        return _warm_any(kernel, args, devices, client, static)


def _warm_any(kernel, args: tuple, devices, client, static: dict) -> WarmReport:
    from tracejit.frontend.kernel import Kernel

    if isinstance(kernel, (str, os.PathLike)):
        if args or static:
            raise ArgumentError("tj.warm(manifest_path) takes no arguments: the manifest names them")
        entries = read_manifest(os.fspath(kernel))
        for entry in entries:
            if devices:
                entry["devices"] = [devices] if isinstance(devices, str) else list(devices)
        return _on(client, warm_entries, entries)
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"tj.warm expects a @tj.kernel function, got {type(kernel).__name__}")
    collection = hooks.collection_of(args)
    if collection is not None:  # (a Dask array: each stage's kernel at each block shape)
        fn, fn_args = collection.warming(kernel, kernel._bind(args, static))
        return _on(client, fn, *fn_args, devices)
    if client is not None:
        return _on(client, _warm_here, kernel, args, devices, static)
    return _warm(kernel, args, devices, static)


def _warm_here(kernel, args, devices, static) -> list[dict]:
    with ahead_of_time():  # (a Dask worker's)
        return [r.__dict__ for r in _warm(kernel, args, devices, static)]


def warm_entries(entries: list[dict]) -> list[dict]:
    results = []
    with ahead_of_time(), progress.task("warming", total=len(entries)) as shown:  # (a bar past 2 s on a terminal)
        for entry in entries:
            results += warm_entry(entry)
            shown.advance()
    return results


def _on(client, fn, *args) -> WarmReport:
    """fn(*args) (a list of WarmResult dicts) here, or on every worker of a Dask client."""
    if client is None:
        return WarmReport(WarmResult(**r) for r in fn(*args))
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ArgumentError(
            "tj.warm(..., client=client): the Dask cluster has no workers yet; wait for them "
            "(client.wait_for_workers(n)) before warming"
        )
    results = client.run(fn, *args, workers=workers[:1])
    if len(workers) > 1:  # after the first: they find its kernels on disk where the cache is shared
        results.update(client.run(fn, *args, workers=workers[1:]))
    return WarmReport(WarmResult(**dict(r, worker=w)) for w in workers for r in results[w])


def _warm(kernel, args, devices, static) -> WarmReport:
    devices = [devices] if isinstance(devices, str) else list(devices or [registry.default_device_name()])
    report = WarmReport()
    with progress.task(f"warming {kernel.__name__}", total=len(devices)) as shown:
        for device in devices:
            before = kernel.cache_info()
            result = WarmResult(kernel.__name__, device, ", ".join(_describe_arg(a) for a in args))
            t0 = time.perf_counter()
            try:
                plan = kernel.lower(*args, device=device, **static)
            except TracejitError as e:
                result.error = f"{type(e).__name__}: {e}"
            else:
                after = kernel.cache_info()
                result.kernels = [k.name for k in plan.kernels]
                result.compiled = after["compiles"] - before["compiles"]
                result.cached = after["disk_hits"] - before["disk_hits"]
                result.library = after["library"] - before["library"]
            result.seconds = time.perf_counter() - t0
            report.append(result)
            shown.advance()
    return report


def _describe_arg(a) -> str:
    if isinstance(a, Spec):
        names = a.names or (None,) * len(a.shape)
        return f"{a.dtype.name}[{','.join(f'{n}={s}' if n else str(s) for s, n in zip(a.shape, names))}]"
    if isinstance(a, np.ndarray):
        return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
    return type(a).__name__


def load_kernel(where: str):
    """The @tj.kernel object named "package.module:function" (or "...:Class.attribute")."""
    from tracejit.frontend.kernel import Kernel

    module_name, _, qualname = where.partition(":")
    if not module_name or not qualname:
        raise ArgumentError(f"{where!r}: name the kernel as MODULE:FUNCTION, e.g. mypkg.ops:softmax")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, Kernel):
        raise ArgumentError(f"{where} is a {type(obj).__name__}, not a @tj.kernel function")
    return obj


def warm_entry(entry: dict) -> list[dict]:
    """Warm one manifest entry (in a worker process); results as plain dicts."""
    devices = entry.get("devices") or [entry.get("device") or registry.default_device_name()]
    try:
        kernel = load_kernel(entry["function"])
        args = [parse_arg(a) for a in entry["args"]]
        for collection in hooks.COLLECTIONS:  # a call with Dask arrays: its stages at its block shapes
            if entry.get(collection.manifest_field) is not None:
                return collection.warm_recorded(kernel, args, entry, devices)
        report = warm(kernel, *args, devices=devices, **entry.get("static", {}))
    except Exception as e:  # a worker reports; it never takes the whole warm run down
        return [
            WarmResult(
                entry["function"], d, ", ".join(map(str, entry["args"])), error=f"{type(e).__name__}: {e}"
            ).__dict__
            for d in devices
        ]
    for r in report:
        r.function = entry["function"]
    return [r.__dict__ for r in report]
