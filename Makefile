# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PG_URL := postgres://harness:harness@127.0.0.1:5432/harness
PORT ?= 8000

.PHONY: demo web full test test-changed coverage reproduce lint bench install

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# Every suite filled: each reference and its literature's key contrasts on the ranked
# variants (harness/demo.py), then the web leaderboard on those results at
# http://127.0.0.1:8000/ (Ctrl-C stops it).
demo: install
	$(BIN)/harness demo
	@echo "Leaderboard: http://127.0.0.1:$(PORT)/  (Ctrl-C to stop)"
	$(BIN)/python manage.py runserver 127.0.0.1:$(PORT) --noreload

web: install
	$(BIN)/python manage.py migrate -v0
	$(BIN)/python manage.py runserver 127.0.0.1:$(PORT) --noreload

# The full sweep: every baseline of every suite on every default variant, 5 seeds.
full: install
	$(BIN)/harness demo --full

# Both cores: the tests over two pytest-xdist workers, then the `serial` ones alone; ends
# with the 15 slowest tests and the wall time (docs/testing.md).
test: install
	bash scripts/services.sh
	DATABASE_URL=$(PG_URL) PYTHON=$(BIN)/python bash scripts/test.sh
	$(BIN)/ruff check .

# The inner loop: only the test files a change can affect (uncommitted changes, or since
# BASE: `make test-changed BASE=main`), run as `make test` runs them.
BASE ?= HEAD
test-changed: install
	bash scripts/services.sh
	@tests="$$($(BIN)/python scripts/changed_tests.py $(BASE))"; \
	if [ -z "$$tests" ]; then echo "no test file is affected by the changes since $(BASE)"; \
	else echo "$$tests" | tr '\n' ' '; echo; \
	DATABASE_URL=$(PG_URL) PYTHON=$(BIN)/python bash scripts/test.sh $$tests; fi

# `make test` measured: line and branch coverage per package, subprocesses included.
coverage: install
	bash scripts/services.sh
	COVERAGE=1 DATABASE_URL=$(PG_URL) PYTHON=$(BIN)/python bash scripts/test.sh

# The suites' literature findings at full size (tens of minutes on 2 cores; each suite's
# README has the figures); `make test` runs a small version of each.
reproduce: install
	bash scripts/services.sh
	DATABASE_URL=$(PG_URL) $(BIN)/python -m pytest -q -n 2 --dist loadfile --reproduce -m reproduce

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python bench/seed_batching.py
