"""Device facts (tj.device(name).info), tj.select_device and `python -m tracejit info`."""
from __future__ import annotations

import dataclasses
import gc
import json

import numpy as np
import pytest

import tracejit as tj
from conftest import AVAILABLE_DEVICES
from test_api import run_python
from tracejit.runtime import emulator

FIELDS = ("name", "target", "kind", "vendor", "driver_version", "total_memory", "free_memory", "compute_units",
          "compute_capability", "unified_memory", "max_threads_per_group", "local_memory", "subgroup_size", "dtypes")


def test_device_info_has_every_fact_typed_or_none(device):
    info = tj.device(device).info
    assert isinstance(info, tj.DeviceInfo)
    assert tuple(f.name for f in dataclasses.fields(info)) == FIELDS
    assert info.name == device and info.target == device.partition(":")[0]
    assert info.kind in ("cpu", "gpu", "emulated")
    assert info.kind == "emulated" if emulator.emulates(info.target) and info.target in ("cuda", "metal") else True
    for field in ("total_memory", "free_memory", "compute_units", "max_threads_per_group", "local_memory",
                  "subgroup_size"):
        value = getattr(info, field)
        assert value is None or isinstance(value, int) and value > 0 or field == "free_memory" and value == 0, field
    if info.total_memory is not None and info.free_memory is not None:
        assert info.free_memory <= info.total_memory
    assert info.unified_memory in (True, False, None)
    assert info.compute_capability is None or (len(info.compute_capability) == 2 and info.target == "cuda")
    assert "float32" in info.dtypes and all(np.dtype(d).name == d for d in info.dtypes)
    json.dumps(info.as_dict())   # JSON-ready
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.free_memory = 0


def test_the_dtypes_a_device_lists_are_the_ones_its_kernels_compute_in(device, rng):
    """Every listed dtype runs; a dtype the device leaves out is refused with a DtypeError."""
    info = tj.device(device).info
    f = tj.kernel(lambda x: x + x)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16", "float32",
                 "float64"):
        x = (rng.standard_normal(16) * 10).astype(name)
        if name in info.dtypes:
            got = np.asarray(f(x, device=device))
            assert got.dtype == (x + x).dtype and np.array_equal(got, x + x), name
        else:
            with pytest.raises(tj.DtypeError):
                f(x, device=device)


@pytest.mark.parametrize("name", [d for d in ("cuda", "metal") if d in AVAILABLE_DEVICES] or ["(none)"])
def test_free_memory_is_read_when_asked(name):
    """Free memory is the driver's figure at the time of asking: an allocation lowers it (the emulator and
    the GPU both account for it; the CPU's free memory moves with everything else on the machine)."""
    if name == "(none)":
        pytest.skip("no cuda or metal device here")
    dev = tj.device(name)
    before = dev.info.free_memory
    held = tj.asarray(np.ones(64 << 20, np.uint8), device=name)
    assert dev.info.free_memory <= before - (64 << 20)
    del held


def test_select_device_takes_the_automatic_order_and_the_requirements():
    assert tj.select_device() in AVAILABLE_DEVICES
    cpu = tj.select_device(kind="cpu")
    assert tj.device(cpu).info.kind == "cpu"
    assert tj.select_device(kind="cpu", dtypes=["float64", np.int64]) == "numba"   # the first CPU device
    for name in AVAILABLE_DEVICES:
        assert tj.select_device(prefer=name) == name            # preferred first where it qualifies
        assert tj.select_device(prefer=["no-such", name]) == name
    if "webgpu" in AVAILABLE_DEVICES:   # prefer does not override a requirement: WGSL has no float64
        assert tj.select_device(prefer="webgpu", dtypes="float64") != "webgpu"
    assert tj.select_device(min_free_memory=1) in AVAILABLE_DEVICES


def test_select_device_lists_every_device_and_why_when_none_qualifies():
    with pytest.raises(tj.DeviceError) as e:
        tj.select_device(min_free_memory=1 << 62, dtypes="float64")
    text = str(e.value)
    assert "min_free_memory" in text
    for status in tj.devices():
        assert f"  {status.name}: " in text, status.name
    if "webgpu" in AVAILABLE_DEVICES:
        assert "webgpu: cannot say how much memory is free" in text or "webgpu: does not compute" in text


