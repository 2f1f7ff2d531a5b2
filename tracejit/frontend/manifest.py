"""Manifests: what a running program compiled, recorded as JSON lines under TRACEJIT_RECORD, and the
argument specs they (and `python -m tracejit warm`) write as text."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from tracejit.errors import ArgumentError
from tracejit.ir.dtypes import check
from tracejit.runtime.debug import log
from tracejit.frontend.signature import ArgInfo, spec

ENV_RECORD = "TRACEJIT_RECORD"
_SCALARS = {"int": 0, "float": 0.0, "bool": False}
_ARRAY = re.compile(r"^\s*([a-z0-9_]+)\s*\[\s*([A-Za-z0-9_=,\s]*)\]\s*$")
_DIMENSION = re.compile(r"^(?:([A-Za-z_]\w*)(?:=([0-9]+))?|([0-9]+))$")  # 1024; n or n=4096: symbolic


# ---- argument specs as text: float32[4096,1024], float16[], int, float, bool ----


def parse_arg(text) -> object:
    """An argument spec from a manifest or the command line: "float32[4096,1024]", "int", or a dict
    {"dtype", "shape", "strides"} for a strided array."""
    if isinstance(text, dict):
        return spec(tuple(text["shape"]), text["dtype"], text.get("strides"))
    if text in _SCALARS:
        return _SCALARS[text]
    if text == "generator":  # a np.random.Generator argument: any one compiles the same kernels
        return np.random.default_rng()
    m = _ARRAY.match(str(text))
    dims = [_DIMENSION.match(s) for s in m.group(2).replace(" ", "").split(",") if s] if m else [None]
    if m is None or not all(dims):
        raise ArgumentError(
            f"cannot read argument spec {text!r}: write dtype[shape] (float32[4096,1024], "
            "float32[n,1024] for a symbolic dimension n, float32[n=4096,1024] to trace it at "
            "4096, float32[] for 0-d) "
            "or int / float / bool for a Python scalar"
        )
    shape = tuple(
        int(d.group(3)) if d.group(3) else (d.group(1), int(d.group(2))) if d.group(2) else d.group(1)
        for d in dims
        if d is not None
    )  # (all are)
    dtype = m.group(1)
    return spec(shape, dtype if dtype in ("complex64", "complex128") else check(dtype, "argument spec", internal=False))


def format_arg(info: ArgInfo) -> object:
    if info.kind == "generator":
        return "generator"
    if info.kind == "scalar":
        return {"b": "bool", "i": "int", "f": "float"}[info.value_dtype.kind]
    text = f"{info.value_dtype.name}[{','.join(map(str, info.shape))}]"
    if not info.contiguous:
        return {"dtype": info.value_dtype.name, "shape": list(info.shape), "strides": list(info.strides)}
    return text


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
    entry = {
        "function": where,
        "args": [format_arg(i) for i in infos if i.kind not in ("static", "default")],
        "static": static,
        "device": device,
        **(extra or {}),
    }
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)  # one append: lines from concurrent processes do not interleave
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
                raise ArgumentError(
                    f"{path}:{n}: not a manifest entry (a JSON object with 'function' and 'args'): {line[:80]}"
                ) from None
            text = json.dumps(entry, sort_keys=True)
            if text not in seen:
                seen.add(text)
                out.append(entry)
    return out
