"""The device registry: every target in one table, discovered at run time, and the default device."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

from tracejit.errors import ArgumentError, DeviceError
from tracejit.runtime import device_stats, gpu_nodes
from tracejit.runtime.device_interface import Device

# name -> "module:Class" of its runtime, in auto-selection order (real GPUs first, then numba, then
# CPU implementations of GPU APIs). A new target adds one line here.
TARGETS: dict[str, str] = {
    "numba": "tracejit.runtime.numba.device:NumbaDevice",
    "opencl": "tracejit.runtime.opencl.device:OpenCLDevice",
    "cuda": "tracejit.runtime.cuda.device:CUDADevice",
    "webgpu": "tracejit.runtime.webgpu.device:WebGPUDevice",
    "metal": "tracejit.runtime.metal.device:MetalDevice",
}
AUTO_ORDER = ("cuda-gpu", "metal-gpu", "opencl-gpu", "webgpu-gpu", "numba")

# Third-party targets: a package's entry point in this group, `name = "module:Class"`, adds a target
# (discovered when the devices are first listed or a name that is not built in is asked for, loaded when
# first listed or used). A plugin is never chosen automatically; a broken one is listed as unavailable with
# its error and never breaks the import. Discovery reads every installed package's entry points
# (importing importlib.metadata and the scan: 50-100 ms that `import tracejit` paid before).
PLUGIN_GROUP = "tracejit.targets"
PLUGINS: dict[str, str] = {}  # name -> "module:Class" (or why it was not taken, for a clash)
_PLUGIN_PROBLEMS: dict[str, str] = {}
_discovered = False


def _plugins_discovered() -> None:
    """The plugins' entry points read, once per process."""
    global _discovered
    if not _discovered:
        _discovered = True
        _discover_plugins()


def _known(target: str) -> bool:
    """Whether `target` is a built-in or plugin target (the plugins are read for a name not built in)."""
    if target not in TARGETS:
        _plugins_discovered()
    return target in TARGETS


def _discover_plugins() -> None:
    from importlib import metadata

    try:
        found = metadata.entry_points(group=PLUGIN_GROUP)
    except Exception as e:  # a broken installation's metadata: reported, never raised
        _PLUGIN_PROBLEMS["(entry points)"] = f"could not read the {PLUGIN_GROUP} entry points: {e}"
        return
    for ep in found:
        if ep.name in TARGETS:
            _PLUGIN_PROBLEMS[f"{ep.name} ({ep.value})"] = (
                f"a plugin cannot replace the built-in target {ep.name!r}; give it another name"
            )
            continue
        if ":" in ep.name or not ep.name.isidentifier():
            _PLUGIN_PROBLEMS[ep.name] = f"plugin target names are identifiers (like 'reference'); got {ep.name!r}"
            continue
        PLUGINS[ep.name] = TARGETS[ep.name] = ep.value


@dataclass(frozen=True)
class TargetStatus:
    """One entry of tj.devices(): a target, whether it can run kernels here, and why not (with an
    install hint). A device's facts are tj.device(name).info (runtime/device_info.DeviceInfo)."""

    name: str
    available: bool
    reason: str | None = None  # why not available, with an install hint
    description: str = ""

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name:<8} {state}" + (f" ({self.description})" if self.description else "")


_instances: dict[str, object] = {}
_default: str | None = None
_auto: str | None = None  # TRACEJIT_DEVICE or the automatic choice, found once per process


def target_class(target: str):
    """The runtime class of a target name in TARGETS ("numba", "cuda", a plugin's name)."""
    _known(target)
    module, _, qualname = TARGETS[target].partition(":")
    if target in _PLUGIN_PROBLEMS:
        raise DeviceError(_PLUGIN_PROBLEMS[target])
    try:
        obj = importlib.import_module(module)
        for part in qualname.split(".") if qualname else ():
            obj = getattr(obj, part)
    except Exception as e:
        if target not in PLUGINS:
            raise
        raise DeviceError(f"plugin {target} ({TARGETS[target]}) is broken: {type(e).__name__}: {e}") from None
    if target in PLUGINS and not (isinstance(obj, type) and issubclass(obj, Device)):
        raise DeviceError(
            f"plugin target {target} ({TARGETS[target]}) is not a target class: a subclass of "
            "tracejit.runtime.device_interface.Device with probe(), compile(program) and the array "
            "methods (docs/guide/devices/plugins.md)"
        )
    return obj


def devices() -> list[TargetStatus]:
    """Every target tracejit knows, usable here or not (and why not)."""
    _plugins_discovered()
    out = []
    for target in TARGETS:
        try:
            cls = target_class(target)
            ok, reason, desc = cls.probe()
        except Exception as e:  # a broken optional install or plugin must not break `import tracejit`
            ok, reason, desc = False, str(e) if target in PLUGINS else f"{type(e).__name__}: {e}", ""
        out.append(TargetStatus(target, ok, reason, desc))
    for name, problem in _PLUGIN_PROBLEMS.items():
        if name not in TARGETS:
            out.append(TargetStatus(name, False, problem, "plugin"))
    return out


