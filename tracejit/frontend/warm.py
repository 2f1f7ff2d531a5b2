"""Ahead-of-time warming: compile kernels for given signatures and devices into the disk cache without
running them, and the manifests that say what to warm (written by TRACEJIT_RECORD, read by
`python -m tracejit warm --manifest`)."""
from __future__ import annotations

import importlib
import json
import os
import re
import time
from dataclasses import dataclass, field

import numpy as np

from tracejit.errors import ArgumentError, TracejitError
from tracejit.ir.dtypes import check
from tracejit.runtime import registry
from tracejit.runtime.debug import log
from tracejit.frontend.signature import ArgInfo, Spec, has_dask_array, spec

ENV_RECORD = "TRACEJIT_RECORD"
_SCALARS = {"int": 0, "float": 0.0, "bool": False}
_ARRAY = re.compile(r"^\s*([a-z0-9_]+)\s*\[\s*([A-Za-z0-9_=,\s]*)\]\s*$")
_DIMENSION = re.compile(r"^(?:([A-Za-z_]\w*)(?:=([0-9]+))?|([0-9]+))$")   # 1024; n or n=4096: symbolic


@dataclass
class WarmResult:
    function: str
    device: str
    signature: str
    kernels: list[str] = field(default_factory=list)
    compiled: int = 0          # kernels compiled now
    cached: int = 0            # kernels already in the disk cache
    library: int = 0           # kernels a library runs (numba's BLAS products, NumPy sorts): nothing to compile
    seconds: float = 0.0
    error: str | None = None
    worker: str | None = None  # the Dask worker it was warmed on (tj.warm(..., client=client))

    def __str__(self) -> str:
        where = f"{self.device} at {self.worker}" if self.worker else self.device
        if self.error:
            return f"{self.function}({self.signature}) on {where}: FAILED: {self.error}"
        what = f"{self.compiled} compiled, {self.cached} already cached" + \
            (f", {self.library} run by a library" if self.library else "")
        return f"{self.function}({self.signature}) on {where}: {len(self.kernels)} kernel(s), {what} " \
               f"in {self.seconds:.2f} s"


class WarmReport(list):
    """One WarmResult per (signature, device); str() is a readable summary."""

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self)

    def __str__(self) -> str:
        return "\n".join(map(str, self))


def warm(kernel, *args, devices=None, client=None, **static) -> WarmReport:
    """Compile `kernel` for these arguments (tj.spec, arrays, or scalars standing for their type) on each
    device into the disk cache, running nothing. Returns a report of what was compiled or already cached.

    kernel may instead be the path of a manifest (what TRACEJIT_RECORD wrote): each of its entries is warmed.
    With Dask arrays among the arguments, what a call with them runs is warmed: each stage's kernel at each
    block shape (dask/arrays.py). client (a dask.distributed Client): warmed on each of its workers,
    the first before the others, which then load its kernels from a shared TRACEJIT_CACHE_DIR."""
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
    if has_dask_array(args):
        from tracejit.dask.arrays import prepare
        from tracejit.dask.stages import warm_stages
        key, _, letter_chunks = prepare(kernel, kernel._bind(args, static))
        return _on(client, warm_stages, key, letter_chunks, devices)
    if client is not None:
        return _on(client, _warm_here, kernel, args, devices, static)
    return _warm(kernel, args, devices, static)


def _warm_here(kernel, args, devices, static) -> list[dict]:
    return [r.__dict__ for r in _warm(kernel, args, devices, static)]


def warm_entries(entries: list[dict]) -> list[dict]:
    return [r for entry in entries for r in warm_entry(entry)]


def _on(client, fn, *args) -> WarmReport:
    """fn(*args) (a list of WarmResult dicts) here, or on every worker of a Dask client."""
    if client is None:
        return WarmReport(WarmResult(**r) for r in fn(*args))
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ArgumentError("tj.warm(..., client=client): the Dask cluster has no workers yet; wait for them "
                            "(client.wait_for_workers(n)) before warming")
    results = client.run(fn, *args, workers=workers[:1])
    if len(workers) > 1:   # after the first: they find its kernels on disk where the cache is shared
        results.update(client.run(fn, *args, workers=workers[1:]))
    return WarmReport(WarmResult(**dict(r, worker=w)) for w in workers for r in results[w])


def _warm(kernel, args, devices, static) -> WarmReport:
    devices = [devices] if isinstance(devices, str) else list(devices or [registry.default_device_name()])
    report = WarmReport()
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
    return report


