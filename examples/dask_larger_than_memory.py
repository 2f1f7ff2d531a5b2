"""A tracejit kernel over a Dask array larger than the memory of the workers that process it.

Two worker processes with 512 MiB each (half of the data each; a worker with Numba loaded takes some 230 MiB of
that itself) work through 1 GiB of float32 made lazily by `da.random` with a fixed seed, in blocks of 16 MiB:

1. one pass, streaming: each block of rows is layer-normalised and put through GELU (rows are whole in
   every block), and the columns' mean, standard deviation and argmax over all rows are reduced across
   blocks. No block outlives its partials, so nothing is spilled.
2. two passes: the columns standardised over all rows, `(x - x.mean(0)) / x.std(0)`, then each column's
   largest z-score. The mean and std over all rows come first, then every block again: Dask keeps the blocks
   between the passes, on disk once memory is full (the spilled bytes are printed).

Each result is checked against the same program written with Dask's own array functions on the same data.
Run with `python examples/dask_larger_than_memory.py` (`pip install -e ".[dask]"`); about a minute on 2 cores.
"""
import logging
import tempfile
import time

import numpy as np

import tracejit as tj

try:
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster
except ImportError:
    raise SystemExit("this example needs Dask: pip install -e '.[dask]'") from None

ROWS, COLUMNS, BLOCK_ROWS = 1 << 20, 256, 1 << 14     # 1 GiB of float32, in blocks of 16 MiB
WORKER_MEMORY = "512MiB"


@tj.kernel
def column_features(x):
    """Per row: layer norm and GELU; per column over all rows: mean, std, and the row of the largest value."""
    mu = x.mean(axis=1, keepdims=True)
    z = (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    g = 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))
    return g.mean(axis=0), g.std(axis=0), np.argmax(g, axis=0)


@tj.kernel
def largest_zscore(x):
    return ((x - x.mean(axis=0)) / x.std(axis=0)).max(axis=0)


def column_features_dask(x):
    """The same program in Dask's array functions (NumPy per block)."""
    mu = x.mean(axis=1, keepdims=True)
    z = (x - mu) / da.sqrt(x.var(axis=1, keepdims=True) + np.float32(1e-5))
    g = np.float32(0.5) * z * (1 + da.tanh(np.float32(0.7978845608) * (z + np.float32(0.044715) * z * z * z)))
    return g.mean(axis=0), g.std(axis=0), da.argmax(g, axis=0)


def largest_zscore_dask(x):
    return ((x - x.mean(axis=0)) / x.std(axis=0)).max(axis=0)


def timed(what, fn):
    t0 = time.perf_counter()
    out = fn()
    print(f"  {what:<22} {time.perf_counter() - t0:6.1f} s")
    return out


def spilled(client) -> int:
    """Bytes the workers have written to disk so far (their "disk-write" metrics)."""
    def written(dask_worker):
        return sum(v for k, v in dask_worker.digests_total.items()
                   if isinstance(k, tuple) and "disk-write" in k and k[-1] == "bytes")
    return int(sum(client.run(written).values()))


def main():
    with tempfile.TemporaryDirectory(prefix="tracejit-dask-") as scratch, \
            dask.config.set({"temporary-directory": scratch}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_MEMORY,
                         dashboard_address=":0", local_directory=scratch,
                         silence_logs=logging.ERROR) as cluster, Client(cluster) as client:   # (pausing, spilling)
        x = da.random.default_rng(2024).standard_normal((ROWS, COLUMNS), dtype=np.float32,
                                                        chunks=(BLOCK_ROWS, COLUMNS))
        print(f"x: {x.nbytes / 2**30:.1f} GiB float32 {x.shape} in {x.npartitions} blocks of "
              f"{BLOCK_ROWS * COLUMNS * 4 / 2**20:.0f} MiB; 2 workers of {WORKER_MEMORY} each")

        print("1. layer norm + GELU per row, then mean/std/argmax per column (one pass)")
        ours = timed("tracejit in Dask", lambda: dask.compute(*column_features(x)))
        theirs = timed("Dask + NumPy", lambda: dask.compute(*column_features_dask(x)))
        for name, a, b in zip(("mean", "std", "argmax"), ours, theirs):
            assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype)
            if name != "argmax":
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
        same = np.mean(ours[2] == theirs[2])   # (two maxima a rounding apart may swap: tanh differs in the last bit)
        assert same > 0.99, same
        print(f"  results agree: mean {ours[0][:3]}, std {ours[1][:3]}, argmax the same row in {same:.0%} of columns")

        print("2. column z-scores over all rows, then each column's largest (two passes)")
        before = spilled(client)
        ours = timed("tracejit in Dask", lambda: largest_zscore(x).compute())
        middle = spilled(client)
        theirs = timed("Dask + NumPy", lambda: largest_zscore_dask(x).compute())
        np.testing.assert_allclose(ours, theirs, rtol=1e-4)
        print(f"  results agree: {ours[:3]}; spilled to disk: tracejit {(middle - before) / 2**20:.0f} MiB, "
              f"Dask + NumPy {(spilled(client) - middle) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
