"""tj.profile(): launches and compiles recorded, printed per kernel, exported as a Chrome trace."""
from __future__ import annotations

import json

import numpy as np

import tracejit as tj
from tracejit.runtime import debug, emulator, profiler


def scale_then_sum(x):   # two kernels: an elementwise one and a reduction over its stored result
    y = np.exp(x) * np.float32(0.5)
    return y, y.sum(axis=0)


def test_a_profile_records_each_launch_and_compile_on_every_device(device, rng, tmp_path):
    f = tj.kernel(scale_then_sum)
    x = rng.standard_normal((64, 33), dtype=np.float32)
    with tj.profile() as p:
        for _ in range(3):
            y, s = f(x, device=device)
    want_y, want_s = scale_then_sum(x)
    np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(s), want_s, rtol=1e-5, atol=1e-5)
    names = [k.name for k in f.lower(x, device=device).kernels]
    mine = [e for e in p.launches if e.device == device and e.name in names]
    assert len(mine) == 3 * len(names), [(e.name, e.device) for e in p.launches]
    # device timers: OpenCL's profiling queue, CUDA events on a GPU (the emulator's launches are timed on the host)
    timed_on_device = device.startswith("opencl") or (device.startswith("cuda") and not emulator.emulates("cuda"))
    for e in mine:
        assert e.end >= e.start >= p.opened and e.nbytes >= x.nbytes
        assert e.clock == ("device" if timed_on_device else "wall")
        assert (e.grid is None) == (device == "numba")
    (compile_,) = [e for e in p.compiles if e.name == "scale_then_sum"]
    assert compile_.device == device and compile_.detail["kernels"] == len(names)
    assert "trace" in compile_.detail["stages"]
    rows = {r["kernel"]: r for r in p.kernels() if r["device"] == device}
    for name in names:
        assert rows[name]["calls"] == 3 and abs(rows[name]["mean"] * 3 - rows[name]["total"]) < 1e-9
    text = str(p)
    assert all(name in text for name in names) and "compile scale_then_sum on " + device in text

    path = tmp_path / "trace.json"
    p.export_chrome_trace(path)
    trace = json.loads(path.read_text())["traceEvents"]
    spans = [t for t in trace if t["ph"] == "X"]
    assert len(spans) == len(p.events) and all(t["dur"] >= 0 and t["ts"] >= 0 for t in spans)
    assert {t["name"] for t in spans if t["cat"] == "launch"} >= set(names)
    assert any(t["ph"] == "M" and t["args"]["name"] == device for t in trace)


def test_nothing_is_recorded_or_timed_outside_a_profile(rng):
    f = tj.kernel(lambda x: x * 2)
    x = rng.standard_normal(100, dtype=np.float32)
    with tj.profile() as outer:
        with tj.profile() as inner:
            f(x, device="numba")
        f(x, device="numba")
    assert len(inner.launches) == 1 and len(outer.launches) == 2   # every open profile records
    assert not profiler.ACTIVE and not profiler.timing() or debug.requested() >= 2
    f(x, device="numba")
    assert len(outer.launches) == 2 and outer.closed >= outer.launches[-1].end


def test_a_graph_replay_is_one_event(device, rng):
    f = tj.kernel(lambda x: np.tanh(x) + 1)
    x = rng.standard_normal(256, dtype=np.float32)
    with tj.capture() as g:
        f(x, device=device)
    with tj.profile() as p:
        g.replay()
        g.replay()
    replays = [e for e in p.launches if e.name.startswith("graph replay")]
    assert len(replays) == 2 and all(e.device == device for e in replays)
