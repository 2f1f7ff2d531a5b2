# Every set-up step happens through these targets: on a fresh clone `make demo` or `make test`
# needs only Python 3.10+ (with pip) on the PATH.
PYTHON ?= python3
VENV = .venv
PY = $(VENV)/bin/python
PIP = $(PY) -m pip
PYTEST_ARGS ?=

.PHONY: venv install install-dev demo test bench clean

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

test: install-dev
	$(PY) -m pytest -n 2 $(PYTEST_ARGS) tests

bench: install-dev
	$(PY) benchmarks/bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .tracejit-cache benchmarks/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
