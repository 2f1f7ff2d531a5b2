"""The public surface around kernels: device discovery and selection, tj.Array, trace/lower/spec,
what a call returns, and the command line. Global default-device changes run in a child process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tracejit as tj
from tracejit.frontend.signature import SYMBOLIC_TRACE_SIZE
from reference import assert_close, run_kernel

UNKNOWN_DEVICE = "no-such-device"


def run_python(*args: str, **env: str) -> subprocess.CompletedProcess:
    """Run a child Python (`python *args`) that imports the same tracejit as this process."""
    child_env = dict(os.environ)
    tracejit_root = str(Path(tj.__file__).resolve().parents[1])
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (tracejit_root, child_env.get("PYTHONPATH")) if p)
    child_env.update(env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=child_env, timeout=300)


# =============================================================================================
# Devices


def test_devices_lists_numba_as_available():
    infos = tj.devices()
    by_name = {info.name: info for info in infos}
    assert "numba" in by_name
    assert by_name["numba"].available is True
    for info in infos:
        assert isinstance(info.name, str) and isinstance(info.available, bool)
        if not info.available:
            assert isinstance(info.reason, str) and info.reason, f"{info.name} is unavailable without a reason"


def test_device_looks_up_numba_by_name():
    assert tj.device("numba").name == "numba"


def test_unknown_device_name_raises_device_error_naming_it():
    with pytest.raises(tj.DeviceError, match=UNKNOWN_DEVICE):
        tj.device(UNKNOWN_DEVICE)


def test_call_on_unknown_device_raises_device_error():
    with pytest.raises(tj.DeviceError, match=UNKNOWN_DEVICE):
        tj.kernel(lambda x: x + 1.0)(np.ones(3, np.float32), device=UNKNOWN_DEVICE)


@pytest.mark.parametrize("name", [info.name for info in tj.devices() if not info.available] or ["(none)"])
def test_call_on_unavailable_device_raises_device_error(name):
    if name == "(none)":
        pytest.skip("every device is available here")
    with pytest.raises(tj.DeviceError, match=name):
        tj.kernel(lambda x: x + 1.0)(np.ones(3, np.float32), device=name)


def test_kernel_device_option_is_used_when_the_call_names_none():
    @tj.kernel(device="numba")
    def double(x):
        return x * 2.0

    x = np.arange(4, dtype=np.float32)
    result = double(x)
    assert isinstance(result, np.ndarray)
    assert_close(result, x * 2.0)


def test_set_default_device_is_used_when_a_call_names_none():
    child = run_python("-c", textwrap.dedent("""
        import numpy as np
        import tracejit as tj
        tj.set_default_device("numba")
        double = tj.kernel(lambda x: x * 2.0)
        result = double(np.arange(4, dtype=np.float32))
        assert isinstance(result, np.ndarray), type(result)
        assert result.tolist() == [0.0, 2.0, 4.0, 6.0], result
        try:
            tj.set_default_device("no-such-device")
        except tj.DeviceError as error:
            print("rejected:", error)
        assert double(np.ones(2, np.float32)).tolist() == [2.0, 2.0]  # numba is still the default
        print("ok")
    """))
    assert child.returncode == 0, child.stderr
    assert "rejected: " in child.stdout and UNKNOWN_DEVICE in child.stdout
    assert "ok" in child.stdout


def test_tracejit_device_environment_variable_selects_the_default(monkeypatch):
    monkeypatch.setenv("TRACEJIT_DEVICE", "numba")
    x = np.arange(4, dtype=np.float32)
    result = tj.kernel(lambda x: x + 1.0)(x)
    assert isinstance(result, np.ndarray)
    assert_close(result, x + 1.0)


def test_tracejit_device_environment_variable_naming_an_unknown_device_raises_device_error():
    # A child process, so the variable is seen whether tracejit reads it at import or at call time.
    child = run_python("-c", textwrap.dedent("""
        import numpy as np
        try:
            import tracejit as tj
            tj.kernel(lambda x: x + 1.0)(np.ones(3, np.float32))
        except Exception as error:
            print(type(error).__name__, error)
    """), TRACEJIT_DEVICE=UNKNOWN_DEVICE)
    assert "DeviceError" in child.stdout, child.stdout + child.stderr
    assert UNKNOWN_DEVICE in child.stdout


def test_synchronize_returns(device):
    tj.synchronize()
    tj.synchronize(device=device)


# =============================================================================================
# tj.Array


def test_asarray_holds_the_data_with_shape_and_dtype():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    array = tj.asarray(x)
    assert tuple(array.shape) == (3, 4)
    assert array.dtype == np.float32
    np.testing.assert_array_equal(array.numpy(), x)
    np.testing.assert_array_equal(np.asarray(array), x)


def test_kernel_accepts_tj_array_arguments(device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    @tj.kernel
    def affine(x):
        return x * 2.0 + 1.0

    assert_close(np.asarray(run_kernel(affine, tj.asarray(x, device=device), device=device)), x * 2.0 + 1.0)


# =============================================================================================
# What a call returns on numba


def test_numba_call_returns_numpy_arrays():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    single = tj.kernel(lambda x: x + 1.0)(x, device="numba")
    assert isinstance(single, np.ndarray)
    several = tj.kernel(lambda x: (x + 1.0, x.sum()))(x, device="numba")
    assert isinstance(several, tuple) and len(several) == 2
    assert all(isinstance(out, np.ndarray) for out in several)
    assert several[1].shape == ()


# =============================================================================================
# trace, lower, spec


def test_trace_prints_the_graph_with_op_names_and_compiles_nothing():
    @tj.kernel
    def program(x, y):
        return np.sqrt(np.exp(x) * y) + np.tanh(x).sum(axis=1, keepdims=True)

    x = np.ones((4, 8), np.float32)
    text = str(program.trace(x, x))
    for op in ("exp", "sqrt", "tanh"):
        assert op in text.lower(), text
    assert program.cache_info()["compiles"] == 0
    assert str(program.trace(x, x)) == text  # the printed form is canonical


def test_spec_stands_in_for_an_array_in_trace_and_lower(device):
    @tj.kernel
    def program(x):
        return np.exp(x) + 1.0

    spec = tj.spec((4, 8), np.float32)
    assert "exp" in str(program.trace(spec)).lower()
    plan = program.lower(spec, device=device)
    assert len(plan.kernels) >= 1
    for kernel in plan.kernels:
        assert isinstance(kernel.name, str) and kernel.name
        assert isinstance(kernel.source, str) and kernel.source.strip()


def test_spec_accepts_a_dtype_name():
    text = str(tj.kernel(lambda x: np.tanh(x)).trace(tj.spec((3,), "float64")))
    assert "tanh" in text.lower()


# =============================================================================================
# Command line


def test_command_line_info_lists_numba():
    child = run_python("-m", "tracejit", "info")
    assert child.returncode == 0, child.stderr
    assert "numba" in child.stdout



@tj.kernel
def _scaled_rows(a, axis=-1, eps=1e-3):
    return a / (np.abs(a).sum(axis=axis, keepdims=True) + eps)


@tj.kernel
def _recorded_rows(a, axis=-1, eps=1e-3):   # (its own kernel: a call with axis= specialises _scaled_rows on it)
    return a / (np.abs(a).sum(axis=axis, keepdims=True) + eps)


def test_a_left_out_default_is_a_constant_of_the_trace_so_it_can_be_an_axis(device):
    """`def zscore(a, axis=0)` decorated unchanged: a parameter the caller leaves out takes its default
    as a plain Python value (like a static argument), a value passed for it stays a runtime scalar, and
    one passed where the code needs a number (an axis) specialises the kernel on it."""
    x = np.arange(1.0, 13.0).reshape(3, 4).astype(np.float32)
    assert_close(run_kernel(_scaled_rows, x, device=device), x / (np.abs(x).sum(axis=-1, keepdims=True) + 1e-3))
    assert_close(run_kernel(_scaled_rows, x, eps=0.5, device=device),
                 x / (np.abs(x).sum(axis=-1, keepdims=True) + 0.5))
    assert_close(run_kernel(_scaled_rows, x, 0, device=device), x / (np.abs(x).sum(axis=0, keepdims=True) + 1e-3))


def test_record_lists_only_the_arguments_the_call_passed(tmp_path, monkeypatch):
    import json
    path = tmp_path / "manifest.jsonl"
    monkeypatch.setenv("TRACEJIT_RECORD", str(path))
    x = np.ones((2, 3), np.float32)
    _recorded_rows.lower(x)      # a fresh signature for this process's record
    _recorded_rows.lower(x, eps=0.25)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert {(tuple(e["args"]), tuple(e["static"])) for e in entries} >= {(("float32[2,3]",), ()),
                                                                         (("float32[2,3]", "float"), ())}


def test_the_plan_cache_keeps_the_most_recently_used_signatures(monkeypatch):
    """A server seeing ever new shapes kept every plan for ever; now at most TRACEJIT_PLAN_CACHE_SIZE
    per function, the least recently used going first."""
    monkeypatch.setenv("TRACEJIT_PLAN_CACHE_SIZE", "3")
    f = tj.kernel(lambda x: x * 2 + 1)
    xs = [np.arange(n, dtype=np.float32) for n in (3, 4, 5, 6)]
    for x in xs[:3]:
        f(x)
    f(xs[0])                                          # used again: now the most recent
    f(xs[3])                                          # evicts xs[1]'s plan, the least recently used
    assert f.cache_info()["plans"] == 3
    traces = f.cache_info()["traces"]
    for x in (xs[0], xs[2], xs[3]):
        np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert f.cache_info()["traces"] == traces         # all three still there
    np.testing.assert_array_equal(f(xs[1]), xs[1] * 2 + 1)
    assert f.cache_info()["traces"] == traces + 1     # traced again
    monkeypatch.setenv("TRACEJIT_PLAN_CACHE_SIZE", "many")
    with pytest.raises(tj.ArgumentError, match="TRACEJIT_PLAN_CACHE_SIZE"):
        f(np.arange(9, dtype=np.float32))


def test_debug_output_explains_each_recompile_argument_by_argument(caplog):
    caplog.set_level("DEBUG", logger="tracejit")   # TRACEJIT_DEBUG=1's messages, through logging

    @tj.kernel(static=("axis",))
    def f(x, w, axis):
        return (x * w).sum(axis=axis)

    x, w = np.ones((64, 8), np.float32), np.ones(8, np.float32)
    calls = [((x, w, 1), None),
             ((np.ones((65, 8), np.float32), w, 1), "x: shape[0] 64 -> 65"),
             ((x.astype(np.float64), w, 1), "x: dtype float32 -> float64"),
             ((x, w, 0), "axis (static): 1 -> 0"),
             ((np.ones((8, 64), np.float32).T, w, 1), "x: strides (8, 1) -> (1, 64) (in elements)"),
             ((x, 2.0, 1), "w: a float32 array -> a Python float")]
    for args, why in calls:
        caplog.clear()
        f(*args)
        line = next(r.getMessage() for r in caplog.records if "kernel(s) for numba" in r.getMessage())
        assert (why is None and "recompiled" not in line) or line.endswith(f"recompiled: {why}"), line
    caplog.clear()
    f(np.ones((66, 8), np.float32), w, 1)   # x's first axis is symbolic now: a new size compiles nothing
    line = next(r.getMessage() for r in caplog.records if "kernel(s) for numba" in r.getMessage())
    assert re.search(r"retraced \(nothing compiled\): x: shape\[0\] 6[45] -> 66$", line), line


def test_dynamic_false_specialises_and_bad_dynamic_values_name_what_is_wrong():
    f = tj.kernel(lambda x: x + 1, dynamic=False)
    np.testing.assert_array_equal(f(np.arange(3.0)), np.arange(3.0) + 1)
    with pytest.raises(tj.UnsupportedError, match="dynamic='yes'"):
        tj.kernel(lambda x: x + 1, dynamic="yes")
    with pytest.raises(tj.ArgumentError, match="'y' is not a parameter"):
        tj.kernel(lambda x: x + 1, dynamic={"y": (0,)})
    with pytest.raises(tj.ArgumentError, match="'axis' is a static parameter"):
        tj.kernel(lambda x, axis: x.sum(axis), static="axis", dynamic={"axis": 0})
    with pytest.raises(tj.ArgumentError, match="give an axis or a tuple of axes"):
        tj.kernel(lambda x: x + 1, dynamic={"x": "rows"})
    g = tj.kernel(lambda x, s: x * s, dynamic={"x": (0, 2)})
    with pytest.raises(tj.ArgumentError, match="axis 2 is out of range for 'x', an array of 2 dimension"):
        g(np.ones((3, 4)), 2.0)
    with pytest.raises(tj.ArgumentError, match="'s' is not an array"):
        tj.kernel(lambda x, s: x * s, dynamic={"s": 0})(np.ones(3), 2.0)



def test_a_string_in_a_spec_shape_names_a_symbolic_dimension_and_a_name_is_one_size():
    s = tj.spec(("n", 1024), "float32")          # n rows of 1024, traced at a typical n
    assert s.shape == (SYMBOLIC_TRACE_SIZE, 1024) and s.names == ("n", None)
    s = tj.spec((("n", 4096), 64), "float32")    # the size to trace at given
    assert s.shape == (4096, 64) and s.names == ("n", None)
    assert tj.spec("n", "float32").shape == (SYMBOLIC_TRACE_SIZE,)
    with pytest.raises(tj.ArgumentError, match="a symbolic dimension is a name"):
        tj.spec((("n", 4, 5),), "float32")
    with pytest.raises(tj.ArgumentError, match="leave strides out"):
        tj.spec(("n", 2), "float32", strides=(1, 4))
    f = tj.kernel(lambda x, y: x + y)
    with pytest.raises(tj.ArgumentError, match="'n' is 8 in one tj.spec and 9 in another"):
        f.lower(tj.spec((("n", 8),), "float32"), tj.spec((("n", 9),), "float32"), device="numba")
    from tracejit.frontend.manifest import parse_arg
    assert parse_arg("float32[n=4096, 1024]") == tj.spec((("n", 4096), 1024), "float32")
    assert parse_arg("float32[n,1024]") == tj.spec(("n", 1024), "float32")
    with pytest.raises(tj.ArgumentError, match="float32\\[n,1024\\] for a symbolic dimension"):
        parse_arg("float32[n=, 1024]")


@pytest.mark.parametrize("shape", [(2.5, 3), (-1, 4), (True, 2), (4, None)])
def test_spec_dimensions_are_whole_numbers(shape):
    """int() would have turned 2.5 into 2 and made a spec of another shape than the one asked for."""
    with pytest.raises(tj.ArgumentError, match="whole number of elements"):
        tj.spec(shape, "float32")
    assert tj.spec((4, np.int64(3)), "float32").shape == (4, 3)


def test_the_hot_paths_generated_key_equals_the_general_one():
    """Kernel.__call__ keys plans with a key function generated per number of parameters; a plan found
    by one key and stored by the other would be compiled twice or, worse, confused."""
    f = tj.kernel(lambda x, s, y: x * s + y)
    x, y = np.arange(6.0).reshape(2, 3), tj.asarray(np.ones(3))
    for args in [(x, 2.0, y), (x.T, 2, np.float32(1)), (np.float64(3.0), True, x[:, 1])]:
        assert f._fast_key("numba", *args) == f._key("numba", args)
    assert tj.kernel(lambda: np.arange(3) * 2)()[2] == 4   # no parameters at all


def test_the_generated_call_and_the_general_one_share_plans():
    """A kernel's __call__ is generated for its number of parameters (frontend.hot_path.fast_class); a
    call with keywords, or a miss, takes Kernel._call. Both must find one plan per signature."""
    def f(x, y):
        return x * 2 + y
    k = tj.kernel(f)
    x, y = np.arange(6.0).reshape(2, 3), np.ones(3)
    want = f(x, y)
    for call in (lambda: k(x, y), lambda: k(x, y, device="numba"), lambda: k(x, y=y), lambda: k(y=y, x=x),
                 lambda: k(x, y)):
        got = call()
        assert got.dtype == want.dtype and np.array_equal(got, want)
    info = k.cache_info()
    assert info["compiles"] == 1 and info["plans"] == 1 and info["hits"] == 4, info
    assert repr(k) == "<tracejit.kernel f>" and k.__name__ == "f"
    s = tj.kernel(f, static="y")   # static arguments key by value: the general path
    assert s(x, 2.0)[0, 1] == 4.0 and s(x, 2.0)[0, 1] == 4.0 and s.cache_info()["compiles"] == 1


def test_a_dict_of_settings_keys_the_kernel_by_value_and_is_never_changed(device):
    """conv_param = {"stride": 1, "pad": 1} (CS231n's layers): specialised on its value as a static argument; a
    function that changes it, or a dict holding arrays, is refused with the reason."""
    def scaled(x, p):
        return x * p["scale"] + p["shift"] * len(p["names"])

    f = tj.kernel(scaled)
    x = np.arange(6.0, dtype=np.float32)
    for p in ({"scale": 2.0, "shift": 1.0, "names": ["a"]}, {"scale": 3.0, "shift": 1.0, "names": ["a", "b"]}):
        np.testing.assert_array_equal(np.asarray(f(x, p, device=device)), scaled(x, p))
    assert f.cache_info()["plans"] == 2
    np.testing.assert_array_equal(np.asarray(f(x, {"scale": 2.0, "shift": 1.0, "names": ["a"]}, device=device)),
                                  x * 2 + 1)
    assert f.cache_info()["plans"] == 2   # the same settings: the plan of the first call

    def records(x, p):
        p["total"] = x.sum()
        return x

    given = {"a": 1}
    with pytest.raises(tj.UnsupportedError, match="changes its argument p"):
        tj.kernel(records)(x, given, device=device)
    assert given == {"a": 1}
    with pytest.raises(tj.ArgumentError, match="dict holding ndarray"):
        tj.kernel(lambda x, p: x * p["w"])(x, {"w": x}, device=device)


def test_a_nested_result_keeps_its_shape_with_its_arrays_and_constants(device):
    """`return out, (x, w, b, conv_param)` (CS231n's layers): the arrays are results, the rest comes back as it was,
    a copy each call; complex arrays inside nested tuples and dicts of traced values are refused with the reason."""
    def layer(x, p):
        out = x * p["scale"]
        return out, (x, [out.sum(), None], p), "tag"

    f = tj.kernel(layer)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    p = {"scale": 2.0}
    out, (x_back, (total, nothing), p_back), tag = f(x, p, device=device)
    np.testing.assert_array_equal(np.asarray(out), x * 2)
    np.testing.assert_array_equal(np.asarray(x_back), x)
    assert float(np.asarray(total)) == float((x * 2).sum()) and nothing is None and tag == "tag"
    assert p_back == p and p_back is not p
    again = f(x, p, device=device)
    assert again[1][2] is not p_back and isinstance(again[1][1], list)
    with pytest.raises(tj.TraceError, match="dict of traced values"):
        tj.kernel(lambda x: (x, {"y": x * 2}))(x, device=device)
    if device == "numba":
        with pytest.raises(tj.UnsupportedError, match="complex arrays inside nested tuples"):
            tj.kernel(lambda x: (x, (x * 1j,)))(x, device=device)
