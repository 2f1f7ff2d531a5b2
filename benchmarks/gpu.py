"""GPU benchmark for the cuda device: memory bandwidth of GELU, softmax, layernorm, a full sum and x.T + y,
the arithmetic rate of float32 and float16 matrix products, each against PyTorch on the same GPU in the
same run, and the dispatch cost of one launch (eager call, and per kernel in a captured graph's replay).

Inputs are already on the GPU; every figure is a median of batches timed with a synchronize at the end
of each batch. Results are checked against NumPy first. Needs a CUDA GPU; torch is optional (its
column is then empty). See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tracejit as tj

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels import gelu, layernorm, matmul, softmax, total, transpose_add  # noqa: E402  (the CPU table's kernels)
from models import MODELS  # noqa: E402  (the CPU table's model rows: NumPy transformer layers, unchanged)


@tj.kernel
def tiny(x):
    return x * 2 + 1


def gelu_numpy(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def softmax_numpy(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layernorm_numpy(x):
    x = x.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


def matmul_numpy(a, b):
    return a.astype(np.float32) @ b.astype(np.float32)


def torch_versions():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    f = torch.nn.functional
    return {
        "gelu": lambda x: f.gelu(x, approximate="tanh"),
        "softmax": lambda x: torch.softmax(x, -1),
        "layernorm": lambda x: f.layer_norm(x, x.shape[-1:], eps=1e-5),
        "sum": lambda x: x.sum(),
        "transpose_add": lambda x, y: x.T + y,
        "matmul": torch.matmul,
        "matmul_f16": torch.matmul,
    }


def timed(fn, sync, batch: int, repeats: int) -> float:
    """Median seconds per call over `repeats` batches of `batch` calls."""
    fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / batch)
    return statistics.median(samples)


def model_rows(dev, rng, batch: int, repeats: int) -> list[dict]:
    """The CPU table's model rows (picoGPT's linear, FFN and block, llama3.np's block, 64 tokens) on the GPU,
    decorated unchanged, against torch eager on the same GPU: its float32 port, and where the NumPy code
    computes in float64 (picoGPT's float64 scalars), torch computing those dtypes ("torch_np")."""
    try:
        import torch
        import torch_peers
    except ImportError:
        torch = None
    if torch is not None and not torch.cuda.is_available():
        torch = None
    rows = []
    print(f"\n{'model':<14} {'tracejit':>10} {'torch':>10} {'ratio':>7} {'torch_np':>10} {'ratio':>7}")
    for m in MODELS:
        hosts = m.inputs(rng)
        kernel = tj.kernel(m.function, static=tuple(m.static))
        xs = [tj.asarray(h, device="cuda") for h in hosts]
        got, expected = kernel(*xs, **m.static, device="cuda").numpy(), m.function(*hosts, **m.static)
        assert got.dtype == expected.dtype, (m.name, got.dtype, expected.dtype)
        np.testing.assert_allclose(got, expected, rtol=2e-3, atol=2e-3, err_msg=m.name)
        ours = timed(lambda: kernel(*xs, **m.static, device="cuda"), dev.synchronize, batch, repeats)
        theirs = {}
        if torch is not None:
            fn, convert = torch_peers.PEERS[m.name]
            ts = [t.cuda() for t in convert(*hosts)]
            peers = {"torch": fn, "torch_np": torch_peers.NUMPY_DTYPES.get(m.name)}
            for column, peer in peers.items():
                if peer is not None:
                    theirs[column] = timed(lambda: peer(*ts, **m.static), torch.cuda.synchronize, batch, repeats)
        ratio = lambda c: f"{theirs[c] / ours:6.2f}x" if c in theirs else "      -"
        ms = lambda c: f"{theirs[c] * 1e3:8.3f}ms" if c in theirs else "         -"
        print(f"{m.name:<14} {ours * 1e3:8.3f}ms {ms('torch')} {ratio('torch')} {ms('torch_np')} {ratio('torch_np')}")
        rows.append({"case": m.name, "dtype": str(expected.dtype), "tracejit_ms": ours * 1e3,
                     **{f"{c}_ms": t * 1e3 for c, t in theirs.items()}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 2 repetitions: checks the script, measures nothing")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if not {i.name: i for i in tj.devices()}["cuda"].available:
        sys.exit(f"no CUDA GPU: {({i.name: i for i in tj.devices()}['cuda']).reason}")
    dev = tj.device("cuda")
    big = 1 << (16 if args.smoke else 24 if args.quick else 28)    # elements of the 1-D cases
    rows = 1 << (6 if args.smoke else 12 if args.quick else 16)    # rows of 1024 for the row cases
    repeats, batch = (2, 2) if args.smoke else (5, 10) if args.quick else (15, 50)
    rng = np.random.default_rng(0)
    torch_fns = torch_versions()
    import_torch = torch_fns is not None
    if import_torch:
        import torch
    side = 1 << (8 if args.smoke else 12 if args.quick else 13)    # x.T + y is side x side
    mm = 256 if args.smoke else 2048 if args.quick else 4096         # matrix products are mm^3
    # (name, kernel, input shapes, dtype, NumPy reference, bytes moved or None, multiply-adds or None)
    cases = [("gelu", gelu, [(big,)], np.float32, gelu_numpy, 2, None),
             ("softmax", softmax, [(rows, 1024)], np.float32, softmax_numpy, 2, None),
             ("layernorm", layernorm, [(rows, 1024)], np.float32, layernorm_numpy, 2, None),
             ("sum", total, [(big,)], np.float32, np.sum, 1, None),
             ("transpose_add", transpose_add, [(side, side)] * 2, np.float32, lambda x, y: x.T + y, 3, None),
             ("matmul", matmul, [(mm, mm)] * 2, np.float32, matmul_numpy, None, mm ** 3),
             ("matmul_f16", matmul, [(mm, mm)] * 2, np.float16, matmul_numpy, None, mm ** 3)]
    results = []
    print(f"cuda: {dev.description}; torch: {torch.__version__ if import_torch else 'not installed'}")
    print(f"{'case':<14} {'shape':<14} {'tracejit':>10} {'rate':>12} {'torch':>10} {'rate':>12} {'ratio':>7}")
    for name, kernel, shapes, dtype, reference, passes, madds in cases:
        hosts = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
        xs = [tj.asarray(h, device="cuda") for h in hosts]
        got = kernel(*xs, device="cuda").numpy()
        expected = reference(*hosts)
        scale = np.sqrt(hosts[0].size) if name == "sum" else np.sqrt(mm) if madds else 1
        tol = 1e-2 if dtype == np.float16 else 2e-3
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tol, atol=tol * scale, err_msg=name)
        ours = timed(lambda: kernel(*xs, device="cuda"), dev.synchronize, batch, repeats)
        theirs = None
        if import_torch:
            ts = [torch.from_numpy(h).cuda() for h in hosts]
            theirs = timed(lambda: torch_fns[name](*ts), torch.cuda.synchronize, batch, repeats)
        if madds:
            work, unit = 2 * madds, 1e12     # TFLOP/s
        else:
            work, unit = sum(h.nbytes for h in hosts) * passes / len(hosts), 1e9     # GB/s
        row = {"case": name, "shape": [list(s) for s in shapes], "dtype": np.dtype(dtype).name,
               "unit": "TFLOP/s" if madds else "GB/s", "tracejit_ms": ours * 1e3, "tracejit_rate": work / ours / unit,
               "torch_ms": theirs and theirs * 1e3, "torch_rate": theirs and work / theirs / unit}
        results.append(row)
        ratio = f"{theirs / ours:6.2f}x" if theirs else "-"
        rate = lambda r: f"{r or 0:7.1f} {row['unit']}" if madds else f"{r or 0:7.0f} GB/s"
        print(f"{name:<14} {'x'.join(map(str, shapes[0])):<14} {ours * 1e3:8.3f}ms {rate(row['tracejit_rate']):>12} "
              f"{(theirs or 0) * 1e3:8.3f}ms {rate(row['torch_rate']):>12} {ratio:>7}")
    # dispatch: the cost of one launch of a 16-element kernel, eager and per kernel in a replayed graph
    small = tj.asarray(np.ones(16, np.float32), device="cuda")
    calls = 10 if args.smoke else 1000
    eager = timed(lambda: tiny(small, device="cuda"), dev.synchronize, calls, repeats)
    chain = 10
    with tj.capture() as g:
        y = small
        for _ in range(chain):
            y = tiny(y, device="cuda")
        g.outputs = y
    replay = timed(g.replay, dev.synchronize, max(2, calls // 5), repeats) / chain
    torch_launch = None
    if import_torch:
        ts = torch.ones(16, device="cuda")
        torch_launch = timed(lambda: ts * 2 + 1, torch.cuda.synchronize, calls, repeats) / 2   # two kernels
    print(f"dispatch   16 elements: eager {eager * 1e6:.1f} us/call, replay {replay * 1e6:.2f} us/kernel"
          + (f", torch {torch_launch * 1e6:.1f} us/kernel" if torch_launch else ""))
    results.append({"case": "dispatch", "eager_us": eager * 1e6, "replay_us_per_kernel": replay * 1e6,
                    "torch_us_per_kernel": torch_launch and torch_launch * 1e6})
    results += model_rows(dev, rng, batch, repeats)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": platform.node(), "gpu": dev.description, "results": results},
                                        indent=1))


if __name__ == "__main__":
    main()
