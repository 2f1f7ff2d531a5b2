"""@tj.kernel(autotune=True) and tj.tune(f, *args): a device's layout choices timed on the caller's arguments, the
fastest kept in the disk cache and read by later processes (frontend/autotune.py, runtime/choices.py)."""
import json
import warnings

import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import CacheWarning
from tracejit.frontend import autotune
from tracejit.runtime import choices


@pytest.fixture
def records(monkeypatch, tmp_path):
    """Tuning records under tmp_path (the kernels' own disk cache stays shared), timing cut to a few calls."""
    monkeypatch.setattr(autotune, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(autotune, "SECONDS", 0.05)
    monkeypatch.setattr(autotune, "ROUNDS", 1)
    return tmp_path / "tuning" / "kernels"


def transpose_add(x, y):
    return x.T + y


def softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def heat(u, steps, nu):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + nu * (u[2:] - 2 * u[1:-1] + u[:-2])


def heat_numpy(u, steps, nu):
    u = u.copy()
    heat(u, steps, nu)
    return u


def test_autotune_on_every_device(records, device, rng):
    """Results as NumPy's, on every device, whatever choice won; one record per signature."""
    x = rng.standard_normal((96, 80)).astype(np.float32)
    y = rng.standard_normal((80, 96)).astype(np.float32)
    f = tj.kernel(autotune=True)(transpose_add)
    np.testing.assert_array_equal(np.asarray(f(x, y, device=device)), x.T + y)
    g = tj.kernel(autotune=True)(softmax_rows)
    np.testing.assert_allclose(np.asarray(g(x, device=device)), softmax_rows(x), rtol=2e-6, atol=1e-7)
    assert len(list(records.glob("*.json"))) == 2
    record = json.loads(next(records.glob("*.json")).read_text())
    assert record["device"] == tj.device(device).name and "defaults" in record["milliseconds"]


def test_an_assigning_procedure_runs_once_for_the_caller(records, device, rng):
    """The candidates run on copies: the caller's array takes exactly the call's steps, once."""
    u = rng.random(4099).astype(np.float32)
    expected = heat_numpy(u, 7, np.float32(0.1))
    tuned = tj.kernel(autotune=True)(heat)
    assert tuned(u, 7, np.float32(0.1), device=device) is None
    np.testing.assert_allclose(u, expected, rtol=1e-6)


def test_tune_reports_and_keeps_the_caller_arrays(records, rng):
    u = rng.random(70_000)
    before = u.copy()
    f = tj.kernel(heat)
    report = tj.tune(f, u, 5, 0.1, device="numba")
    np.testing.assert_array_equal(u, before)
    assert isinstance(report, tj.Tuning) and report.device == "numba"
    assert report.best in report.times and "defaults" in report.times
    assert report.speedup >= 1.0 and report.path is not None and report.path.exists()
    assert "defaults" in str(report)
    f(u, 5, 0.1, device="numba")  # compiled with the kept choice
    np.testing.assert_allclose(u, heat_numpy(before, 5, 0.1))


def test_a_later_process_reads_the_record_without_timing(records, monkeypatch, rng):
    """A record written by an earlier tuning (here: made to hold a transpose tile the defaults do not use) is
    compiled with at once; nothing is timed."""
    x, y = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
    first = tj.kernel(autotune=True)(transpose_add)
    first(x, y)
    (path,) = records.glob("*.json")
    record = json.loads(path.read_text())
    chosen = choices.Choice(layout=(("transpose_tiles", ((16, 16),) * 4),))
    record["choice"] = chosen.to_json()
    path.write_text(json.dumps(record))

    def never(*args, **kwargs):
        raise AssertionError("timed again")

    monkeypatch.setattr(autotune, "_measure", never)
    later = tj.kernel(autotune=True)(transpose_add)  # (a new kernel object: what a later process has)
    np.testing.assert_array_equal(later(x, y), x.T + y)
    default = tj.kernel(transpose_add).lower(x, y).kernels[0].source
    with choices.applied(chosen):
        expected = tj.kernel(transpose_add).lower(x, y).kernels[0].source
    assert later.lower(x, y).kernels[0].source == expected != default


def test_unreadable_record_warns_and_tunes_again(records, rng):
    x, y = rng.standard_normal((32, 48)), rng.standard_normal((48, 32))
    tj.kernel(autotune=True)(transpose_add)(x, y)
    (path,) = records.glob("*.json")
    path.write_text("{not json")
    with pytest.warns(CacheWarning, match="unreadable"):
        out = tj.kernel(autotune=True)(transpose_add)(x, y)
    np.testing.assert_array_equal(out, x.T + y)
    json.loads(path.read_text())  # written again


def test_a_candidate_that_fails_or_differs_is_left_out_with_a_warning(records, monkeypatch, rng):
    dev = tj.device("numba")
    broken = choices.Choice(layout=(("no_such_field", 1),))
    other = choices.Choice(parallel_min_work=choices.SERIAL)
    monkeypatch.setattr(type(dev), "tuning_choices", lambda self: [broken, other])
    real, calls = autotune._values, []

    def values(result, copies):  # the candidate after the defaults (the serial one) made to compute other values
        calls.append(1)
        return real(result, copies) if len(calls) == 1 else [v + 1 for v in real(result, copies)]

    monkeypatch.setattr(autotune, "_values", values)
    x = rng.standard_normal(70_000)
    f = tj.kernel(lambda x: x * 2.0 + 1.0)
    with pytest.warns(tj.TuningWarning) as caught:
        report = tj.tune(f, x)
    messages = " ".join(str(w.message) for w in caught)
    assert "no_such_field" in messages and "other values" in messages
    assert report.best == "defaults" and set(report.times) == {"defaults"}
    assert set(report.skipped) == {str(broken), str(other)}
    np.testing.assert_array_equal(f(x), x * 2.0 + 1.0)


def test_lower_uses_a_record_but_never_times(records, monkeypatch, rng):
    monkeypatch.setattr(autotune, "_measure", lambda *a, **k: pytest.fail("timed while lowering"))
    x = rng.standard_normal((16, 16))
    plan = tj.kernel(autotune=True)(transpose_add).lower(x, x)
    assert plan.kernels and not list(records.glob("*.json"))


def test_choices_apply_to_this_thread_only():
    dev = tj.device("numba")
    choice = choices.Choice(layout=(("transpose_tiles", ((8, 8),) * 4),))
    seen = []
    import threading

    with choices.applied(choice):
        assert choices.layout_of(dev).transpose_tiles == ((8, 8),) * 4
        t = threading.Thread(target=lambda: seen.append(choices.layout_of(dev).transpose_tiles))
        t.start()
        t.join()
    assert seen == [dev.layout.transpose_tiles] and choices.layout_of(dev) is dev.layout


def test_choice_json_round_trip_and_refusals():
    for c in (choices.DEFAULT, choices.Choice(layout=(("transpose_tiles", ((8, 4),) * 4),)),
              choices.Choice(options=(("max_local_size", 64),)), choices.Choice(parallel_min_work=4096)):
        assert choices.Choice.from_json(json.loads(json.dumps(c.to_json()))) == c
    with pytest.raises(ValueError):
        choices.Choice.from_json({"parallel_min_work": -1})
    with pytest.raises(tj.UnsupportedError, match="autotune"):
        tj.kernel(autotune="yes")(transpose_add)
    with pytest.raises(tj.ArgumentError, match="@tj.kernel"):
        tj.tune(transpose_add, np.ones((2, 2)), np.ones((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert str(choices.Choice(parallel_min_work=choices.SERIAL)) == "one thread"
