"""The docs' table of the supported NumPy API, generated from the registries (the op table, the ufunc
dispatch, numpy_protocol.FUNCTIONS): `python -m tracejit.numpy.api_table` prints it, and
`python -m tracejit.numpy.api_table --update docs/reference/numpy-api.md` rewrites it there."""

from __future__ import annotations

import numpy as np

from tracejit.numpy import host_calls, linalg_solvers, numpy_protocol, ufuncs

START, END = "<!-- api-table:start (python -m tracejit.numpy.api_table) -->", "<!-- api-table:end -->"
_DEVICES = "numba, opencl, cuda, metal, webgpu"


def _cell(ulps: int) -> str:
    return "exact" if ulps == 0 else f"{ulps}"


def table() -> str:
    rows = ["| ufunc | devices | ulps: numba, opencl | ulps: GPUs (webgpu, cuda) |", "|---|---|---|---|"]
    for ufunc in sorted(numpy_protocol.UFUNCS, key=lambda u: u.__name__):
        cpu, gpu = ufuncs.stated_ulps(ufunc.__name__)
        rows.append(f"| `np.{ufunc.__name__}` | {_DEVICES} | {_cell(cpu)} | {_cell(gpu)} |")
    functions = sorted({f"`{numpy_protocol._name(f)}`" for f in numpy_protocol.FUNCTIONS})
    linalg = sorted(f"`np.linalg.{f.__name__}`" for f in host_calls.LINALG_ON_HOST)
    generated = sorted(f"`{f.__name__}`" for f in linalg_solvers.GENERATED)
    return "\n".join(
        [
            START,
            f"{len(numpy_protocol.UFUNCS)} ufuncs, each as `np.X(t)` and `tj.X` (operators included). Accuracy is the "
            "largest error against NumPy measured on special and random float32/float64 values, in units in the last "
            "place of NumPy's result (exact: the same value), on every device that has the dtype "
            "(webgpu: no float64 or int64; "
            "metal: no float64); float16, bfloat16 and float8 (ml_dtypes) are computed in float32 and rounded, "
            "within 1 ulp. "
            "CUDA uses its math library, measured on an H200 with CUDA 13.0 (the GPU column; its float32 exp2, "
            "log1p, arccos and arctanh and float64 arcsinh and hypot are 2 ulps from NumPy's, its float32 "
            "logaddexp up to 64 where the result nears 0). Metal uses its library too (the GPU column is stated, "
            "not measured: no Mac here), except Metal's erf, "
            "expm1, log1p, cbrt and hypot, which MSL lacks: tracejit's own, within 2 ulps. NaN, infinities and "
            "signed zeros follow NumPy everywhere, except that GPUs (webgpu) flush subnormals to zero (so there a "
            "float32 `np.nextafter`, `np.spacing` or `np.ldexp` result below 1.2e-38, or `np.frexp` of such an input, "
            "may be 0 or the input itself; float16 is exact, computed in float32) and WGSL's sin/cos/tan are stated "
            "for |x| < 1e4. `x ** c` (`np.power`) with a constant `c` that is a whole or half number of magnitude up "
            "to 4 (`r2 ** -1.5`, `x ** -2`) is computed with products, a square root and `1 / x` on the numba "
            "device, which vectorise where `pow` is a call per element: within 4 ulps of NumPy's float64 `pow` "
            "(float32: 1, computed in float64), its special values exactly; `array ** 0.5` is `np.sqrt`, as in "
            "NumPy.",
            "",
            *rows,
            "",
            *_complex_rows(),
            "",
            f"Other NumPy functions ({len(functions)}): " + ", ".join(functions) + ".",
            "",
            f"Linear algebra ({len(linalg)}): on the numba device NumPy's own LAPACK calls on the host in the middle "
            "of the kernel; on opencl, webgpu, cuda and metal generated kernels (" + ", ".join(generated) + "; "
            "`np.linalg.matrix_power` and `np.linalg.multi_dot` are matrix products on every device, "
            "`np.linalg.tensorsolve` and `np.linalg.tensorinv` reshapes around solve and inv), complex matrices "
            "and qr's raw mode LAPACK on the host with their values copied there and back and a "
            "`tj.FallbackWarning`; the same values "
            "and dtypes as NumPy, stacked matrices and `LinAlgError` included "
            "([Linear algebra](../guide/linear-algebra.md)): " + ", ".join(linalg) + ".",
            "",
            "Any other NumPy function or ufunc runs with NumPy on the host in the middle of the kernel, with a "
            "`tj.FallbackWarning` (`@tj.kernel(fallback=False)` refuses it instead): "
            "[NumPy inside a kernel](../guide/numpy.md#what-tracejit-does-not-compile-runs-with-numpy).",
            END,
        ]
    )


def _complex_rows() -> list[str]:
    """The complex ufuncs (numpy/complex_math.py) with their stated accuracy."""
    from tracejit.numpy import complex_math

    rows = [
        '<a id="complex-ufuncs"></a>Complex ufuncs ([Complex numbers](../guide/complex-numbers.md)): '
        "complex64 on every device, complex128 where the device has float64 (numba, opencl, cuda). Accuracy: "
        "the worst error against NumPy measured on every pair of special values and on random values spanning"
        " magnitudes (near the unit circle, +-1, +-i and the axes too) on the numba and opencl devices, part "
        "by part in ulps of each part (no finer than the ulps of max(|re|, |im|) / 1024); multiply, square, "
        "divide, reciprocal, power, log1p and expm1 in ulps of max(|re|, |im|) (NumPy's own log1p and expm1 "
        "formulas cancel; power's is stated for |b log a| < 100). Measured as |ours - NumPy's| / |NumPy's| on"
        " 20,000 random values on every device, each function is within 3 ulps (webgpu and metal included), "
        "except log1p near 0 on webgpu and metal.",
        "",
        "| complex ufunc | ulps: complex64 | ulps: complex128 |",
        "|---|---|---|",
    ]
    for name, (single, double) in sorted(complex_math.ULPS.items()):
        what = f"np.{name}" if hasattr(np, name) else name
        rows.append(f"| `{what}` | {_cell(single)} | {_cell(double)} |")
    return rows


def update(path: str) -> None:
    """Replace the table in the file at path (docs/reference/numpy-api.md) with the current one."""
    with open(path) as f:
        text = f.read()
    start, end = text.index(START), text.index(END) + len(END)
    with open(path, "w") as f:
        f.write(text[:start] + table() + text[end:])


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--update"]:
        update(sys.argv[2])
    else:
        print(table())
