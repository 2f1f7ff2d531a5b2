"""Which sizes of a kernel are arguments of its code (issue 19), for every device.

A kernel's size slots (ir/size_slots.py: row lengths, loop extents, 1/n of a mean, scratch lengths) are
constants of its first compile; those that change in a later kernel of the same template (the same code
but for those values) become arguments, compiled once more and reused by every later size. Slots found
to follow the shapes otherwise (tj.spec's named dimensions, @tj.kernel(dynamic=True): Program.twin) are
arguments from the first compile. Which slots of a template are arguments is kept in the disk cache, so
a later process goes straight to that kernel. Which slots a device can take as arguments is its
renderer's `slot_argument` (codegen.numba's, codegen.cstyle's).
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable

import numpy as np

from tracejit.ir.fuse import Program
from tracejit.ir.kernel_ir import Kernel
from tracejit.ir.size_slots import Slot, size_slots, template
from tracejit.runtime.cache.key import tracejit_part
from tracejit.runtime.debug import log, stage
from tracejit.runtime.cache.disk import CACHE, CacheKey

TEMPLATES_MAX = 4096   # kernel templates whose sizes are tracked (forgetting one re-specialises its next size)


class SizeTemplates:
    """Per kernel template and loop kind (numba) or device: the values of its first kernel and the slots
    that are arguments. `slot_argument(kernel, slot)`: the dtype a slot is passed as where the device's
    renderer can take it as an argument, else None; `kind`: the disk cache's name for the device's records."""

    def __init__(self, slot_argument: Callable[[Kernel, Slot], np.dtype | None], kind: str):
        self._seen: dict[tuple, tuple[dict, set]] = {}
        self._lock = threading.Lock()
        self.slot_argument, self.kind = slot_argument, kind

    def symbolic(self, kernel: Kernel, loop: str, values: dict,
                 named: "set | Callable[[], set]" = frozenset()) -> dict[Slot, str]:
        """The size slots of this kernel to render as arguments: those that changed since the first kernel
        of its template (a second row length of a softmax makes the row length an argument, and every
        later one reuses that compile). The first of a template is specialised (no slots). `values`: the
        kernel's size_slots. Only slots that become arguments are returned (slot_argument). `named`: slots
        that follow a dimension tj.spec named, any dimension under @tj.kernel(dynamic=True) or a named axis
        under dynamic={"x": (0,)} (found from Program.twin): arguments from the first compile, and remembered
        for later processes. A callable `named` is asked only for a template without argument slots yet (it
        may trace the function at other sizes: Program.twin)."""
        key = (template(kernel, values), loop)
        if callable(named):   # (outside the lock: it may trace)
            with self._lock:
                seen = self._seen.get(key)
            named = named() if seen is None or not seen[1] else frozenset()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                if len(self._seen) >= TEMPLATES_MAX:   # forgetting only re-specialises a kernel's next size
                    self._seen.clear()
                # sizes seen to change in an earlier process (or named by a warm) are arguments at once:
                # that compile is in the disk cache, and this size reuses it
                known = {slot for slot in self._remembered(kernel, key) if slot in values
                         and self.slot_argument(kernel, slot) is not None}
                self._seen[key] = seen = (values, known)
            first, changed = seen
            new = {slot for slot, v in values.items() if not same(first[slot], v)
                   and self.slot_argument(kernel, slot) is not None} - changed
            if named - changed:
                log(1, f"{kernel.name}: {len(named - changed)} size(s) follow the shapes: arguments of its code")
                changed |= named
                self._remember(kernel, key, changed)
            if new:
                changes = ", ".join(dict.fromkeys(f"{first[slot]} -> {values[slot]}" for slot in sorted(new)))
                log(1, f"{kernel.name}: sizes changed since its first compile ({changes}): now arguments of its "
                       f"code, compiled once more and reused by later sizes")
                changed |= new
                self._remember(kernel, key, changed)
            return {slot: f"tj_s{n}" for n, slot in enumerate(sorted(changed))}

    def of(self, program: Program, index: int, loop: str) -> dict[Slot, str]:
        """symbolic() for kernel `index` of a program: none under dynamic=False; slots that follow the
        shapes (named()) from the first compile."""
        if program.dynamic is False:
            return {}
        kernel = program.kernels[index]
        values = size_slots(kernel)
        return self.symbolic(kernel, loop, values, lambda: self.named(kernel, values, program.twin, index))

    def named(self, kernel: Kernel, values: dict, twin: Program | None, index: int) -> set[Slot]:
        """The size slots of kernel `index` that differ in the program's twin (traced at other sizes of the
        dimensions tj.spec named, or of those dynamic= makes symbolic): those follow the shapes. None
        where there is no twin, or where the twin's kernel has another shape of code (it would need a
        compile of its own: a threshold lies between the sizes)."""
        if twin is None or index >= len(twin.kernels) or index in twin.library_calls:
            return set()
        other = twin.kernels[index]
        other_values = size_slots(other)
        if template(kernel, values) != template(other, other_values):
            log(1, f"{kernel.name}: its code takes another shape at other sizes; its sizes stay constants")
            return set()
        return {slot for slot, v in values.items() if not same(other_values[slot], v)
                and self.slot_argument(kernel, slot) is not None}

    def _key(self, kernel: Kernel, key: tuple) -> CacheKey:
        """The disk cache entry recording which size slots of a kernel template are arguments."""
        return CacheKey(self.kind, kernel.name, (
            ("kernel", hashlib.sha256(repr(key).encode()).hexdigest()),
            ("tracejit", tracejit_part()),
        ))

    def _remembered(self, kernel: Kernel, key: tuple) -> set[Slot]:
        """The slots of a template an earlier process made arguments, from the disk cache (none if unknown)."""
        with stage("disk cache"):
            payload, _ = CACHE.lookup(self._key(kernel, key))
        if payload is None:
            return set()
        try:
            return {(int(i), int(j)) for i, j in json.loads(payload)}
        except (ValueError, TypeError):   # not ours: the sizes are found again
            return set()

    def _remember(self, kernel: Kernel, key: tuple, slots: set[Slot]) -> None:
        with stage("disk cache"):
            CACHE.put(self._key(kernel, key), json.dumps(sorted(slots)).encode())


def same(a, b) -> bool:
    """Two slot values alike: equal, and equal as bits where floats (so NaN is NaN, and 0.0 is not -0.0)."""
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return a == b
