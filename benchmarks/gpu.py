"""GPU benchmark for the cuda device: memory bandwidth of GELU, softmax, layernorm and a full sum, each
against PyTorch on the same GPU in the same run, and the dispatch cost of one launch (eager call, and
per kernel in a captured graph's replay).

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
from bench import gelu, layernorm, softmax, total  # noqa: E402  (the same kernels as the CPU table)


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
    cases = [("gelu", gelu, (big,), gelu_numpy, 2), ("softmax", softmax, (rows, 1024), softmax_numpy, 2),
             ("layernorm", layernorm, (rows, 1024), layernorm_numpy, 2), ("sum", total, (big,), np.sum, 1)]
    results = []
    print(f"cuda: {dev.description}; torch: {torch.__version__ if import_torch else 'not installed'}")
    print(f"{'case':<10} {'shape':<14} {'tracejit':>10} {'GB/s':>8} {'torch':>10} {'GB/s':>8} {'ratio':>7}")
    for name, kernel, shape, reference, passes in cases:
        host = rng.standard_normal(shape).astype(np.float32)
        x = tj.asarray(host, device="cuda")
        got = kernel(x, device="cuda").numpy()
        np.testing.assert_allclose(got, reference(host), rtol=2e-3, atol=2e-3 * (np.sqrt(host.size) if name == "sum" else 1))
        nbytes = host.nbytes * passes      # read once, write once (a sum writes nothing to speak of)
        ours = timed(lambda: kernel(x, device="cuda"), dev.synchronize, batch, repeats)
        theirs = None
        if import_torch:
            t = torch.from_numpy(host).cuda()
            theirs = timed(lambda: torch_fns[name](t), torch.cuda.synchronize, batch, repeats)
        row = {"case": name, "shape": list(shape), "tracejit_ms": ours * 1e3, "tracejit_gbs": nbytes / ours / 1e9,
               "torch_ms": theirs and theirs * 1e3, "torch_gbs": theirs and nbytes / theirs / 1e9}
        results.append(row)
        ratio = f"{theirs / ours:6.2f}x" if theirs else "-"
        print(f"{name:<10} {str(shape):<14} {ours * 1e3:8.3f}ms {row['tracejit_gbs']:8.0f} "
              f"{(theirs or 0) * 1e3:8.3f}ms {row['torch_gbs'] or 0:8.0f} {ratio:>7}")
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
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": platform.node(), "gpu": dev.description, "results": results},
                                        indent=1))


if __name__ == "__main__":
    main()