def device(name: str | None = None):
    """The runtime device object for a name such as "numba" (None: the default device)."""
    name = name or default_device_name()
    if not isinstance(name, str):
        name = getattr(name, "name", name)
    if not isinstance(name, str):
        raise ArgumentError(
            f"device must be a device name such as 'numba' or 'opencl:1', or a device "
            f"object; got {name!r} of type {type(name).__name__}"
        )
    dev = _instances.get(name)
    if dev is not None:
        return dev
    target, _, index = name.partition(":")
    if not _known(target):
        raise DeviceError(f"unknown device {name!r}; known devices: {', '.join(TARGETS)}")
    try:
        cls = target_class(target)
    except DeviceError as e:  # a broken plugin
        raise DeviceError(f"device {name!r} is not available: {e}") from None
    if index and not index.isdigit():  # a naming mistake is reported before what this machine lacks
        if cls.compile_only is not None:
            raise DeviceError(
                f"device {name!r} names an architecture to compile for: lower() and tj.warm() take it, "
                f"but kernels run on a device such as {target!r} or {target}:0"
            )
        raise DeviceError(f"device {name!r}: the part after ':' must be a device number, like {target}:1")
    ok, reason, _ = cls.probe()
    if not ok:
        raise DeviceError(f"device {name!r} is not available: {reason}")
    dev = _instances[name] = cls(int(index) if index else None)
    return dev


def open_devices() -> list:
    """The device objects made so far in this process (compile-only targets left out)."""
    return [d for key, d in list(_instances.items()) if not key.startswith("compile-only")]


def compiler(name: str | None = None):
    """The object that compiles for `name` without running anything (lower, warm): the device itself
    where it is available, else, for a target that compiles without hardware (cuda: PTX), a compile-only
    target; `cuda:sm_90` names an architecture. Anything else is `device(name)`, with its errors."""
    name = name or default_device_name()
    if not isinstance(name, str):
        return name
    if name in _instances:  # the device is open: compile for it
        return _instances[name]
    target, _, suffix = name.partition(":")
    if _known(target) and (not suffix or not suffix.isdigit()):
        cls = target_class(target)
        make = cls.compile_only
        if make is not None:
            key = f"compile-only {name}"
            found = _instances.get(key)
            if found is None:
                found = make(suffix or None)
                if found is None:  # the hardware is there: compile for it
                    return device(name)
                _instances[key] = found
            return found
    return device(name)


def set_default_device(name: str | None) -> None:
    """Make `name` the device used when a call names none (None: back to TRACEJIT_DEVICE / automatic)."""
    global _default
    if name is not None:
        device(name)  # validate now, not at the first call
    _default = name


def default_device_name() -> str:
    """set_default_device's choice, else TRACEJIT_DEVICE, else the best available device.

    Runs on every kernel call, so the environment is read once (when first needed) and remembered.
    """
    if _default is not None:
        return _default
    global _auto
    if _auto is None:
        env = os.environ.get("TRACEJIT_DEVICE")
        if env:
            device(env)  # a wrong name fails here, with the list of known devices
            _auto = env
        else:
            _auto = next((name.partition("-")[0] for name in AUTO_ORDER if _qualifies(name)), "numba")
    return _auto


def _qualifies(name: str) -> bool:
    """An AUTO_ORDER entry: a target, or "target-gpu" for a target whose default device is a GPU. Probed
    only as far as needed; a target that can rule out a GPU cheaply (maybe_gpu) is not probed for one,
    so choosing numba never pays for creating a WebGPU adapter."""
    target, _, kind = name.partition("-")
    if target not in TARGETS or kind and gpu_nodes.ruled_out(target):  # (a built-in GPU target: not imported)
        return False
    try:
        cls = target_class(target)
        if kind and not cls.maybe_gpu():
            return False
        if not cls.probe()[0]:
            return False
        return not kind or cls.default_is_gpu()
    except Exception:  # a broken optional install must not stop the choice
        return False


def reset_default_device() -> None:
    """Forget the remembered choice, so TRACEJIT_DEVICE is read again (for tests and tools)."""
    global _default, _auto
    _default = _auto = None


_named_device = device  # (set_memory_limit's parameter `device` hides the function)


def set_memory_limit(nbytes: int | None, device: str | None = None) -> None:
    """Cap the bytes a device's memory pool holds, in arrays and kept for reuse (None: no cap). An
    allocation past the cap first empties the pool, then raises tj.OutOfMemoryError (a MemoryError)
    naming the request and the limit. device=None: every device with a pool, open now or later
    (TRACEJIT_MEMORY_LIMIT sets the same at startup); numba's arrays are NumPy's, which it does not
    pool: naming it is an UnsupportedError."""
    limit = device_stats.checked_limit(nbytes)
    if device is not None:
        _named_device(device).set_memory_limit(limit)
        return
    device_stats.DEFAULT_LIMIT[:] = [limit]
    for dev in open_devices():
        if isinstance(dev, device_stats.DeviceStats) and dev.has_memory_pool:
            dev.set_memory_limit(limit)