# ---- argument specs as text: float32[4096,1024], float16[], int, float, bool ----

def parse_arg(text) -> object:
    """An argument spec from a manifest or the command line: "float32[4096,1024]", "int", or a dict
    {"dtype", "shape", "strides"} for a strided array."""
    if isinstance(text, dict):
        return spec(tuple(text["shape"]), text["dtype"], text.get("strides"))
    if text in _SCALARS:
        return _SCALARS[text]
    m = _ARRAY.match(str(text))
    dims = [_DIMENSION.match(s) for s in m.group(2).replace(" ", "").split(",") if s] if m else [None]
    if not all(dims):
        raise ArgumentError(f"cannot read argument spec {text!r}: write dtype[shape] (float32[4096,1024], "
                            "float32[n,1024] for a symbolic dimension n, float32[n=4096,1024] to trace it at "
                            "4096, float32[] for 0-d) "
                            "or int / float / bool for a Python scalar")
    shape = tuple(int(d.group(3)) if d.group(3) else (d.group(1), int(d.group(2))) if d.group(2) else d.group(1)
                  for d in dims)
    return spec(shape, check(m.group(1), "argument spec", internal=False))


def format_arg(info: ArgInfo) -> object:
    if info.kind == "scalar":
        return {"b": "bool", "i": "int", "f": "float"}[info.dtype.kind]
    text = f"{info.dtype.name}[{','.join(map(str, info.shape))}]"
    if info.strides != Spec(info.shape, info.dtype).element_strides:
        return {"dtype": info.dtype.name, "shape": list(info.shape), "strides": list(info.strides)}
    return text


def _describe_arg(a) -> str:
    if isinstance(a, Spec):
        names = a.names or (None,) * len(a.shape)
        return f"{a.dtype.name}[{','.join(f'{n}={s}' if n else str(s) for s, n in zip(a.shape, names))}]"
    if isinstance(a, np.ndarray):
        return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
    return type(a).__name__


# ---- recording what a running program compiles ----

def record(kernel, infos: list[ArgInfo], device: str, extra: dict | None = None) -> None:
    """Append this compiled signature to the TRACEJIT_RECORD manifest (one JSON line, one write); extra: more
    fields of the entry (a Dask call's "chunks")."""
    path = os.environ.get(ENV_RECORD)
    if not path:
        return
    fn = kernel.fn
    if getattr(fn, "recorded_elsewhere", False):
        return
    where = f"{fn.__module__}:{fn.__qualname__}"
    if "<" in fn.__qualname__ or fn.__module__ == "__main__":
        log(1, f"{ENV_RECORD}: {where} cannot be imported by a warming process; not recorded")
        return
    names = kernel._names
    static = {names[i]: info.value for i, info in enumerate(infos) if info.kind == "static"}
    try:
        json.dumps(static)
    except TypeError:
        log(1, f"{ENV_RECORD}: {where} has static arguments that are not JSON values; not recorded")
        return
    entry = {"function": where, "args": [format_arg(i) for i in infos if i.kind not in ("static", "default")],
             "static": static, "device": device, **(extra or {})}
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)   # one append: lines from concurrent processes do not interleave
        finally:
            os.close(fd)
    except OSError as e:
        log(1, f"{ENV_RECORD}: cannot append to {path}: {e}")


def read_manifest(path: str) -> list[dict]:
    """The distinct entries of a manifest (JSON lines), in first-seen order."""
    seen, out = set(), []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                entry = json.loads(line)
                entry["function"], entry["args"]
            except (ValueError, KeyError, TypeError):
                raise ArgumentError(f"{path}:{n}: not a manifest entry (a JSON object with 'function' and "
                                    f"'args'): {line[:80]}") from None
            text = json.dumps(entry, sort_keys=True)
            if text not in seen:
                seen.add(text)
                out.append(entry)
    return out


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
        if entry.get("chunks") is not None:   # a call with Dask arrays: its stages at its block shapes
            from tracejit.dask.stages import warm_recorded
            return warm_recorded(kernel, args, entry["chunks"], entry.get("static", {}), devices)
        report = warm(kernel, *args, devices=devices, **entry.get("static", {}))
    except Exception as e:   # a worker reports; it never takes the whole warm run down
        return [WarmResult(entry["function"], d, ", ".join(map(str, entry["args"])),
                           error=f"{type(e).__name__}: {e}").__dict__ for d in devices]
    for r in report:
        r.function = entry["function"]
    return [r.__dict__ for r in report]