@pytest.mark.parametrize("kwargs", [dict(kind="tpu"), dict(min_free_memory=-1), dict(min_free_memory="1GB"),
                                    dict(dtypes=["complex-ish"]), dict(prefer=[3])])
def test_select_device_names_a_bad_requirement(kwargs):
    with pytest.raises(tj.ArgumentError, match="select_device"):
        tj.select_device(**kwargs)


def test_info_command_prints_targets_devices_and_the_recommendation():
    out = run_python("-m", "tracejit", "info")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for status in tj.devices():
        assert f"{'✓' if status.available else '✗'} {status.name}" in text
    assert "recommended device: " in text and "free" in text
    out = run_python("-m", "tracejit", "info", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [t["name"] for t in summary["targets"]] == [s.name for s in tj.devices()]
    assert summary["recommended_device"] in [t["name"] for t in summary["targets"] if t["available"]]
    for d in summary["devices"]:
        assert set(d) == set(FIELDS) or set(d) == {"name", "error"}


def test_stats_count_launches_compiles_and_the_pool(device, rng):
    dev = tj.device(device)
    before = dev.stats()
    assert set(before) == {"launches", "compiles", "bytes_in_use", "peak_bytes", "pool_bytes", "last_error"}

    def scale_then_sum(x):   # two kernels: an elementwise one and a reduction over its materialised result
        y = np.exp(x) * np.float32(0.5)
        return y, y.sum(axis=0)

    f = tj.kernel(scale_then_sum)
    x = rng.standard_normal((64, 33), dtype=np.float32)
    for _ in range(3):
        out = f(x, device=device)
    kernels = len(f.lower(x, device=device).kernels)
    after = dev.stats()
    assert after["launches"] - before["launches"] == 3 * kernels
    info = f.cache_info()   # kernels this process compiled before (another test's) are loaded, not compiled
    assert after["compiles"] - before["compiles"] == info["compiles"] and info["compiles"] + info["disk_hits"] > 0
    if device == "numba":   # NumPy's arrays: not counted; the pool keeps large results' blocks (output_pool)
        assert after["bytes_in_use"] is after["peak_bytes"] is None and after["pool_bytes"] >= 0
    else:
        held = sum(np.asarray(o).nbytes for o in out)
        assert after["bytes_in_use"] >= held and after["peak_bytes"] >= after["bytes_in_use"]
        assert after["pool_bytes"] >= 0
    with tj.capture() as g:
        f(x, device=device)
    replays = dev.stats()["launches"]
    g.replay()
    g.replay()
    assert dev.stats()["launches"] - replays == 2 * kernels


@pytest.fixture
def memory_limit():
    """Lifts every limit a test set (the devices are shared by the whole session)."""
    yield
    from tracejit.runtime import device_stats, registry
    device_stats.DEFAULT_LIMIT.clear()
    for dev in registry.open_devices():
        if dev.name != "numba":
            dev.set_memory_limit(None)


@pytest.mark.parametrize("name", [d for d in AVAILABLE_DEVICES if d != "numba"] or ["(none)"])
def test_an_allocation_past_the_memory_limit_empties_the_pool_then_raises(name, memory_limit, rng):
    if name == "(none)":
        pytest.skip("no device with a memory pool here")
    f = tj.kernel(lambda x: x * np.float32(2) + 1)
    small = rng.standard_normal(1 << 12, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(f(small, device=name)), small * np.float32(2) + 1)
    dev = tj.device(name)
    kept = tj.asarray(np.ones(1 << 19, np.float32), device=name)
    del kept
    gc.collect()                                         # arrays of earlier tests back in the pool too
    assert dev.stats()["pool_bytes"] >= 1 << 21          # a block kept for reuse, of the size asked for below:
    #                                                      reusing it counts against the limit as a new one would
    limit = dev.stats()["bytes_in_use"] + (1 << 20)
    tj.set_memory_limit(limit, device=name)
    big = rng.standard_normal(1 << 19, dtype=np.float32)   # 2 MiB: past the limit
    with pytest.raises(tj.OutOfMemoryError, match=f"memory limit of {limit} bytes") as e:
        tj.asarray(big, device=name)
    assert isinstance(e.value, MemoryError) and "2097152 bytes" in str(e.value)
    assert dev.stats()["pool_bytes"] == 0                # emptied before giving up
    with pytest.raises(tj.OutOfMemoryError, match=f"memory limit of {limit} bytes"):
        f(big, device=name)
    assert "OutOfMemoryError" in dev.stats()["last_error"]
    del e
    gc.collect()   # what the failed call had allocated, held by its traceback until now
    np.testing.assert_array_equal(np.asarray(f(small, device=name)), small * np.float32(2) + 1)   # still works
    tj.set_memory_limit(None, device=name)
    np.testing.assert_array_equal(np.asarray(f(big, device=name)), big * np.float32(2) + 1)


def test_a_limit_for_every_device_reaches_devices_opened_later_and_the_environment_sets_one(memory_limit):
    from tracejit.runtime import device_stats
    tj.set_memory_limit(123 << 20)
    for dev in (tj.device(d) for d in AVAILABLE_DEVICES if d != "numba"):
        dev.set_memory_limit(None)
        dev.apply_memory_limit()                   # what a device does when it is made
        assert dev.memory_limit == 123 << 20
    device_stats.DEFAULT_LIMIT.clear()
    for text, want in (("1048576", 1 << 20), ("512M", 512 << 20), ("2GiB", 2 << 30), ("1.5g", 3 << 29)):
        with pytest.MonkeyPatch.context() as m:
            m.setenv("TRACEJIT_MEMORY_LIMIT", text)
            assert device_stats.environment_limit() == want, text
    with pytest.MonkeyPatch.context() as m:
        m.setenv("TRACEJIT_MEMORY_LIMIT", "lots")
        with pytest.raises(tj.ArgumentError, match="TRACEJIT_MEMORY_LIMIT"):
            device_stats.environment_limit()


@pytest.mark.parametrize("bad", [-1, 1.5, "1G", True])
def test_set_memory_limit_names_a_bad_size(bad):
    with pytest.raises(tj.ArgumentError, match="set_memory_limit"):
        tj.set_memory_limit(bad)


def test_numba_has_no_memory_limit_to_set():
    with pytest.raises(tj.UnsupportedError, match="NumPy arrays"):
        tj.set_memory_limit(1 << 30, device="numba")


def test_every_device_is_a_device_and_states_its_capabilities(device):
    from tracejit.runtime.device_interface import Device, DeviceInterface
    dev = tj.device(device)
    assert isinstance(dev, Device) and isinstance(dev, DeviceInterface)
    for flag in ("runs", "returns_numpy", "inner_sizes_as_arguments", "binds_one_buffer_twice",
                 "keeps_compiled_kernels", "imports_foreign", "has_memory_pool"):
        assert isinstance(getattr(dev, flag), bool), flag
    assert dev.runs and dev.returns_numpy == (device == "numba")
    assert dev.keeps_compiled_kernels or dev.no_disk_cache


def test_every_gpu_api_device_implements_the_launch_plans_hooks(device):
    from tracejit.runtime.device_interface import KernelDevice
    from tracejit.runtime.launch_plan import LaunchPlan
    dev = tj.device(device)
    plan = tj.kernel(lambda x: x + 1).lower(np.ones(4, np.float32), device=device).executable
    assert isinstance(dev, KernelDevice) == isinstance(plan, LaunchPlan) == (device != "numba")


def test_the_frontend_reads_capabilities_instead_of_probing_devices():
    """No getattr/hasattr probing of a device object and no `name == "numba"` tests in the frontend: the
    capabilities are Device's attributes (runtime/device_interface.py)."""
    import pathlib
    import re
    root = pathlib.Path(tj.__file__).parent
    probe = re.compile(r'\b(getattr|hasattr)\((dev|device)\w*, "(?!name")|\.name [!=]= "numba"')
    for path in [*(root / "frontend").glob("*.py"), root / "__init__.py"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not probe.search(line), f"{path.name}:{n}: {line.strip()}"
