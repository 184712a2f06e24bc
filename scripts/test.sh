#!/usr/bin/env bash
# The whole test suite, as `make test` runs it (docs/testing.md):
#   1. every test not marked `serial`, over two pytest-xdist workers (one per core);
#   2. the `serial` tests, alone on the machine (they restart PostgreSQL, or measure);
# then the slowest tests of both runs and their wall times. Arguments go to both pytest
# runs (e.g. `bash scripts/test.sh -x tests/client/test_cli.py`). COVERAGE=1 measures line and
# branch coverage over both runs, subprocesses included, and prints it per package (`make
# coverage`). Needs the services of scripts/services.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
unset PYTHON  # the tests' subprocesses find their own (tests/test_deploy.py)
WORKERS=${TEST_WORKERS:-2}
export DATABASE_URL=${DATABASE_URL:-postgres://harness:harness@127.0.0.1:5432/harness}
# TEST_REPORTS=DIR keeps the runs' JUnit reports there (per-file times for balancing)
reports=${TEST_REPORTS:-$(mktemp -d -t harness-test-reports-XXXXXX)}
mkdir -p "$reports"
# one fixtures directory for both runs (tests/plugin.py)
HARNESS_FIXTURES=$(mktemp -d -t harness-fixtures-XXXXXX)
export HARNESS_FIXTURES
trap 'rm -rf "$HARNESS_FIXTURES"; [ -n "${TEST_REPORTS:-}" ] || rm -rf "$reports"' EXIT

status=0
run() {  # run NAME PYTEST-ARGS...: pytest's status, 5 (nothing selected) counted as success
  local name=$1 started rc=0
  shift
  started=$(date +%s%N)
  "$PY" -m pytest -q --junitxml="$reports/$name.xml" "$@" || rc=$?
  local ms=$((($(date +%s%N) - started) / 1000000))
  walls+=("$reports/$name.xml:$((ms / 1000)).$(printf %03d $((ms % 1000)))")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=$rc; fi
}
walls=()
cov_first=() cov_then=()
if [ -n "${COVERAGE:-}" ]; then
  rm -f .coverage .coverage.*
  cov_first=(--cov --cov-report=) cov_then=(--cov --cov-append --cov-report=)
fi
run parallel -n "$WORKERS" --dist loadfile --no-loadscope-reorder -m "not serial" "${cov_first[@]}" "$@"
run serial -p no:xdist -m serial "${cov_then[@]}" "$@"
"$PY" scripts/test_times.py "${walls[@]}"
if [ -n "${COVERAGE:-}" ]; then "$PY" scripts/coverage_by_package.py; fi
exit $status
