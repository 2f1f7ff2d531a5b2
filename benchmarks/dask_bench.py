"""tracejit kernels inside Dask against Dask with plain NumPy, on the same LocalCluster and the same blocks.

Two worker processes, one thread each; the input (float32, rows in blocks, the last axis whole) is made once
and persisted in the workers' memory, so each timing is the program alone. Each row runs once to warm up
(tracejit compiles on the workers then), then --repeat times; medians, and Dask+NumPy / tracejit (> 1: tracejit
is faster). Outputs as large as the input stay on the workers (persisted, then released); reductions come back.

    python benchmarks/dask_bench.py                   # 512 MiB input; about two minutes on 2 cores
    python benchmarks/dask_bench.py --rows 65536 --repeat 3    # a smoke test
    NUMBA_NUM_THREADS=1 python benchmarks/dask_bench.py        # one tracejit thread per worker (the default: all cores)
"""
import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid

import numpy as np

import tracejit as tj

try:
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait
except ImportError:
    raise SystemExit("needs Dask: pip install -e '.[dask]'") from None


@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def column_stats(x):
    return x.sum(axis=0), x.mean(axis=0), x.var(axis=0)


@tj.kernel
def layernorm_gelu_mean(x):
    z = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    return (0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))).mean(axis=0)


def gelu_numpy(x):
    return np.float32(0.5) * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_gelu_numpy(x):
    z = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + np.float32(1e-5))
    return gelu_numpy(z)


# (name, what, tracejit program, Dask + NumPy program): each takes the Dask array, returns Dask arrays
ROWS = [
    ("gelu", "elementwise GELU", gelu, lambda x: x.map_blocks(gelu_numpy)),
    ("gelu (dask expr)", "the same as Dask array expressions", gelu,
     lambda x: np.float32(0.5) * x * (1 + da.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))),
    ("softmax", "softmax over each row", softmax, lambda x: x.map_blocks(softmax_numpy)),
    ("sum/mean/var", "over the chunked axis 0", column_stats, lambda x: (x.sum(axis=0), x.mean(axis=0), x.var(axis=0))),
    ("layernorm+gelu+mean", "per row, then the mean over rows", layernorm_gelu_mean,
     lambda x: x.map_blocks(layernorm_gelu_numpy).mean(axis=0)),
]


def run(program, x) -> float:
    # a new name for the input each time: results of an earlier run with the same keys are not reused
    x = x.map_blocks(_same, dtype=x.dtype, name=f"input-{uuid.uuid4().hex}")
    out = program(x)
    out = out if isinstance(out, tuple) else (out,)
    t0 = time.perf_counter()
    if out[0].nbytes >= x.nbytes // 2:   # as large as the input: computed and kept on the workers
        kept = dask.persist(*out)
        wait(kept)
        del kept
    else:
        dask.compute(*out)
    return time.perf_counter() - t0


def _same(block):
    return block   # (fused into the program's own task for the block: costs nothing)


def check(ours, theirs, x) -> None:
    a, b = dask.compute(ours(x), theirs(x))
    for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert p.dtype == q.dtype and p.shape == q.shape, (p.dtype, q.dtype, p.shape, q.shape)
        # (float32 column sums of +-1 values cancel: their error is relative to the largest, not to each)
        np.testing.assert_allclose(p, q, rtol=1e-3, atol=1e-5 * max(1.0, float(np.abs(q).max())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1 << 19, help="rows of 256 float32 (default: 512 MiB)")
    parser.add_argument("--block-rows", type=int, default=1 << 15, help="rows per block (default: 32 MiB blocks)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracejit-dask-bench-") as scratch, \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="3GiB",
                         dashboard_address=":0", local_directory=scratch, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        x = da.random.default_rng(1).standard_normal((args.rows, 256), dtype=np.float32,
                                                     chunks=(args.block_rows, 256)).persist()
        wait(x)
        threads = client.run(lambda: os.environ.get("NUMBA_NUM_THREADS") or f"all {os.cpu_count()} cores")
        print(f"input: float32 {x.shape} ({x.nbytes / 2**20:.0f} MiB) in {x.npartitions} blocks; 2 workers x 1 "
              f"thread; tracejit's threads per worker: {next(iter(threads.values()))}; {args.repeat} runs, medians")
        print(f"{'program':<22}{'tracejit':>11}{'Dask+NumPy':>12}{'ratio':>8}   what")
        for name, what, ours, theirs in ROWS:
            check(ours, theirs, x)   # also the warm-up: tracejit compiles on the workers here
            t_ours = statistics.median(run(ours, x) for _ in range(args.repeat))
            t_theirs = statistics.median(run(theirs, x) for _ in range(args.repeat))
            print(f"{name:<22}{t_ours * 1e3:>9.0f}ms{t_theirs * 1e3:>10.0f}ms{t_theirs / t_ours:>7.2f}x   {what}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
