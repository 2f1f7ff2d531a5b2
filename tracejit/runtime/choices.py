"""A device's layout choices, replaced for the compiles of one thread: autotuning's candidates and winners
(frontend/autotune.py).

A device decides a kernel's layout from what it holds: `layout` (ir/layout.LayoutOptions: transpose tiles, tiled
products), a SIMT device's render `options` (work-group sizes, a row's work per work-item) and the numba device's
thread threshold. A `Choice` names some of those values; `applied(choice)` makes them what this thread's compiles
read (`layout_of`, `options_of`, `parallel_min_work`), while every other thread's compiles read the device's own.
Each choice keeps its own record of which kernel sizes are symbolic (`sizes_of`), in memory only: a candidate's
other tile extents must not read as a size that changed (runtime/symbolic_sizes.py), nor be remembered on disk
for the device's default compiles.

Every choice computes the same values: only the order of a float reduction's additions may differ.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracejit.runtime.symbolic_sizes import SymbolicSizes


@dataclass(frozen=True)
class Choice:
    """Values that replace a device's own: `layout` (LayoutOptions fields), `options` (the render options' fields),
    `parallel_min_work` (the numba device: the work from which a kernel runs on several threads). Empty: the
    device's defaults."""

    layout: tuple[tuple[str, object], ...] = ()
    options: tuple[tuple[str, object], ...] = ()
    parallel_min_work: int | None = None

    @property
    def default(self) -> bool:
        return not self.layout and not self.options and self.parallel_min_work is None

    def __str__(self) -> str:
        if self.default:
            return "defaults"
        parts = [f"{k}={_text(v)}" for k, v in (*self.layout, *self.options)]
        if self.parallel_min_work is not None:
            work = self.parallel_min_work
            parts.append("one thread" if work >= SERIAL else f"threads from {work} elements of work")
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "layout": [[k, _plain(v)] for k, v in self.layout],
            "options": [[k, _plain(v)] for k, v in self.options],
            "parallel_min_work": self.parallel_min_work,
        }

    @classmethod
    def from_json(cls, data: dict) -> Choice:
        """The choice a record holds; ValueError where a field is not one the devices have."""
        layout = tuple((str(k), _frozen(v)) for k, v in data.get("layout", ()))
        options = tuple((str(k), _frozen(v)) for k, v in data.get("options", ()))
        work = data.get("parallel_min_work")
        if work is not None and (type(work) is not int or work < 1):
            raise ValueError(f"parallel_min_work {work!r} is not a positive int")
        return cls(layout, options, work)


DEFAULT = Choice()
SERIAL = 1 << 62  # parallel_min_work that no kernel reaches: every kernel on one thread
_ACTIVE: ContextVar[Choice] = ContextVar("tracejit_choice", default=DEFAULT)
_SIZES: dict[tuple[int, Choice], SymbolicSizes] = {}
_SIZES_LOCK = threading.Lock()


@contextmanager
def applied(choice: Choice) -> Iterator[None]:
    """This thread's compiles read `choice`'s values in place of the devices' own while the block runs."""
    token = _ACTIVE.set(choice)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current() -> Choice:
    return _ACTIVE.get()


def layout_of(device):
    """The device's LayoutOptions, with the applied choice's fields."""
    choice = _ACTIVE.get()
    return dataclasses.replace(device.layout, **dict(choice.layout)) if choice.layout else device.layout


def options_of(device):
    """A SIMT device's render options, with the applied choice's fields."""
    choice = _ACTIVE.get()
    return dataclasses.replace(device.options, **dict(choice.options)) if choice.options else device.options


def parallel_min_work(default: int) -> int:
    """The work from which a numba kernel runs on several threads: the applied choice's, else `default`."""
    work = _ACTIVE.get().parallel_min_work
    return default if work is None else work


def sizes_of(device):
    """Which sizes of the device's kernels are symbolic: the device's own record, or under a choice other than the
    defaults one of that choice's, kept in this process only."""
    choice = _ACTIVE.get()
    if choice.default:
        return device.sizes
    from tracejit.runtime.symbolic_sizes import InMemorySizes  # (imports the scheduler: not at `import tracejit`)

    with _SIZES_LOCK:
        sizes = _SIZES.get((id(device), choice))
        if sizes is None:
            own = device.sizes
            sizes = _SIZES[(id(device), choice)] = InMemorySizes(own.slot_argument, own.kind)
        return sizes


def _text(value) -> str:
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        if len(set(value)) == 1:
            return f"{value[0][0]}x{value[0][1]}"
        return "/".join(f"{r}x{c}" for r, c in value)
    return repr(value)


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _frozen(value):
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise ValueError(f"{value!r} is not a layout value")


def simt_candidates(device) -> list[Choice]:
    """A SIMT device's candidates beside its defaults: smaller work-groups, more of a row's elements reduced by
    each work-item of its group, matrix products tiled or not (the other way from the device's default), and
    smaller transpose tiles. Those that change nothing of a kernel compile as the defaults do and are timed once."""
    options, layout = device.options, device.layout
    names = {f.name for f in dataclasses.fields(options)}
    found = [
        Choice(options=(("max_local_size", size),))
        for size in (32, 64, 128)
        if "max_local_size" in names and size < options.max_local_size
    ]
    if "group_stride" in names:
        found += [Choice(options=(("group_stride", stride),)) for stride in (4, 16) if stride != options.group_stride]
    found.append(Choice(layout=(("tiled", not layout.tiled),)))
    found += [
        Choice(layout=(("transpose_tiles", (tile,) * 4),))
        for tile in ((8, 8), (16, 16))
        if layout.transpose_tiles != (tile,) * 4
    ]
    return found
