# The two commands of the README: `make demo` and `make test`. Both set everything up first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Test workers (pytest-xdist): one per core by default; a test module stays on one worker, in
# the order tests/conftest.py gives (heavy modules first), not xdist's (most tests first).
WORKERS ?= auto
XDIST := -n $(WORKERS) --dist loadscope --no-loadscope-reorder

.PHONY: setup demo test test-fast lint typecheck bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch first (an unpinned torch would pull a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: setup
	# The RWE part runs its analysts in bubblewrap; without it (not root) the demo skips RWE.
	-bash scripts/system-deps.sh bubblewrap strace
	$(VENV)/bin/medflows demo

test: setup
	bash scripts/system-deps.sh
	$(VENV)/bin/pytest $(XDIST)

test-fast: setup
	$(VENV)/bin/pytest $(XDIST) -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy evaluators tasks_lib flows

bench: setup
	$(PY) benchmarks/score_flow_overhead.py

clean:
	rm -rf .medflows
