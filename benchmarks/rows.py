"""Row reductions at every row length: softmax, layernorm and rmsnorm over the last axis of 4M float32
elements, as rows of 8 up to 16384, on the numba device against hand-written Numba and torch eager.

A bench.py row shows one shape (4096x1024); real programs reduce rows of every length (attention over
a few keys, head sizes of 64, hidden sizes of 768-4096, vocabularies). Columns, each checked against
NumPy (values and dtype) before it is timed, then timed in alternating rounds (medians, ms):

- specialised: @tj.kernel(dynamic=False), every size a constant of the code: one shape's first compile.
- symbolic: @tj.kernel(dynamic=True), the row length an argument of the code: what a program that meets
  many row lengths runs after its second one.
- numba: benchmarks/hand_numba.py, a row per prange iteration, float32 accumulators, preallocated output.
- torch: F.softmax, F.layer_norm, F.rms_norm on as many threads (when PyTorch is installed).
- numpy: the NumPy code itself.

    .venv/bin/python benchmarks/rows.py [--widths 8,64,1024] [--programs layernorm] [--rounds 9]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

os.environ.setdefault("TRACEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="tracejit-rows-"))   # compiles of its own

import bench  # noqa: E402  (after the cache directory is chosen: it imports tracejit)
import hand_numba  # noqa: E402

import tracejit as tj  # noqa: E402

torch_peers = bench.torch_peers   # None without PyTorch (pip install -e ".[bench]")
ELEMENTS = 4 << 20


PROGRAMS = {   # name: (the NumPy code of bench.py's row, hand-written Numba(x, out), torch_peers' function)
    "softmax": (bench.softmax.fn, hand_numba.softmax, "softmax"),
    "layernorm": (bench.layernorm.fn, hand_numba.layernorm, "layernorm"),
    "rmsnorm": (bench.rmsnorm.fn, hand_numba.rmsnorm, "rms_norm"),
}


def timed(fn, batch: int) -> float:
    start = time.perf_counter()
    for _ in range(batch):
        fn()
    return (time.perf_counter() - start) / batch


def columns(name: str, x: np.ndarray) -> dict:
    """Each column as a call of no arguments, its result checked against NumPy first."""
    numpy_fn, hand, torch_name = PROGRAMS[name]
    want = numpy_fn(x)
    out = np.empty_like(x)
    fixed, symbolic = tj.kernel(numpy_fn, dynamic=False), tj.kernel(numpy_fn, dynamic=True)
    calls = {"specialised": lambda: fixed(x, device="numba"), "symbolic": lambda: symbolic(x, device="numba"),
             "numba": lambda: hand(x, out) or out}
    if torch_peers is not None:
        t, fn = torch_peers.torch.from_numpy(x), getattr(torch_peers, torch_name)
        calls["torch"] = lambda: fn(t).numpy()
    calls["numpy"] = lambda: numpy_fn(x)
    for column, call in calls.items():
        got = call()
        assert got.dtype == want.dtype, (name, column, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} {column}")
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="8,16,32,64,128,256,768,1024,2048,4096,16384")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--rounds", type=int, default=9)
    opts = parser.parse_args()
    rng = np.random.default_rng(0)
    for name in opts.programs.split(","):
        print(f"\n{name} over the last axis of {ELEMENTS >> 20}M float32 elements (medians, ms; "
              "ratio: the best peer over tracejit's specialised kernel, > 1: tracejit is faster)")
        header = None
        for width in (int(w) for w in opts.widths.split(",")):
            x = rng.standard_normal((ELEMENTS // width, width), dtype=np.float32)
            calls = columns(name, x)
            if header is None:
                header = ["rows x width", *calls, "vs numba", "vs torch"]
                print("".join(f"{h:>14}" for h in header))
            times: dict[str, list[float]] = {c: [] for c in calls}
            batch = max(1, int(0.02 / timed(calls["specialised"], 1)))
            for _ in range(opts.rounds):
                for column, call in calls.items():
                    times[column].append(timed(call, batch))
            ms = {c: 1e3 * statistics.median(v) for c, v in times.items()}
            ratios = [f"{ms[p] / ms['specialised']:.2f}x" if p in ms else "-" for p in ("numba", "torch")]
            cells = [f"{x.shape[0]}x{width}", *(f"{ms[c]:.3f}" for c in calls), *ratios]
            print("".join(f"{c:>14}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
