"""A pytest plugin for running the array API standard's test suite (data-apis/array-api-tests) against
tracejit.array_api: `make test-array-api` (see the Makefile). Hypothesis does not shrink failures (each example
compiles kernels, and a shrink runs hundreds), keeps no example database, and the run ends with its pass rate."""
import os

import pytest
from hypothesis import Phase, settings

STANDARD_DTYPES = (
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128".split()
)
if os.environ.get("ARRAY_API_TESTS_MODULE", "").startswith("tracejit") and "ARRAY_API_TESTS_SKIP_DTYPES" not in os.environ:
    # the standard's dtypes a device without float64 does not compute (metal: the 64-bit ones) are left out, as the
    # suite allows, rather than failing every test that draws them. (webgpu, which has no complex dtype either, cannot
    # run the suite: it needs one when it loads.)
    import tracejit.array_api as xp

    have = xp.__array_namespace_info__().dtypes()
    if "float64" not in have:  # (elsewhere uint64 is missing only as an argument: NumPy's sums of uint32 make it)
        os.environ["ARRAY_API_TESTS_SKIP_DTYPES"] = ",".join(d for d in STANDARD_DTYPES if d not in have)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    base = settings.get_profile(settings.get_current_profile_name())
    settings.register_profile(
        "tracejit", parent=base, phases=(Phase.explicit, Phase.reuse, Phase.generate), database=None, deadline=None
    )
    settings.load_profile("tracejit")


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed, failed = len(stats.get("passed", [])), len(stats.get("failed", []))
    skipped, xfailed, xpassed = (len(stats.get(k, [])) for k in ("skipped", "xfailed", "xpassed"))
    ran = passed + failed + xfailed + xpassed
    if ran:
        module = os.environ.get("ARRAY_API_TESTS_MODULE", "?")
        device = os.environ.get("TRACEJIT_DEVICE", "the default device")
        terminalreporter.write_line(
            f"array-api-tests on {module} ({device}): {passed + xpassed} passed, {failed} failed, {xfailed} known "
            f"failures (xfails.txt), {skipped} skipped: {100 * (passed + xpassed) / ran:.1f}% of the {ran} that ran"
        )
