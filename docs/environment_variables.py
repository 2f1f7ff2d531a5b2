"""What each TRACEJIT_* environment variable does: the rows of docs/reference/environment.md (docs/generate.py).
tests/test_docs.py fails when the code reads a variable that has no row here, or a row names one nothing reads."""
from __future__ import annotations

# name -> (default, what it does). Links are relative to docs/reference/.
LIBRARY: dict[str, tuple[str, str]] = {
    "TRACEJIT_DEBUG": (
        "0",
        "Diagnostics on the `tracejit` logger, read at import: 1 every compile with its stages and times, why a "
        "signature recompiled, why a disk-cache entry missed; 2 also every launch with its time and GB/s; 3 also "
        "the graph and kernel IRs; 4 also the generated source, on the `tracejit` logger; `tj.set_debug(level)` "
        "sets it after import ([Debugging](../guide/debugging.md))."),
    "TRACEJIT_DEVICE": (
        "automatic",
        "The default device when a call names none (`numba`, `opencl:1`, ...), read once when tracejit first "
        "needs it; `tj.set_default_device` overrides it ([Devices](../guide/devices/index.md))."),
    "TRACEJIT_CACHE_DIR": (
        "the user cache directory (`~/.cache/tracejit`)",
        "Where compiled kernels, tuning records and the numba device's generated modules are kept; created "
        "private (0700). Keep it private ([Caching and warming](../guide/caching.md#where))."),
    "TRACEJIT_CACHE_MAX_BYTES": (
        "2 GiB",
        "The disk cache's size cap in bytes; the least recently used entries go first "
        "([Caching and warming](../guide/caching.md#where))."),
    "TRACEJIT_FALLBACK": (
        "on",
        "`0`: a call tracejit does not compile (`np.linalg.eig`, `scipy.special.gamma`) raises `tj.UnsupportedError` "
        "at its line instead of running with NumPy on the host in the middle of the kernel; "
        "`@tj.kernel(fallback=...)` overrides it ([NumPy in kernels](../guide/numpy.md#what-tracejit-does-not-compile-"
        "runs-with-numpy))."),
    "TRACEJIT_PLAN_CACHE_SIZE": (
        "128",
        "Plans (signatures) each function keeps in memory per kind of target; an evicted one is traced again "
        "and loaded from the disk cache ([Shapes and recompiles](../guide/shapes.md#why-did-it-recompile))."),
    "TRACEJIT_RECORD": (
        "unset",
        "A manifest file: each call that compiles appends its signature, for `python -m tracejit warm --manifest` "
        "and `tj.warm(path)` ([Caching and warming](../guide/caching.md#warming))."),
    "TRACEJIT_WARM_PROGRESS": (
        "unset",
        "When set, `python -m tracejit warm` prints one line per signature instead of drawing a progress bar on "
        "a terminal."),
    "TRACEJIT_PROGRESS": (
        "on",
        "`0`: never show a progress bar. Otherwise a compile or `tj.warm` past 2 s shows one (tqdm) on stderr, "
        "where stderr is a terminal and neither CI nor a test run is."),
    "TRACEJIT_COMPILE_TIMEOUT": (
        "120",
        "Seconds one numba compile may take before `tj.CompileTimeoutError`; 0 turns the limit off "
        "([the numba device](../guide/devices/numba.md#a-compile-never-hangs-the-program))."),
    "TRACEJIT_NUMBA_NATIVE": (
        "1",
        "How numba kernels are compiled: `1` LLVM IR compiled by LLVM directly where the kernel allows, `numba` "
        "the same IR compiled through Numba, `0` every kernel rendered as Python for Numba "
        "([the numba device](../guide/devices/numba.md#kernels-numba-compiles))."),
    "TRACEJIT_BLAS": (
        "auto",
        "The numba device's matrix products: `auto` Intel MKL where the `mkl` extra is installed and the CPU is "
        "Intel's, else NumPy's `np.matmul`; `numpy` always NumPy's; `mkl` MKL on any CPU, a missing MKL an error "
        "([Matrix products](../guide/matrix-products.md#which-blas))."),
    "TRACEJIT_OUTPUT_POOL": (
        "1 GiB",
        "Bytes of dropped results the numba device keeps for reuse (bytes, or `512M`, `2GiB`); 0 turns the pool "
        "off ([the numba device](../guide/devices/numba.md#reusing-memory-between-calls))."),
    "TRACEJIT_MEMORY_LIMIT": (
        "none",
        "A cap on every device pool's bytes (bytes, or `512M`, `2GiB`), as `tj.set_memory_limit(n)` sets at "
        "startup; past it an allocation raises `tj.OutOfMemoryError` "
        "([Devices](../guide/devices/index.md#tjset_memory_limit))."),
    "TRACEJIT_OPENCL_DEVICE": (
        "0",
        "Which OpenCL device plain `opencl` means: a number in `tj.devices()` order, or part of its name "
        "(`nvidia`) ([the opencl device](../guide/devices/opencl.md#which-device))."),
    "TRACEJIT_CUDA_ARCH": (
        "sm_80",
        "The architecture `cuda` compiles for on a machine without a GPU (`sm_90`, `90`, `compute_90` or `9.0`) "
        "([the cuda device](../guide/devices/cuda.md#compiling-needs-no-gpu))."),
    "TRACEJIT_EMULATE": (
        "unset",
        "`cuda`, `metal` or `cuda,metal`: those devices run their generated source on the CPU SIMT emulator, "
        "on any machine with g++ or clang++ ([Emulated cuda and metal](../guide/devices/emulated.md))."),
    "TRACEJIT_EMULATE_SEED": (
        "0",
        "The seed of the emulator's shuffled thread and block orders "
        "([Emulated cuda and metal](../guide/devices/emulated.md#it-runs-them-adversarially))."),
    "TRACEJIT_EMULATE_DEBUG": (
        "unset",
        "`1`: emulated kernels are compiled with `-g -O0` (not cached) and their source kept, for a debugger "
        "([Emulated cuda and metal](../guide/devices/emulated.md#step-through-it))."),
    "TRACEJIT_EMULATE_CXX": (
        "g++, else clang++",
        "The C++ compiler the emulator builds kernels with "
        "([Emulated cuda and metal](../guide/devices/emulated.md#in-ci))."),
    "TRACEJIT_CLANG": (
        "libclang in the process where its bindings are installed, else clang++ on the PATH, or a versioned clang++-N",
        "The clang++ the MSL check (`python -m tracejit.codegen.simt.msl_check`) compiles with, in a process of "
        "its own (set, libclang is not used) "
        "([the metal device](../guide/devices/metal.md#what-is-verified-where))."),
}

