#!/usr/bin/env bash
# The compose stack end to end, as an operator and a visitor meet it (docs/deploying.md has
# a measured run). Not part of `make test`: it builds on the 7 GB image.
#
#   bash scripts/compose-smoke.sh            # docker compose, or podman-compose if that is what there is
#   COMPOSE=~/compose-venv/bin/podman-compose bash scripts/compose-smoke.sh
#
# 1. `up -d` under a project of its own (SMOKE_PROJECT, default harness-smoke: an operator's
#    stack and its volumes are never touched) on port SMOKE_PORT (18000), HARNESS_BOOTSTRAP=0;
# 2. queues a small set of baselines (ce on noisy-labels and calibration, 3 seeds; SMOKE_BASELINES
#    overrides the populate_baselines arguments) and waits for the workers to store them;
# 3. signs up through the form, submits a new objective through the form and waits for its run;
# 4. checks the home, suite and objective pages and the JSON API;
# 5. submits a second objective, kills the worker once cells are done and others running,
#    starts it again and waits: every cell must end `ok`, each stored once;
# 6. `down -v` (KEEP=1 leaves the stack up).
# Every step prints its seconds; the script stops at the first failure (and still cleans up).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"
  elif command -v podman-compose >/dev/null; then COMPOSE=podman-compose
  else echo "compose-smoke: needs docker compose or podman-compose (or COMPOSE=...)" >&2; exit 2; fi
fi
PROJECT=${SMOKE_PROJECT:-harness-smoke}
PORT=${SMOKE_PORT:-18000}
BASE="http://127.0.0.1:$PORT"
BASELINES=${SMOKE_BASELINES:---suite noisy-labels --suite calibration -o ce --seeds 3}
export HARNESS_WEB_PORT=$PORT HARNESS_BOOTSTRAP=0
# one sandbox key for the worker before and after the kill: a re-run cell gives the same numbers
export HARNESS_SANDBOX_KEY=${HARNESS_SANDBOX_KEY:-compose-smoke-sandbox-key-0123456789}
compose() { $COMPOSE -p "$PROJECT" "$@"; }
client() { python3 scripts/compose_smoke.py "$BASE" "$@"; }
manage() { compose exec -T web python manage.py "$@"; }
t0=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $*"; }
cleanup() {
  status=$?
  if [ "${KEEP:-}" = 1 ]; then echo "KEEP=1: the stack stays up ($COMPOSE -p $PROJECT down -v removes it)"
  else step "down -v"; compose down -v >/dev/null 2>&1 || true; fi
  echo "compose-smoke: $([ $status = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - t0 )) s"
}
trap cleanup EXIT

# cells neither finished nor failed: queued or running, for every submission
pending() {
  manage shell -c "from harness.storage.models import Cell; print(Cell.objects.filter(status__in=['queued', 'running']).count())" | tail -1
}

step "up -d ($COMPOSE, project $PROJECT, port $PORT)"
compose up -d
for _ in $(seq 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/" || true)
  [ "$code" = 200 ] && break
  sleep 2
done
[ "$code" = 200 ] || { echo "the web app did not answer 200 on /api/ within 240 s ($code)"; compose logs --tail 40 web; exit 1; }
step "the web app answers; the worker's sandbox layers:"
compose exec -T worker-cpu /app/scripts/entrypoint.sh check | grep -iE "sandbox|landlock|namespace|setpriv|queue" || true

step "populate_baselines --queue $BASELINES"
# shellcheck disable=SC2086  # the arguments are words on purpose
manage populate_baselines --queue $BASELINES
for _ in $(seq 600); do
  n=$(pending); [ "$n" = 0 ] && break
  sleep 3
done
[ "$n" = 0 ] || { echo "baselines still pending after 30 min: $n cells"; exit 1; }
step "baselines stored"
manage ops | head -30

step "sign up, submit a new objective through the form"
client signup smoke-user "smoke-pass-$PROJECT-123"
run=$(client submit smoke-user "smoke-pass-$PROJECT-123" "capped ce" noisy-labels calibration --seeds 3)
client wait "$run"

step "pages and API"
client pages capped-ce noisy-labels

step "a second run; the worker killed while its cells run"
run2=$(client submit smoke-user "smoke-pass-$PROJECT-123" "capped ce two" noisy-labels --seeds 3)
client wait "$run2" --until-done 1
compose kill worker-cpu
step "worker killed; started again"
compose start worker-cpu
client wait "$run2"
manage shell -c "
from django.db.models import Count
from harness.storage.models import Cell, Metric
twice = Cell.objects.values('version', 'suite', 'suite_version', 'variant', 'seed').annotate(n=Count('id')).filter(n__gt=1).count()
metrics = Metric.objects.values('cell', 'name').annotate(n=Count('id')).filter(n__gt=1).count()
print(f'cells stored twice: {twice}; metrics stored twice: {metrics}')
assert twice == 0 and metrics == 0
"
