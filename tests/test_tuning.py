"""`python -m tracejit tune`: the numba device's transpose tiles measured once per machine, kept in the cache
directory, read by every numba device that opens after (runtime/numba/tuning.py)."""
import json
import re

import numpy as np
import pytest

import tracejit as tj
from reference import loop_extents
from tracejit.__main__ import main
from tracejit.errors import CacheWarning
from tracejit.frontend import tuning
from tracejit.runtime.numba import tuning as numba_tuning
from tracejit.runtime.numba.device import NumbaDevice
from tracejit.runtime.symbolic_sizes import InMemorySizes, SymbolicSizes

DEFAULTS = NumbaDevice.layout.transpose_tiles


@pytest.fixture
def small_tuning(monkeypatch, tmp_path):
    """Tuning on 64x64 arrays, one call per candidate, its record under tmp_path; the shared numba device's
    tiles restored after."""
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba_tuning, "SHAPE", (64, 64))
    monkeypatch.setattr(numba_tuning, "ROUNDS", 1)
    monkeypatch.setattr(numba_tuning, "CALLS", 1)
    device = tj.device("numba")
    monkeypatch.setattr(device, "layout", device.layout)
    # kernels of x.T + y that other tests compiled here are not the first with their size-free key here
    monkeypatch.setattr(device, "sizes", InMemorySizes(device.sizes.slot_argument, device.sizes.kind))
    return device


def fake_times(monkeypatch, by_tile: dict) -> None:
    """Each candidate's measured time, by tile: the kernels are timed in CANDIDATES order."""
    order = []

    def seconds(f, args, out):
        f(*args, out=out)
        if f not in order:
            order.append(f)
        return by_tile[numba_tuning.CANDIDATES[order.index(f) % len(numba_tuning.CANDIDATES)]]
    monkeypatch.setattr(tuning, "_seconds", seconds)


def transpose_source(x) -> str:
    return tj.kernel(lambda a, b: a.T + b).lower(x, x).kernels[0].source


def test_the_fastest_tile_is_kept_recorded_and_used_by_new_kernels(small_tuning, monkeypatch):
    times = {tile: 1.0 for tile in numba_tuning.CANDIDATES}
    times[(32, 32)] = 0.5
    fake_times(monkeypatch, times)
    record = tuning.tune()
    assert record["transpose_tiles"] == [[32, 32]] * 4
    assert small_tuning.layout.transpose_tiles == ((32, 32),) * 4
    saved = json.loads(numba_tuning.record_path().read_text())
    assert saved["transpose_tiles"] == [[32, 32]] * 4 and saved["machine"] == numba_tuning.fingerprint()
    assert set(saved["milliseconds"]) == {"uint8", "int16", "float32", "float64"}
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    assert 32 in loop_extents(transpose_source(x))
    assert NumbaDevice().layout.transpose_tiles == ((32, 32),) * 4   # a device opened later reads the record
    np.testing.assert_array_equal(tj.kernel(lambda a, b: a.T + b)(x, x + 1), x.T + x + 1)


def test_a_tile_within_the_margin_of_the_default_leaves_the_default(small_tuning, monkeypatch):
    times = {tile: 1.0 for tile in numba_tuning.CANDIDATES}
    times[(16, 16)] = 0.97   # 3% faster than every other, the defaults included: noise
    fake_times(monkeypatch, times)
    record = tuning.tune()
    assert record["transpose_tiles"] == [list(t) for t in DEFAULTS]


def test_tuning_for_real_checks_every_candidate_and_reports_each_element_size(small_tuning):
    lines = []
    record = tuning.tune(report=lines.append)
    assert len(lines) == 4 and all(f"{r}x{c}" in lines[0] for r, c in numba_tuning.CANDIDATES)
    assert all(tuple(t) in numba_tuning.CANDIDATES for t in record["transpose_tiles"])
    x = np.arange(64 * 48, dtype=np.float64).reshape(64, 48)
    y = np.ones((48, 64))
    np.testing.assert_array_equal(tj.kernel(lambda a, b: a.T + b)(x, y), x.T + y)


def test_an_unreadable_record_warns_and_keeps_the_defaults(small_tuning):
    path = numba_tuning.record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("{not json", json.dumps({"transpose_tiles": [[8, 4]]}),
                 json.dumps({"transpose_tiles": [[8, "4"]] * 4}), json.dumps({"tiles": 1})):
        path.write_text(text)
        with pytest.warns(CacheWarning, match="tuning record .* unreadable.*python -m tracejit tune"):
            assert NumbaDevice().layout.transpose_tiles == DEFAULTS


def test_without_a_record_the_defaults_apply(small_tuning):
    assert not numba_tuning.record_path().exists()
    assert NumbaDevice().layout.transpose_tiles == DEFAULTS


def test_the_record_is_this_machine_s_and_this_compiler_s(small_tuning, monkeypatch):
    here = numba_tuning.record_path()
    other = dict(numba_tuning.fingerprint(), compiler="numba 0.1 llvmlite 0.1 python 3.0")
    assert numba_tuning.record_path(other) != here and here.parent == numba_tuning.record_path(other).parent


def test_the_command_line_tunes_and_says_where_the_record_went(small_tuning, monkeypatch, capsys):
    fake_times(monkeypatch, {tile: 1.0 for tile in numba_tuning.CANDIDATES})
    assert main(["tune"]) == 0
    out = capsys.readouterr().out
    assert "float32 (4 bytes)" in out and str(numba_tuning.record_path()) in out and "kept " in out


def test_the_candidates_stay_specialised_and_leave_no_size_records(small_tuning, monkeypatch):
    """The candidates are one size-free key with other tile extents: compiled on the device's own symbolic
    sizes, every candidate after the first would take its extents as arguments (slower code, timed for
    nothing), and the disk cache would tell later processes to do the same for every x.T + y."""
    remembered = []
    sizes = SymbolicSizes(small_tuning.sizes.slot_argument, "numba-sizes")
    monkeypatch.setattr(sizes, "_remember", lambda *args: remembered.append(args))
    monkeypatch.setattr(sizes, "_remembered", lambda *args: set())
    monkeypatch.setattr(small_tuning, "sizes", sizes)
    sources = []
    real_seconds = tuning._seconds

    def seconds(f, args, out):
        sources.extend(k.source for plan in f._plans.values() for k in plan.kernels)   # what the calls ran
        return real_seconds(f, args, out)
    monkeypatch.setattr(tuning, "_seconds", seconds)
    tuning.tune()
    assert small_tuning.sizes is sizes and not remembered and not sizes._seen
    assert sources and not any(re.search(r"\btj_s\d", source) for source in sources)