# Read by the test suite, the Makefile and the benchmarks only.
SUITE: dict[str, tuple[str, str]] = {
    "TRACEJIT_CHECK_CUDA": (
        "on where NVRTC and ptxas are present",
        "The suite's CUDA check of every numba kernel: `0` off; `all` also assembles for sm_90 and compiles with "
        "the cuda device's own options ([Testing](../developer/testing.md))."),
    "TRACEJIT_CHECK_METAL": (
        "on where libclang's bindings or clang++ are present",
        "The suite's MSL check of every numba kernel: `0` off ([Testing](../developer/testing.md))."),
    "TRACEJIT_EMULATE_ALL": (
        "unset",
        "`1`: the tests marked `slow_emulated` run on the emulated devices too ([Testing](../developer/testing.md))."),
    "TRACEJIT_FAULTS_FULL": (
        "unset",
        "`1`: `tests/test_faults.py` runs every combination of cache fault instead of a covering sample."),
    "TRACEJIT_FAULTS_SEED": (
        "0",
        "The seed of the random moments at which `tests/test_faults.py` kills a process."),
    "TRACEJIT_FUZZ_EXAMPLES": (
        "each fuzzer's own",
        "Examples per fuzzer (and per device where the fuzzer runs per device): `tests/test_fuzz.py`, "
        "`test_fuzz_dtypes.py`, `test_fuzz_layouts.py`, `test_signatures.py`, `test_random.py`."),
    "TRACEJIT_FUZZ_KNOWN_BUGS": (
        "unset",
        "`1`: the dtype fuzzer also runs the programs that hit a known, named bug (its `KNOWN_BUGS` table)."),
    "TRACEJIT_CREATION_EXAMPLES": (
        "60",
        "Random creation-function cases in `tests/test_creation.py`."),
    "TRACEJIT_SYMBOLIC_EXAMPLES": (
        "300",
        "Hypothesis examples of `tests/test_symbolic.py`."),
    "TRACEJIT_DEEP_100K": (
        "unset",
        "`1`: `tests/test_deep_programs.py` adds its 100,000-operation programs (about a minute per device)."),
    "TRACEJIT_RACE_PROCESSES": (
        "6",
        "Processes racing to build one OpenCL program in `tests/test_opencl_cache_race.py`."),
    "TRACEJIT_RACE_REPEATS": (
        "1",
        "How many times `tests/test_opencl_cache_race.py` runs its race."),
    "TRACEJIT_THREAD_TRIALS": (
        "3",
        "Trials of each test in `tests/test_threads.py`."),
    "TRACEJIT_THREAD_RACES": (
        "24",
        "Rounds of the forced-switch tests in `tests/test_threads.py`."),
}

# TRACEJIT_ names in the code that are not environment variables.
NOT_VARIABLES: dict[str, str] = {
    "TRACEJIT_PRIVATE_BUILD": "a preprocessor define that gives a retried PoCL build a cache directory of its own",
}
