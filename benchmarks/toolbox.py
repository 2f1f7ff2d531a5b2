"""The scientist's toolbox (issue 48) against NumPy, SciPy and hand-written Numba, same run.

1. Complex elementwise: |z e^{iw} + 0.5j|^2 over complex128 (complex64 on webgpu) arrays: tracejit against NumPy
   and a Numba loop with a preallocated output.
2. An FFT of 2**20 complex values (and a real one, rfft): tracejit's generated Stockham kernels against NumPy's
   pocketfft and scipy.fft (one thread and all cores).
3. A batched solve: 20,000 systems of 8 x 8, np.linalg.solve in a kernel (NumPy's LAPACK on the host on numba,
   generated Gauss-Jordan kernels on the GPU-API devices, with the code around it fused) against NumPy and SciPy
   (scipy.linalg.solve, batched).
4. More of np.linalg on 2,000 stacked matrices of 16 x 16: cholesky, qr, eigh, svd (singular values) in a
   kernel against NumPy's own calls (generated kernels on the GPU-API devices).

Milliseconds per call, tj.benchmark's medians; each result checked against NumPy first."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tracejit as tj  # noqa: E402


def ms(fn, seconds: float, device: str) -> float:
    return tj.benchmark(fn, device=device, seconds=seconds, warmup=seconds / 10).ms


def rotate(z, w):
    return np.abs(z * np.exp(1j * w) + 0.5j) ** 2


def _numba_rotate():
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(fastmath=False)
    def rotate_loop(z, w, out):
        for i in range(z.size):
            v = z[i] * np.exp(1j * w[i]) + 0.5j
            out[i] = v.real * v.real + v.imag * v.imag
        return out

    return rotate_loop


def spectrum(z):
    return np.fft.fft(z)


def real_spectrum(x):
    return np.fft.rfft(x)


def solve_batch(a, b):
    return np.linalg.solve(a + 4 * np.eye(a.shape[-1], dtype=a.dtype), b[..., None])[..., 0] * 2.0


def measure_elementwise(device: str, n: int, seconds: float) -> dict:
    rng = np.random.default_rng(0)
    dt, real = (np.complex64, np.float32) if device in ("webgpu", "metal") else (np.complex128, np.float64)
    z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    w = rng.standard_normal(n).astype(real)
    kernel = tj.kernel(rotate)
    assert np.allclose(np.asarray(kernel(z, w, device=device)), rotate(z, w), rtol=1e-5 if real == np.float32 else 1e-12)
    out = {"tracejit": ms(lambda: kernel(z, w, device=device), seconds, device),
           "numpy": ms(lambda: rotate(z, w), seconds, "numba")}
    loop = _numba_rotate() if device == "numba" else None
    if loop is not None:
        buffer = np.empty(n, real)
        assert np.allclose(loop(z, w, buffer), rotate(z, w), rtol=1e-12)
        out["numba"] = ms(lambda: loop(z, w, buffer), seconds, "numba")
    return out


def measure_fft(device: str, n: int, seconds: float) -> dict:
    import scipy.fft

    rng = np.random.default_rng(1)
    dt, real = (np.complex64, np.float32) if device in ("webgpu", "metal") else (np.complex128, np.float64)
    z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    x = rng.standard_normal(n).astype(real)
    fft, rfft = tj.kernel(spectrum), tj.kernel(real_spectrum)
    tol = 1e-5 if real == np.float32 else 1e-12
    expected = np.fft.fft(z)
    assert np.max(np.abs(np.asarray(fft(z, device=device)) - expected)) <= tol * np.max(np.abs(expected))
    expected = np.fft.rfft(x)
    assert np.max(np.abs(np.asarray(rfft(x, device=device)) - expected)) <= tol * np.max(np.abs(expected))
    return {
        "fft": ms(lambda: fft(z, device=device), seconds, device),
        "numpy fft": ms(lambda: np.fft.fft(z), seconds, "numba"),
        "scipy fft": ms(lambda: scipy.fft.fft(z), seconds, "numba"),
        "scipy fft, all cores": ms(lambda: scipy.fft.fft(z, workers=-1), seconds, "numba"),
        "rfft": ms(lambda: rfft(x, device=device), seconds, device),
        "numpy rfft": ms(lambda: np.fft.rfft(x), seconds, "numba"),
        "scipy rfft": ms(lambda: scipy.fft.rfft(x), seconds, "numba"),
        "kernels": len(fft.lower(z, device=device).kernels),
    }


def measure_solve(device: str, batch: int, seconds: float) -> dict:
    rng = np.random.default_rng(2)
    real = np.float32 if device in ("webgpu", "metal") else np.float64
    a, b = rng.standard_normal((batch, 8, 8)).astype(real), rng.standard_normal((batch, 8)).astype(real)
    kernel = tj.kernel(solve_batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tj.FallbackWarning)
        # (a stable solution: a backward error of a few units of rounding, as Gaussian elimination's bound n eps)
        shifted, got = a + 4 * np.eye(8, dtype=a.dtype), np.asarray(kernel(a, b, device=device))
        assert backward_error(shifted, got / 2, b) <= 8 * np.finfo(real).eps
        found = {"tracejit": ms(lambda: kernel(a, b, device=device), seconds, device),
                 "numpy": ms(lambda: solve_batch(a, b), seconds, "numba")}
    try:
        import scipy.linalg
    except ImportError:
        return found
    shifted = a + 4 * np.eye(8, dtype=a.dtype)
    found["scipy"] = ms(lambda: scipy.linalg.solve(shifted, b[..., None])[..., 0] * 2.0, seconds, "numba")
    return found


def backward_error(a, x, b) -> float:
    """max over the systems of |a x - b| / (|a| |x|), largest entries (float64 arithmetic)."""
    a, x, b = (v.astype(np.float64) for v in (a, x, b))
    residual = np.abs(np.einsum("...ij,...j->...i", a, x) - b).max(axis=-1)
    return float((residual / (np.abs(a).max(axis=(-2, -1)) * np.abs(x).max(axis=-1))).max())


DECOMPOSITIONS = {
    "cholesky": lambda a: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1], dtype=a.dtype)),
    "qr": lambda a: np.linalg.qr(a).R,
    "eigh": lambda a: np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2)),
    "svd": lambda a: np.linalg.svd(a, compute_uv=False),
}


def measure_decompositions(device: str, batch: int, seconds: float) -> dict:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((batch, 16, 16)).astype(np.float32 if device in ("webgpu", "metal") else np.float64)
    found = {}
    for name, f in DECOMPOSITIONS.items():
        kernel = tj.kernel(f)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tj.FallbackWarning)
            assert np.allclose(np.asarray(kernel(a, device=device)), f(a), rtol=1e-3, atol=1e-3), name
            found[name] = ms(lambda: kernel(a, device=device), seconds, device)
        found[f"numpy {name}"] = ms(lambda: f(a), seconds, "numba")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings, section 4 on the first device only")
    parser.add_argument("--devices", default="numba,opencl", help="comma-separated")
    args = parser.parse_args(argv)
    seconds = 0.05 if args.quick else 1.0
    n, log_n, batch = (1 << 14, 12, 500) if args.quick else (1 << 20, 20, 20_000)
    devices = args.devices.split(",")
    print(f"1. |z e^(iw) + 0.5j|^2 over {n:,} complex values; ms per call")
    print(f"{'device':<10}{'tracejit':>10}{'numpy':>9}{'numba':>9}{'numpy/tj':>10}")
    for device in devices:
        r = measure_elementwise(device, n, seconds)
        numba = f"{r['numba']:>9.2f}" if "numba" in r else f"{'-':>9}"
        print(f"{device:<10}{r['tracejit']:>10.2f}{r['numpy']:>9.2f}{numba}{r['numpy'] / r['tracejit']:>9.2f}x",
              flush=True)
    print(f"\n2. FFT of 2**{log_n} values; ms per call")
    print(f"{'device':<10}{'fft':>8}{'numpy':>8}{'scipy':>8}{'scipy -1':>10}{'rfft':>8}{'numpy':>8}{'scipy':>8}"
          f"{'kernels':>9}")
    for device in devices:
        r = measure_fft(device, 1 << log_n, seconds)
        print(f"{device:<10}{r['fft']:>8.2f}{r['numpy fft']:>8.2f}{r['scipy fft']:>8.2f}"
              f"{r['scipy fft, all cores']:>10.2f}{r['rfft']:>8.2f}{r['numpy rfft']:>8.2f}{r['scipy rfft']:>8.2f}"
              f"{r['kernels']:>9}", flush=True)
    print(f"\n3. np.linalg.solve of {batch:,} systems of 8 x 8 with the code around it; ms per call")
    print(f"{'device':<10}{'tracejit':>10}{'numpy':>9}{'scipy':>9}{'numpy/tj':>10}")
    for device in devices:
        r = measure_solve(device, batch, seconds)
        scipy = f"{r['scipy']:>9.2f}" if "scipy" in r else f"{'-':>9}"
        print(f"{device:<10}{r['tracejit']:>10.2f}{r['numpy']:>9.2f}{scipy}{r['numpy'] / r['tracejit']:>9.2f}x",
              flush=True)
    stack = batch // 10
    print(f"\n4. np.linalg on {stack:,} matrices of 16 x 16, tracejit / NumPy; ms per call")
    print(f"{'device':<10}" + "".join(f"{name:>20}" for name in DECOMPOSITIONS))
    for device in devices[:1] if args.quick else devices:  # (--quick: a check that it runs, on the first device)
        r = measure_decompositions(device, stack, seconds)
        print(f"{device:<10}" + "".join(f"{r[name]:>11.2f} /{r['numpy ' + name]:>7.2f}" for name in DECOMPOSITIONS),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
