"""The numba device's transposed reads, tuned once per machine: `python -m tracejit tune`.

A kernel that reads an input against the output's layout (`x.T + y`) walks it in tiles (ir/layout.py,
`transpose_tiles`: rows x columns of the output, by the element size of the array read across). Which
tile is fastest depends on the machine: for float32 `x.T + y` at 4096^2, 8x4 took 19 ms against 25 for
32x32 on a 2-core Zen 4 VM, and 29-30 ms against 19-25 on a 2-core Emerald Rapids VM. The defaults are the
Zen 4 VM's; frontend/tuning.py times every candidate tile on `x.T + y` for each element size on this machine and
keeps the fastest, unless it beats the default by less than MARGIN (noise), in a record in the cache
directory. The record's name comes from what makes the answer differ: the CPU model, core count and
cache sizes, and the versions of Numba and llvmlite that generate the code. The numba device reads it
when it opens (`tuned_layout`); an unreadable record is a CacheWarning and the defaults.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np

from tracejit.errors import CacheWarning
from tracejit.ir.layout import LayoutOptions
from tracejit.runtime.cache.directory import cache_dir
from tracejit.runtime.debug import log
from tracejit.runtime.cache.disk import write_atomic
from tracejit.runtime.numba.cache import compiler_versions, host_cpu

CANDIDATES = ((8, 4), (8, 8), (16, 8), (16, 16), (32, 8), (32, 32))
DTYPES = (np.uint8, np.int16, np.float32, np.float64)  # 1, 2, 4 and 8 bytes: transpose_tiles' four entries
SHAPE = (4096, 4096)  # y's shape (x is its transpose); 8-byte elements: half as many columns
MARGIN = 0.05
ROUNDS, CALLS = 3, 5  # each candidate: the least, over ROUNDS taken in turn, of the median of CALLS calls


def fingerprint() -> dict:
    """What the fastest tile depends on: this CPU (as LLVM sees it, with its core count and caches) and the
    code generator."""
    caches = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            caches.append(f"L{(index / 'level').read_text().strip()} {(index / 'size').read_text().strip()}")
        except OSError:
            pass
    return {"cpu": host_cpu(), "cores": os.cpu_count(), "caches": caches, "compiler": compiler_versions()}


def record_path(machine: dict | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(machine or fingerprint(), sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "tuning" / f"numba-{digest}.json"


def tuned_layout(layout: LayoutOptions) -> LayoutOptions:
    """`layout` with this machine's tuned transpose tiles where it has a record, else `layout`."""
    path = record_path()
    try:
        if not path.exists():
            return layout
        tiles = tuple(tuple(t) for t in json.loads(path.read_text())["transpose_tiles"])
        if len(tiles) != 4 or any(
            len(t) != 2 or any(type(n) is not int or not 1 <= n <= 256 for n in t) for t in tiles
        ):
            raise ValueError(f"transpose_tiles {tiles!r} is not four [rows, columns] pairs")
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(
            f"tracejit: the tuning record {path} is unreadable ({e}); using the default transpose "
            "tiles. Run `python -m tracejit tune` again, or delete the file.",
            CacheWarning,
            stacklevel=2,
        )
        return layout
    log(1, f"numba: transpose tiles {tiles} from {path}")
    return dataclasses.replace(layout, transpose_tiles=tiles)


def save(record: dict) -> Path:
    """Writes a tuning record (frontend/tuning.py measures it) where tuned_layout finds it."""
    path = record_path(record["machine"])
    write_atomic(path, json.dumps(record, indent=2).encode())
    return path
