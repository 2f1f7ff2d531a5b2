"""Which sizes of a numba kernel are arguments of its code (issue 19).

A kernel's size slots (codegen.numba.size_slots: row lengths, loop extents, 1/n of a mean, scratch
lengths) are constants of its first compile; those that change in a later kernel of the same template
(the same code but for those values) become arguments, compiled once more and reused by every later
size. Slots found to follow the shapes otherwise (tj.spec's named dimensions, @tj.kernel(dynamic=True):
Program.twin) are arguments from the first compile. Which slots of a template are arguments is kept in
the disk cache, so a later process goes straight to that kernel.
"""
from __future__ import annotations

import hashlib
import json
import threading

import numpy as np

from ..codegen import numba as numba_codegen
from ..ir.fuse import Program
from ..ir.kernel_ir import Kernel
from .cache_key import tracejit_part
from .debug import log, stage
from .disk_cache import CACHE, CacheKey

TEMPLATES_MAX = 4096   # kernel templates whose sizes are tracked (forgetting one re-specialises its next size)


class SizeTemplates:
    """Per kernel template and loop kind: the values of its first kernel and the slots that are arguments."""

    def __init__(self):
        self._seen: dict[tuple, tuple[dict, set]] = {}
        self._lock = threading.Lock()

    def symbolic(self, kernel: Kernel, loop: str, values: dict, named: set = frozenset()
                        ) -> dict[tuple[int, int], str]:
        """The size slots of this kernel to render as arguments: those that changed since the first kernel
        of its template (a second row length of a softmax makes the row length an argument, and every
        later one reuses that compile). The first of a template is specialised (no slots). `values`: the
        kernel's size_slots. Only slots that become arguments are returned (slot_argument). `named`: slots
        that follow a dimension tj.spec named, any dimension under @tj.kernel(dynamic=True) or a named axis
        under dynamic={"x": (0,)} (found from Program.twin): arguments from the first compile, and remembered for later processes."""
        key = (numba_codegen.template(kernel, values), loop)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= TEMPLATES_MAX:   # forgetting only re-specialises a kernel's next size
                    self._seen.clear()
                # sizes seen to change in an earlier process (or named by a warm) are arguments at once:
                # that compile is in the disk cache, and this size reuses it
                known = {slot for slot in _remembered_slots(kernel, key) if slot in values
                         and numba_codegen.slot_argument(kernel, slot) is not None}
                self._seen[key] = seen = (values, known)
            first, changed = seen
            new = {slot for slot, v in values.items() if not same(first[slot], v)
                   and numba_codegen.slot_argument(kernel, slot) is not None} - changed
            if named - changed:
                log(1, f"{kernel.name}: {len(named - changed)} size(s) follow the shapes: arguments of its code")
                changed |= named
                _remember_slots(kernel, key, changed)
            if new:
                changes = ", ".join(dict.fromkeys(f"{first[slot]} -> {values[slot]}" for slot in sorted(new)))
                log(1, f"{kernel.name}: sizes changed since its first compile ({changes}): now arguments of its "
                       f"code, compiled once more and reused by later sizes")
                changed |= new
                _remember_slots(kernel, key, changed)
            return {slot: f"tj_s{n}" for n, slot in enumerate(sorted(changed))}


def named_slots(kernel: Kernel, values: dict, twin: Program, index: int) -> set[tuple[int, int]]:
    """The size slots of kernel `index` that differ in the program's twin (traced at other sizes of the
    dimensions tj.spec named): those follow the named dimensions. None where the twin's kernel has
    another shape of code (it would need a compile of its own: a threshold lies between the sizes)."""
    if index >= len(twin.kernels) or index in twin.library_calls:
        return set()
    other = twin.kernels[index]
    other_values = numba_codegen.size_slots(other)
    if numba_codegen.template(kernel, values) != numba_codegen.template(other, other_values):
        log(1, f"{kernel.name}: its code takes another shape at other sizes; its sizes "
               "stay constants")
        return set()
    return {slot for slot, v in values.items() if not same(other_values[slot], v)
            and numba_codegen.slot_argument(kernel, slot) is not None}


def _template_key(kernel: Kernel, key: tuple) -> CacheKey:
    """The disk cache entry recording which size slots of a kernel template are arguments."""
    return CacheKey("numba-sizes", kernel.name, (
        ("kernel", hashlib.sha256(repr(key).encode()).hexdigest()),
        ("tracejit", tracejit_part()),
    ))


def _remembered_slots(kernel: Kernel, key: tuple) -> set[tuple[int, int]]:
    """The slots of a template an earlier process made arguments, from the disk cache (none if unknown)."""
    with stage("disk cache"):
        payload, _ = CACHE.lookup(_template_key(kernel, key))
    if payload is None:
        return set()
    try:
        return {(int(i), int(j)) for i, j in json.loads(payload)}
    except (ValueError, TypeError):   # not ours: the sizes are found again
        return set()


def _remember_slots(kernel: Kernel, key: tuple, slots: set[tuple[int, int]]) -> None:
    with stage("disk cache"):
        CACHE.put(_template_key(kernel, key), json.dumps(sorted(slots)).encode())


def same(a, b) -> bool:
    """Two slot values alike: equal, and equal as bits where floats (so NaN is NaN, and 0.0 is not -0.0)."""
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b
