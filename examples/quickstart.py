"""tracejit in five minutes: three NumPy-style functions compiled into fused kernels.

Run with `make demo` (or `python examples/quickstart.py` inside the venv); `--show-source` also prints the
code generated for softmax.
"""
import argparse
import statistics
import time

import numpy as np

import tracejit as tj


# --- Kernels: plain NumPy code; @tj.kernel traces, fuses and compiles it on the first call. ---

@tj.kernel
def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tj.kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


@tj.kernel
def layernorm(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


# --- NumPy references: the same math, run by NumPy itself. ---

def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def gelu_numpy(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def layernorm_numpy(x):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


def median_ms(fn, x, repeats=10):
    """Median wall time of fn(x) in milliseconds, after one warm-up call."""
    fn(x)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(show_source: bool = False):
    print("Devices:")
    for dev in tj.devices():
        status = "available" if dev.available else f"unavailable: {dev.reason}"
        print(f"  {dev.name:<8} {status}")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 1024), dtype=np.float32)

    # lower() compiles without running; each kernel carries its rendered source.
    plan = softmax.lower(x)
    names = ", ".join(k.name for k in plan.kernels)
    print(f"\nsoftmax compiles to {len(plan.kernels)} kernel(s): {names}")
    if show_source:
        for k in plan.kernels:
            print(f"\n--- {k.name} ---\n{k.source}")
    else:
        print("(python examples/quickstart.py --show-source prints their generated code)")

    cases = [
        ("softmax", softmax, softmax_numpy),
        ("gelu", gelu, gelu_numpy),
        ("layernorm", layernorm, layernorm_numpy),
    ]
    print(f"\nfloat32 input of shape {x.shape}; times are medians of 10 calls after a warm-up call\n")
    print(f"{'function':<10} {'kernels':>7} {'tracejit ms':>12} {'numpy ms':>9} {'speed-up':>9}")
    for name, kernel, reference in cases:
        result = kernel(x)  # first call: trace, fuse, compile (or load from the disk cache), run
        np.testing.assert_allclose(result, reference(x), rtol=1e-4, atol=1e-5, err_msg=name)
        n_kernels = len(kernel.lower(x).kernels)
        ours, theirs = median_ms(kernel, x), median_ms(reference, x)
        print(f"{name:<10} {n_kernels:>7} {ours:>12.2f} {theirs:>9.2f} {theirs / ours:>8.1f}x")
    print("\nAll results match NumPy (rtol=1e-4, atol=1e-5).")

    # On any device but numba, results are tj.Arrays that stay on the device: chained calls take them
    # without a copy, and .numpy() brings the last one back.
    if any(d.name == "opencl" and d.available for d in tj.devices()):
        y = layernorm(softmax(x, device="opencl"), device="opencl")
        print(f"\nOn opencl ({tj.device('opencl').description}): layernorm(softmax(x)) stayed on the "
              f"device as {type(y).__name__}{tuple(y.shape)}")
        np.testing.assert_allclose(y.numpy(), layernorm_numpy(softmax_numpy(x)), rtol=1e-3, atol=1e-3)
        print("and matches NumPy.")
    else:
        print("\nopencl is not available here: pip install 'tracejit[opencl]' to run the same kernels on it.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-source", action="store_true", help="print the code generated for softmax")
    main(parser.parse_args().show_source)
