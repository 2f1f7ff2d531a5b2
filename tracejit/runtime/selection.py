"""tj.select_device: the best available device that meets stated requirements.

Candidates come in the automatic order (registry.AUTO_ORDER: GPUs first, then numba), then the CPU
implementations of GPU APIs (PoCL, llvmpipe), then the CPU emulator; names in `prefer` come before all
of them. Each candidate is opened and its DeviceInfo asked only until one qualifies; when none does,
the error lists every device and why it was rejected.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import DTypeLike

from tracejit.errors import ArgumentError, DeviceError
from tracejit.runtime import registry
from tracejit.runtime.device_info import KINDS


def select_device(
    kind: str | None = None,
    min_free_memory: int | None = None,
    dtypes: DTypeLike | Iterable[DTypeLike] = (),
    prefer: str | Iterable[str] | None = None,
) -> str:
    """The name of the best available device that is of `kind` ("cpu", "gpu" or "emulated"), has at
    least `min_free_memory` bytes free now (a device that cannot say how much is free does not
    qualify) and computes in every dtype of `dtypes`; `prefer`: a device name or names to take first
    when they qualify. tj.DeviceError lists every device and why it was rejected when none qualifies."""
    if kind is not None and kind not in KINDS:
        raise ArgumentError(f"select_device(kind={kind!r}): kind must be one of {', '.join(map(repr, KINDS))} or None")
    if min_free_memory is not None and (not isinstance(min_free_memory, (int, np.integer)) or min_free_memory < 0):
        raise ArgumentError(f"select_device(min_free_memory={min_free_memory!r}): give a number of bytes (an int >= 0)")
    wanted = _dtype_names(dtypes)
    preferred = [prefer] if isinstance(prefer, str) else list(prefer or ())
    for name in preferred:
        if not isinstance(name, str):
            raise ArgumentError(f"select_device(prefer=...): device names such as 'cuda' or 'opencl:1'; got {name!r}")
    rejected: list[tuple[str, str]] = []
    for name in _candidates(preferred, rejected):
        try:
            info = registry.device(name).info
        except Exception as e:  # a device that fails to open is a rejected candidate, not a crash
            rejected.append((name, f"could not be opened ({type(e).__name__}: {e})"))
            continue
        why = _unmet(info, kind, min_free_memory, wanted)
        if why is None:
            return name
        rejected.append((name, why))
    wants = (
        ", ".join(
            filter(
                None,
                [
                    f"kind={kind!r}" if kind else "",
                    f"min_free_memory={min_free_memory}" if min_free_memory is not None else "",
                    f"dtypes={list(wanted)}" if wanted else "",
                ],
            )
        )
        or "no requirement"
    )
    lines = "\n".join(f"  {name}: {why}" for name, why in rejected)
    raise DeviceError(f"no device meets {wants}:\n{lines}")


def _dtype_names(dtypes) -> tuple[str, ...]:
    if isinstance(dtypes, (str, np.dtype, type)):
        dtypes = (dtypes,)
    out = []
    for d in dtypes:
        try:
            out.append(np.dtype(d).name)
        except TypeError:
            raise ArgumentError(f"select_device(dtypes=...): {d!r} is not a NumPy dtype") from None
    return tuple(out)


def _candidates(preferred: list[str], rejected: list) -> list[str]:
    """Device names in the order they are tried; unavailable targets go to `rejected` with the reason."""
    statuses = {s.name: s for s in registry.devices()}
    order: list[tuple[int, int, str]] = []
    for position, status in enumerate(statuses.values()):
        if not status.available:
            continue
        order.append((_rank(status.name), position, status.name))
    names = [name for _, _, name in sorted(order)]
    for name in [*preferred, *statuses]:
        found = statuses.get(name.partition(":")[0])
        if found is None:
            rejected.append((name, "no such device"))
        elif not found.available and name not in {n for n, _ in rejected}:
            rejected.append((name, f"unavailable: {found.reason}"))
    usable = [p for p in preferred if p.partition(":")[0] in names]
    return usable + [n for n in names if n not in usable]


def _rank(target: str) -> int:
    """GPUs first, then numba, then CPU implementations of GPU APIs, then the emulator."""
    if _emulated(target):
        return 3
    if target == "numba":
        return 1
    cls = registry.target_class(target)
    try:
        gpu = cls.maybe_gpu() and cls.default_is_gpu()
    except Exception:  # a target that cannot say: after the CPU ones
        return 3
    return 0 if gpu else 2


def _emulated(target: str) -> bool:
    from tracejit.runtime import emulator

    return target in ("cuda", "metal") and emulator.emulates(target)


def _unmet(info, kind, min_free_memory, wanted) -> str | None:
    """Why a device does not meet the requirements, or None."""
    if kind is not None and info.kind != kind:
        return f"kind is {info.kind!r}, not {kind!r}"
    if min_free_memory is not None:
        if info.free_memory is None:
            return f"cannot say how much memory is free ({info.target}'s API does not report it)"
        if info.free_memory < min_free_memory:
            return f"{info.free_memory} bytes free, fewer than {min_free_memory}"
    missing = [d for d in wanted if d not in info.dtypes]
    if missing:
        return f"does not compute in {', '.join(missing)}"
    return None
