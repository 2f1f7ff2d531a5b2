"""Kernels over Dask arrays (tracejit[dask]) on a real engine: a LocalCluster of two worker processes (one per
pytest process that runs tests of this file), every result compared with NumPy's, dtype included; warming
every worker; the errors."""
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tracejit as tj
from reference import assert_close

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install -e '.[dask]')")
distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is not installed "
                                                             "(pip install -e '.[dask]')")
import dask  # noqa: E402

# one pytest process runs them all under make test (--dist loadgroup): one cluster of worker processes, not one
# per process competing for CI's two cores
pytestmark = pytest.mark.xdist_group("dask_cluster")

RNG = np.random.default_rng(21)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """Two worker processes, one thread each; they inherit TRACEJIT_CACHE_DIR (conftest: the suite's private
    cache) and so share one disk cache."""
    space = tmp_path_factory.mktemp("dask-worker-space")
    with dask.config.set({"temporary-directory": str(space)}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GiB",
                                           dashboard_address=":0", local_directory=str(space))
        with cluster, distributed.Client(cluster) as c:
            yield c


def blocks(x: np.ndarray, chunks):
    """x as a Dask array whose blocks are arrays of their own, as da.random, zarr or a computation make them
    (from_array's blocks are views into x, with x's strides: one kernel per block shape then, not per family)."""
    return da.from_array(x, chunks=chunks).map_blocks(np.copy, dtype=x.dtype)


def compiles(client) -> int:
    """Kernels compiled so far in every worker (loads from the disk cache do not count)."""
    return sum(client.run(lambda: tj.device("numba").stats()["compiles"]).values())


@tj.kernel
def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def standardize(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def test_elementwise_with_chunks_on_both_axes_maps_over_the_blocks(client):
    x = RNG.standard_normal((300, 200)).astype(np.float32)
    dx = da.from_array(x, chunks=(64, 50))
    y = gelu(dx)
    assert isinstance(y, da.Array) and y.chunks == dx.chunks
    assert_close(y.compute(), 0.5 * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x**3))))


