"""The cuda device's launch-shape choices, measured side by side on the GPU at hand: matrix-product tiles
(float32 SIMT tiles, float16 mma.sync tiles), the transposed-read tile of `x.T + y`, the threads a row
reduction's block gets per element, and whether row kernels keep their input in shared memory. Every variant is checked against NumPy before it is timed. The
defaults in tracejit (codegen/simt/tiled.py TILE and MMA_TILE, runtime/cuda/device.py TRANSPOSE_TILES and
GROUP_STRIDE) were chosen with this script on an H200; run it on another GPU to see whether they hold there.

    python benchmarks/gpu_tuning.py [--quick | --smoke] [--only tiles,transpose,rows,kept]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace

import numpy as np

import tracejit as tj
from tracejit.codegen.simt import tiled
from tracejit.codegen.simt.tiled import Tile

FLOAT32_TILES = [Tile(128, 128, 8, 8, 8, 256, run=1), Tile(128, 128, 8, 8, 8, 256), Tile(128, 128, 16, 8, 8, 256),
                 Tile(128, 64, 8, 8, 4, 256), Tile(64, 64, 16, 4, 4, 256)]
# mma tiles: the group's block, the contraction step, each warp's block (m16n8k16 products: rows / 16 by cols / 8)
MMA_TILES = [Tile(128, 128, 32, 64, 64, 128, mma=True), Tile(128, 128, 32, 64, 64, 128, mma=True, double_buffer=False),
             Tile(128, 128, 32, 64, 32, 256, mma=True), Tile(64, 128, 32, 32, 64, 128, mma=True)]
TRANSPOSE_TILES = [(32, 32), (8, 1), (16, 1), (32, 1), (64, 1)]
GROUP_STRIDES = [32, 16, 8, 4, 1]


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def row_sum(x):
    return x.sum(axis=-1)


class Bench:
    def __init__(self, quick: bool, smoke: bool):
        self.dev = tj.device("cuda")
        self.rng = np.random.default_rng(0)
        self.quick, self.smoke = quick or smoke, smoke

    def seconds(self, fn) -> float:
        """Median seconds per call over batches, each ended by a synchronize."""
        fn()
        self.dev.synchronize()
        samples = []
        for _ in range(3 if self.quick else 5):
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            self.dev.synchronize()
            samples.append((time.perf_counter() - t0) / 10)
        return statistics.median(samples)

    def options(self, **changes) -> None:
        """New kernels of this process compile with these layout or render options."""
        c = self.dev.compiler
        layout = {k: v for k, v in changes.items() if hasattr(c.layout, k)}
        render = {k: v for k, v in changes.items() if k not in layout}
        self.dev.layout = c.layout = replace(c.layout, **layout)
        self.dev.options = c.options = replace(c.options, **render)

    def tiles(self) -> None:
        n = 256 if self.smoke else 1024 if self.quick else 4096
        defaults = tiled.TILE, tiled.MMA_TILE
        try:
            for dtype, attr, tiles in ((np.float32, "TILE", FLOAT32_TILES), (np.float16, "MMA_TILE", MMA_TILES)):
                a, b = (self.rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
                da, db = tj.asarray(a, device="cuda"), tj.asarray(b, device="cuda")
                want = a.astype(np.float64) @ b.astype(np.float64)
                for tile in tiles:
                    setattr(tiled, attr, tile)
                    f = tj.kernel(lambda a, b: a @ b)
                    got = f(da, db, device="cuda").numpy().astype(np.float64)
                    np.testing.assert_allclose(got, want, atol=(0.05 if dtype == np.float16 else 1e-3) * np.sqrt(n),
                                               err_msg=str(tile))
                    t = self.seconds(lambda: f(da, db, device="cuda"))
                    rate = 2 * n ** 3 / t / 1e12
                    print(f"matmul {np.dtype(dtype).name} {n}^3  {tile}: {rate:6.1f} TFLOP/s", flush=True)
        finally:
            tiled.TILE, tiled.MMA_TILE = defaults

    def transpose(self) -> None:
        side = 256 if self.smoke else 2048 if self.quick else 8192
        x, y = (self.rng.standard_normal((side, side)).astype(np.float32) for _ in range(2))
        dx, dy = tj.asarray(x, device="cuda"), tj.asarray(y, device="cuda")
        default = self.dev.compiler.layout.transpose_tiles
        try:
            for tile in TRANSPOSE_TILES:
                self.options(transpose_tiles=(tile,) * 4)
                f = tj.kernel(lambda x, y: x.T + y)
                np.testing.assert_array_equal(f(dx, dy, device="cuda").numpy(), x.T + y)
                t = self.seconds(lambda: f(dx, dy, device="cuda"))
                print(f"x.T + y {side}^2  tile {tile}: {3 * x.nbytes / t / 1e9:6.0f} GB/s", flush=True)
        finally:
            self.options(transpose_tiles=default)

    def rows(self) -> None:
        shapes = (((16, 1024), (4, 4096)) if self.smoke else ((4096, 1024), (1024, 4096)) if self.quick
                  else ((65536, 1024), (16384, 4096), (262144, 256)))
        default = self.dev.compiler.options.group_stride
        try:
            for rows, n in shapes:
                host = self.rng.standard_normal((rows, n)).astype(np.float32)
                x = tj.asarray(host, device="cuda")
                for name, fn, passes in (("softmax", softmax, 2), ("layernorm", layernorm, 2), ("row sum", row_sum, 1)):
                    cells = []
                    for stride in GROUP_STRIDES:
                        self.options(group_stride=stride)
                        k = tj.kernel(fn)
                        np.testing.assert_allclose(k(x, device="cuda").numpy(), fn(host.astype(np.float64)),
                                                   rtol=1e-4, atol=1e-4, err_msg=f"{name}, stride {stride}")
                        threads = k.lower(x, device="cuda").kernels[0].launch.local_size
                        gbs = host.nbytes * passes / self.seconds(lambda: k(x, device="cuda")) / 1e9
                        cells.append(f"{stride}:{threads}:{gbs:.0f}")
                    print(f"{name:<9} {rows}x{n:<5}  GB/s by elements per thread:threads  " + "  ".join(cells),
                          flush=True)
        finally:
            self.options(group_stride=default)

    def kept(self) -> None:
        """Row kernels keeping the row their first reduction reads in shared memory for the loops after it
        (LayoutOptions.keep_inputs_min), against reading it from global memory again."""
        shapes = (((16, 1024),) if self.smoke else ((4096, 1024), (1024, 4096)) if self.quick
                  else ((65536, 1024), (16384, 4096), (262144, 256), (8192, 8192)))
        default = self.dev.compiler.layout.keep_inputs_min
        try:
            for rows, n in shapes:
                host = self.rng.standard_normal((rows, n)).astype(np.float32)
                x = tj.asarray(host, device="cuda")
                for name, fn in (("softmax", softmax), ("layernorm", layernorm)):
                    cells = []
                    for keep in (default, None):
                        self.options(keep_inputs_min=keep)
                        k = tj.kernel(fn)
                        np.testing.assert_allclose(k(x, device="cuda").numpy(), fn(host.astype(np.float64)),
                                                   rtol=1e-4, atol=1e-4, err_msg=f"{name}, keep {keep}")
                        gbs = host.nbytes * 2 / self.seconds(lambda: k(x, device="cuda")) / 1e9
                        cells.append(f"{'kept' if keep else 'read again'}: {gbs:.0f}")
                    print(f"{name:<9} {rows}x{n:<5}  GB/s  " + "  ".join(cells), flush=True)
        finally:
            self.options(keep_inputs_min=default)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    ap.add_argument("--only", default="tiles,transpose,rows,kept", help="which of tiles, transpose, rows, kept to run")
    args = ap.parse_args()
    info = {i.name: i for i in tj.devices()}["cuda"]
    if not info.available:
        sys.exit(f"no CUDA GPU: {info.reason}")
    bench = Bench(args.quick, args.smoke)
    print(f"cuda: {bench.dev.description}")
    for part in args.only.split(","):
        getattr(bench, part.strip())()


if __name__ == "__main__":
    main()
