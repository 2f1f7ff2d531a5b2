# Every set-up step happens through these targets: on a fresh clone `make demo` or `make test`
# needs only Python 3.10+ (with pip) on the PATH.
PYTHON ?= python3
VENV = .venv
PY = $(VENV)/bin/python
PIP = $(PY) -m pip
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: venv install install-dev install-docs demo test test-all test-array-api lint docs test-gpu bench bench-gpu clean

venv: $(PY)

# Falls back to a pip-less venv seeded by the host's pip where ensurepip is missing (Debian without python3-venv).
$(PY):
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV) && $(PYTHON) -m venv --without-pip $(VENV) \
		&& $(PYTHON) -m pip --python $(PY) install pip; }
	$(PIP) install --upgrade pip

install: $(VENV)/.installed
$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) install -e .
	touch $@

install-dev: $(VENV)/.installed-dev
$(VENV)/.installed-dev: $(PY) pyproject.toml
	$(PIP) install -e ".[dev]"
	touch $@ $(VENV)/.installed

demo: install
	$(PY) examples/quickstart.py

# The device suite also runs on cuda and metal through the CPU SIMT emulator (README, "Emulated cuda and
# metal"); TRACEJIT_EMULATE= (empty) runs without it.
# Every process the suite starts (the workers, the cache-fault tests' children, warm's workers) imports
# tracejit: where PYTHONDONTWRITEBYTECODE is set (as on CI's image), each compiled all of tracejit's modules
# and pytest rewrote every test module again; the run writes their bytecode (__pycache__, git-ignored).
# tests/test_faults.py on 2 workers: 164 -> 145 s.
test: install-dev
	env -u PYTHONDONTWRITEBYTECODE TRACEJIT_EMULATE="$${TRACEJIT_EMULATE-cuda,metal}" \
		$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS) tests

# Release checks: the same suite with every exhaustive setting on: the fuzzers at ten times make test's
# count, the whole cache-fault matrix, the tests make test skips on the emulated devices, the 100,000-step
# programs, the CUDA check for sm_80 and sm_90 at full optimisation, more threads and processes racing.
test-all: install-dev
	env -u PYTHONDONTWRITEBYTECODE TRACEJIT_EMULATE="$${TRACEJIT_EMULATE-cuda,metal}" TRACEJIT_EMULATE_ALL=1 \
		TRACEJIT_FUZZ_EXAMPLES=600 TRACEJIT_CREATION_EXAMPLES=600 TRACEJIT_SYMBOLIC_EXAMPLES=3000 \
		TRACEJIT_FAULTS_FULL=1 TRACEJIT_DEEP_100K=1 TRACEJIT_CHECK_CUDA=all TRACEJIT_THREAD_TRIALS=10 \
		TRACEJIT_THREAD_RACES=240 TRACEJIT_RACE_REPEATS=5 TRACEJIT_RACE_PROCESSES=12 \
		$(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS) tests

# The Python array API standard's own test suite (data-apis/array-api-tests, at a pinned commit) against
# tracejit.array_api on one device (ARRAY_API_DEVICE: numba, opencl, webgpu, ...); it ends with the pass rate.
# The suite is cloned into ARRAY_API_TESTS on first use, which needs GitHub (or put a clone there by hand, with its
# array-api submodule). Known failures, each with its reason: tests/array_api/xfails.txt.
ARRAY_API_TESTS ?= .array-api-tests
ARRAY_API_TESTS_COMMIT = 55fcc60179efa2680ddd6cd926ddf17b83530e2b
ARRAY_API_DEVICE ?= numba
ARRAY_API_EXAMPLES ?= 20
test-array-api: install-dev
	test -d $(ARRAY_API_TESTS)/array_api_tests || { git clone https://github.com/data-apis/array-api-tests $(ARRAY_API_TESTS) \
		&& git -C $(ARRAY_API_TESTS) checkout $(ARRAY_API_TESTS_COMMIT) && git -C $(ARRAY_API_TESTS) submodule update --init; }
	$(PIP) install "ndindex>=1.8" "hypothesis>=6.151"
	cd $(ARRAY_API_TESTS) && ARRAY_API_TESTS_MODULE=tracejit.array_api TRACEJIT_DEVICE=$(ARRAY_API_DEVICE) \
		PYTHONPATH=$(CURDIR)/tests/array_api $(CURDIR)/$(PY) -m pytest array_api_tests -p tracejit_array_api \
		-p no:cacheprovider -q --max-examples=$(ARRAY_API_EXAMPLES) --xfails-file=$(CURDIR)/tests/array_api/xfails.txt \
		--tb=line -W ignore::UserWarning $(PYTEST_ARGS)

# ruff (lint, and the format check), mypy, and the layer contracts of .importlinter; CI runs it (.ci/run).
lint: install-dev
	$(VENV)/bin/ruff check tracejit
	$(VENV)/bin/ruff format --check tracejit
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The documentation site (docs/, mkdocs.yml) into site/: the pages generated from the code are rewritten
# first (docs/generate.py: the NumPy API table, the errors page, the environment variables), then MkDocs
# builds with --strict, so a broken link or anchor, or an API reference that does not resolve, fails.
# (NO_MKDOCS_2_WARNING silences the Material theme's banner about MkDocs 2, which is not a build warning.)
install-docs: $(VENV)/.installed-docs
$(VENV)/.installed-docs: $(PY) pyproject.toml
	$(PIP) install -e ".[docs]"
	touch $@ $(VENV)/.installed

docs: install-docs
	$(PY) docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# On a machine with an NVIDIA GPU: the whole suite (every device test runs on cuda too), then the GPU
# benchmarks (against PyTorch when it is installed).
test-gpu: install-dev
	$(PY) -c "import sys, tracejit as tj; i = {d.name: d for d in tj.devices()}['cuda']; \
		sys.exit(0 if i.available else 'no CUDA GPU: ' + str(i.reason))"
	$(PY) -m pytest -n 2 $(PYTEST_ARGS) tests
	$(PY) benchmarks/gpu.py

bench-gpu: install-dev
	$(PY) benchmarks/gpu.py

# torch and torch.compile columns when torch is importable (pip install -e ".[bench]", benchmarks/README.md);
# e.g. make bench BENCH_ARGS="--quick" or BENCH_ARGS="--first-call --json benchmarks/results/today.json"
bench: install-dev
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .tracejit-cache benchmarks/results site
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