def test_softmax_over_an_unchunked_last_axis_is_one_pass_over_row_blocks(client):
    x = RNG.standard_normal((400, 96)).astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = softmax(da.from_array(x, chunks=(64, 96)))
    assert y.chunks == ((64,) * 6 + (16,), (96,))
    assert_close(y.compute(), e / e.sum(axis=-1, keepdims=True))
    y = softmax(da.from_array(x, chunks=(64, 32)))   # the rows are made whole (small): still one pass
    assert y.chunks == ((64,) * 6 + (16,), (96,))
    assert_close(y.compute(), e / e.sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("name, dtype", [("sum", "int32"), ("prod", "float64"), ("max", "int16"), ("min", "uint8"),
                                         ("mean", "float32"), ("var", "float64"), ("std", "float32")])
def test_each_reduction_over_chunked_axes_gives_numpys_values_and_dtype(client, name, dtype):
    fn = getattr(np, name)
    if dtype == "float64" and name == "prod":
        x = 1.0 + 0.01 * RNG.standard_normal((300, 200))
    elif np.dtype(dtype).kind == "f":
        x = RNG.random((300, 200)).astype(dtype)
    else:
        x = RNG.integers(0, 100, (300, 200)).astype(dtype)
    f = tj.kernel(lambda a: (fn(a), fn(a, axis=0), fn(a, axis=1, keepdims=True), fn(a, axis=(0, 1), keepdims=True)))
    results = dask.compute(*f(blocks(x, (120, 80))))
    expected = tuple(fn(x, axis=a, keepdims=k) for a, k in [(None, False), (0, False), (1, True), ((0, 1), True)])
    assert_close(tuple(results), expected, rtol=1e-5 if dtype == "float32" else None, what=f"np.{name}")


@pytest.mark.parametrize("dtype", ["float16", "int32"])
def test_var_and_std_with_ddof_combine_per_block_moments(client, dtype):
    # (NumPy's float16 var sums in float16: kept small enough not to overflow there)
    x = (RNG.standard_normal((240, 90)) * (0.5 if dtype == "float16" else 30) + 1).astype(dtype)
    f = tj.kernel(lambda a: (np.var(a, ddof=1), np.std(a, axis=0, ddof=1), a.var(axis=1, ddof=2, keepdims=True)))
    got = dask.compute(*f(blocks(x, (60, 45))))
    expected = (np.var(x, ddof=1), np.std(x, axis=0, ddof=1), x.var(axis=1, ddof=2, keepdims=True))
    assert_close(tuple(got), expected, rtol=2e-3 if dtype == "float16" else None)


def test_argmax_and_argmin_give_the_first_global_index_with_ties_and_nan(client):
    ints = RNG.integers(0, 4, (120, 75)).astype(np.int32)   # many ties, across blocks
    floats = RNG.standard_normal((120, 75))
    floats[77, 5] = floats[3, 60] = np.nan                  # NaN wins, the first one in C order
    f = tj.kernel(lambda a: (np.argmax(a), np.argmin(a, axis=0), a.argmax(axis=1, keepdims=True),
                             np.argmin(a, keepdims=True)))
    for x in (ints, floats):
        got = dask.compute(*f(blocks(x, (40, 25))))
        assert_close(tuple(got), (np.argmax(x), np.argmin(x, axis=0), x.argmax(axis=1, keepdims=True),
                                  np.argmin(x, keepdims=True)))


def test_mixed_dask_and_numpy_arguments_broadcast_as_dask_does(client):
    x = RNG.standard_normal((200, 120)).astype(np.float32)
    w = RNG.standard_normal(120).astype(np.float32)        # NumPy, along x's chunked columns
    b = RNG.standard_normal((200, 1)).astype(np.float32)   # NumPy, broadcast along the columns
    f = tj.kernel(lambda a, w, b, s: (a * w + b) * s + a.shape[0])   # (the whole length, in every block)
    y = f(da.from_array(x, chunks=(50, 40)), w, b, 0.5)
    assert y.chunks == ((50,) * 4, (40,) * 3)
    assert_close(y.compute(), (x * w + b) * np.float32(0.5) + 200)


@pytest.mark.skipif("opencl" not in [d.name for d in tj.devices() if d.available], reason="no OpenCL device here")
def test_each_block_runs_on_the_device_the_call_names(client):
    x = RNG.random((256, 64)).astype(np.float32)
    y, s = tj.kernel(lambda a: (a * 2, a.sum(axis=0)))(blocks(x, (64, 64)), device="opencl")
    assert_close(y.compute(), x * 2)
    assert_close(s.compute(), x.sum(axis=0))


def test_a_transpose_of_chunked_axes_pairs_blocks_as_dask_does(client):
    x = RNG.standard_normal((90, 150)).astype(np.float32)
    y = RNG.standard_normal((150, 90)).astype(np.float32)
    f = tj.kernel(lambda a, b: a.T * 2 + b)
    got = f(da.from_array(x, chunks=(30, 50)), da.from_array(y, chunks=(60, 45)))
    assert_close(got.compute(), x.T * 2 + y)


def test_a_contraction_over_a_chunked_axis_sums_block_products_without_rechunking(client):
    x = RNG.standard_normal((120, 300)).astype(np.float64)
    w = RNG.standard_normal((300, 80)).astype(np.float64)
    f = tj.kernel(lambda a, w: np.maximum(a @ w, 0.0))
    got = f(da.from_array(x, chunks=(40, 100)), da.from_array(w, chunks=(100, 80)))
    assert got.chunks[0] == (40, 40, 40)
    assert_close(got.compute(), np.maximum(x @ w, 0.0))


def test_reading_across_a_chunked_axis_rechunks_it_when_small_and_names_it_when_not(client):
    x = RNG.standard_normal((100, 64)).astype(np.float32)
    dx = da.from_array(x, chunks=(25, 16))
    f = tj.kernel(lambda a: np.cumsum(a, axis=1) * 2)
    y = f(dx)   # one block along axis 1 is 6 KiB: merged there, each row block whole
    assert y.chunks == ((25,) * 4, (64,))
    assert_close(y.compute(), np.cumsum(x, axis=1) * 2)
    with dask.config.set({"array.chunk-size": "4KiB"}):
        with pytest.raises(tj.UnsupportedError, match=r"argument 'a' .* axis 1.*np\.cumsum.*a\.rechunk\(\{1: -1"):
            f(dx)


def test_a_reduction_broadcast_back_over_a_tall_chunked_axis_runs_in_two_passes(client):
    x = (RNG.standard_normal((2000, 16)) * 4 + 3).astype(np.float32)
    dx = blocks(x, (250, 16))
    y = standardize(dx)   # rows in one block would leave nothing to run in parallel: mean and std first
    assert y.chunks == dx.chunks
    assert_close(y.compute(), (x - x.mean(axis=0)) / x.std(axis=0), rtol=1e-4, atol=1e-5)


def test_a_kernel_returning_several_outputs_gives_a_tuple_of_dask_arrays(client):
    x = RNG.random((180, 64)).astype(np.float32)
    f = tj.kernel(lambda a: (np.exp(a), np.exp(a).sum(axis=0), np.argmax(a, axis=0)))
    outs = f(blocks(x, (45, 64)))
    assert isinstance(outs, tuple) and len(outs) == 3
    assert_close(tuple(dask.compute(*outs)), (np.exp(x), np.exp(x).sum(axis=0), np.argmax(x, axis=0)))


def test_static_arguments_scalars_and_defaults_pass_through(client):
    @tj.kernel(static=("axis",))
    def normalize(a, axis, eps=1e-6, scale=1.0):
        return a / (a.sum(axis=axis, keepdims=True) + eps) * scale
    x = RNG.random((64, 40))
    got = normalize(da.from_array(x, chunks=(16, 40)), 1, scale=2.0)
    assert_close(got.compute(), x / (x.sum(axis=1, keepdims=True) + 1e-6) * 2.0)


def test_warming_every_worker_leaves_nothing_to_compile(client):
    f = tj.kernel(lambda a: np.tanh(a) * a.mean(axis=1, keepdims=True) + 1.5)
    dx = da.random.default_rng(5).standard_normal((600, 40), chunks=(128, 40)).astype(np.float32)
    report = tj.warm(f, dx, client=client)
    assert report.ok and {r.worker for r in report} == set(client.scheduler_info()["workers"])
    before = compiles(client)
    y = f(dx).compute()
    assert compiles(client) == before
    x = dx.compute()
    assert_close(y, np.tanh(x) * x.mean(axis=1, keepdims=True) + np.float32(1.5))


def test_a_recorded_manifest_warms_every_worker(client, tmp_path, monkeypatch):
    manifest = tmp_path / "signatures.jsonl"
    monkeypatch.setenv("TRACEJIT_RECORD", str(manifest))
    dx = da.random.default_rng(6).random((500, 24), chunks=(100, 24))
    y = standardize(dx)   # the call is recorded (the whole shapes and the blocks), not computed
    monkeypatch.delenv("TRACEJIT_RECORD")
    (entry,) = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert entry["function"] == "test_dask:standardize" and entry["chunks"] == [[[[100, 5]], [[24, 1]]]]
    report = tj.warm(str(manifest), client=client)
    assert report.ok and len({r.worker for r in report}) == 2
    before = compiles(client)
    got = y.compute()
    assert compiles(client) == before
    x = dx.compute()
    assert_close(got, (x - x.mean(axis=0)) / x.std(axis=0))


def test_new_worker_processes_load_the_kernels_from_the_shared_disk_cache(client):
    x = RNG.random((256, 48)).astype(np.float32)
    f = tj.kernel(lambda a: np.sqrt(a).sum(axis=0) * 3)
    f(blocks(x, (64, 48))).compute()
    client.restart()   # fresh processes: nothing in memory, TRACEJIT_CACHE_DIR as before
    got = f(blocks(x, (64, 48))).compute()
    assert compiles(client) == 0
    assert_close(got, np.sqrt(x).sum(axis=0) * 3, rtol=1e-5)


def test_dask_argument_errors_say_what_to_do(client):
    x = da.from_array(RNG.standard_normal((50, 8)), chunks=(10, 8))
    with pytest.raises(tj.ArgumentError, match="compute_chunk_sizes"):
        gelu(x[x[:, 0] > 0])
    with pytest.raises(tj.ArgumentError, match="out="):
        gelu(x, out=np.empty((50, 8)))
    @tj.kernel
    def clip_first_row(a):
        a[0] = 0.0
        return a * 2
    with pytest.raises(tj.UnsupportedError, match="assigns into its argument 'a'.*return the new value"):
        clip_first_row(x)
    weights = RNG.standard_normal(8 * 1024)   # too large to embed: held by the plan, which Dask's blocks cannot use
    with pytest.raises(tj.UnsupportedError, match=r"shape \(8192,\).*pass it to the kernel as an argument"):
        tj.kernel(lambda a: (a[:, :1] * weights).sum(axis=1))(x)


def test_kernels_travel_by_pickle_and_come_back_as_themselves():
    cloudpickle = pytest.importorskip("cloudpickle")
    f = tj.kernel(lambda a: a + 1)   # by value: rebuilt once per process, found again by its token
    assert cloudpickle.loads(cloudpickle.dumps(f)) is f
    assert pickle.loads(pickle.dumps(gelu)) is gelu   # by name: its module's own


def test_importing_tracejit_does_not_import_dask():
    out = subprocess.run([sys.executable, "-c", "import sys, tracejit; print('dask' in sys.modules)"],
                         capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert out.stdout.strip() == "False", out.stderr
