#!/usr/bin/env bash
# Entry point of the image (web and workers are the same image; see docker-compose.yml).
#
#   web            wait for the database, migrate, queue the baselines on an empty database
#                  (HARNESS_BOOTSTRAP=0: never), serve with gunicorn on $PORT (8000)
#   worker         wait for the database, run a Celery worker on $HARNESS_QUEUES (cpu)
#   migrate        apply migrations and exit
#   check          Django's system check, a database connection, the resolved config and
#                  the sandbox layers this container grants (run it in a worker to see)
#   health-web     exit 0 when GET http://127.0.0.1:$PORT/api/ answers 200 (no curl needed)
#   health-worker  exit 0 when this container's Celery worker answers a ping
#   anything else  run as given, e.g. `harness run suite noisy-labels` or `bash`
#
# Paths are resolved from this script, not the working directory, so that a passthrough
# command keeps the caller's directory (relative `--objective my_loss.py` works).
set -euo pipefail

APP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-webapp.settings}"
# Programs run as modules of this Python, not by their console scripts: a script's shebang
# names the interpreter of the place it was installed, which a moved virtualenv no longer has.
PYTHON="${PYTHON:-python}"

queues() { echo "${HARNESS_QUEUES:-cpu}"; }
# Celery node name: one per container, named after its queues (commas are not nice in names).
node_name() { echo "$(queues | tr ',' '+')@$(hostname)"; }

wait_for_database() {
  "$PYTHON" - <<'EOF'
import os
import sys
import time

import django

django.setup()
from django.db import connection
from django.db.utils import OperationalError

limit = float(os.environ.get("HARNESS_DB_WAIT", "60"))
deadline = time.monotonic() + limit
while True:
    try:
        connection.ensure_connection()
        break
    except OperationalError as exc:
        if time.monotonic() > deadline:
            print(f"entrypoint: database not reachable after {limit:.0f} s: {exc}", file=sys.stderr)
            sys.exit(1)
        print("entrypoint: waiting for the database...", file=sys.stderr)
        connection.close()
        time.sleep(1)
connection.close()
EOF
}

manage() { "$PYTHON" "$APP_DIR/manage.py" "$@"; }

# CPUs this container may use: the affinity mask (nproc), capped by a cgroup v2 CPU quota.
cpu_count() {
  local n quota period
  n=$(nproc)
  if [ -r /sys/fs/cgroup/cpu.max ]; then
    read -r quota period < /sys/fs/cgroup/cpu.max || true
    if [ "${quota:-max}" != max ] && [ "${period:-0}" -gt 0 ]; then
      quota=$(( (quota + period - 1) / period ))
      [ "$quota" -lt "$n" ] && n=$quota
    fi
  fi
  echo "$n"
}

cmd="${1:-web}"
[ $# -gt 0 ] && shift

case "$cmd" in
  web)
    wait_for_database
    manage migrate --noinput
    # First start on an empty database: the built-in baselines' cells go to the workers,
    # so that the board ranks submissions against them (HARNESS_BOOTSTRAP=0: never).
    if [ "${HARNESS_BOOTSTRAP:-1}" = 1 ] && [ "${HARNESS_EXECUTOR:-}" = tasks.dispatch:enqueue ]; then
      manage populate_baselines --queue --if-empty || echo "entrypoint: could not queue the baselines" >&2
    fi
    exec "$PYTHON" -m gunicorn webapp.wsgi:application --chdir "$APP_DIR" \
      --bind "0.0.0.0:${PORT:-8000}" --workers "${WEB_WORKERS:-2}" --timeout 60 \
      --access-logfile - --no-control-socket "$@"
    ;;
  worker)
    wait_for_database
    # Default: one pool process per core, one torch thread each. The suites' small models
    # do not use a second thread well (bench/dispatch.py: 2 workers x 1 thread finished
    # 1.6x the cells of 1 worker x 2 threads); GPU workers set HARNESS_CONCURRENCY=1.
    concurrency="${HARNESS_CONCURRENCY:-$(cpu_count)}"
    # Each pool process trains with its share of the cores, not all of them (the worker
    # code reads HARNESS_TORCH_THREADS and calls torch.set_num_threads with it).
    if [ -z "${HARNESS_TORCH_THREADS:-}" ]; then
      HARNESS_TORCH_THREADS=$(( $(cpu_count) / concurrency ))
      [ "$HARNESS_TORCH_THREADS" -ge 1 ] || HARNESS_TORCH_THREADS=1
    fi
    export HARNESS_TORCH_THREADS
    # A GPU task runs in a fresh pool process: a device-side assert poisons the CUDA context
    # of the process it happens in, and that must not fail the next task.
    fresh=()
    case ",$(queues)," in *,gpu,*) fresh=(--max-tasks-per-child 1) ;; esac
    echo "entrypoint: worker on queues $(queues), concurrency $concurrency," \
      "$HARNESS_TORCH_THREADS torch threads per process" >&2
    exec "$PYTHON" -m celery -A tasks --workdir "$APP_DIR" worker --queues "$(queues)" \
      --concurrency "$concurrency" --loglevel INFO --hostname "$(node_name)" "${fresh[@]}" "$@"
    ;;
  migrate)
    wait_for_database
    exec "$PYTHON" "$APP_DIR/manage.py" migrate --noinput "$@"
    ;;
  check)
    manage check "$@"
    exec "$PYTHON" - <<'EOF'
import os
from urllib.parse import urlsplit, urlunsplit

import django

django.setup()
from django.conf import settings
from django.db import connection


def masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def broker_url() -> str:
    try:
        from tasks.celery import app
    except ModuleNotFoundError as exc:  # the Celery app is not installed: report the env
        if exc.name not in ("tasks", "tasks.celery"):
            raise
        return os.environ.get("HARNESS_BROKER_URL", "") or "(unset)"
    return str(app.conf.broker_url or "(unset)")


def sandbox() -> str:
    try:
        from harness.sandbox import isolation_support
    except ImportError as exc:
        return f"(unknown: {exc})"
    return ", ".join(f"{k}={v}" for k, v in isolation_support().items())


connection.ensure_connection()
db = settings.DATABASES["default"]
where = f"{db['HOST']}:{db.get('PORT') or 'default port'}" if db.get("HOST") else "local"
print(f"settings:  {os.environ['DJANGO_SETTINGS_MODULE']}")
print(f"database:  {connection.vendor} {db['NAME']} ({where}), connected")
print(f"broker:    {masked(broker_url())}")
print(f"executor:  {settings.HARNESS_EXECUTOR}")
print(f"queues:    {os.environ.get('HARNESS_QUEUES', 'cpu')}")
print(f"debug:     {settings.DEBUG}")
print(f"sandbox:   {sandbox()}")
EOF
    ;;
  health-web)
    exec "$PYTHON" - <<'EOF'
import os
import sys
import urllib.request

url = f"http://127.0.0.1:{os.environ.get('PORT', '8000')}/api/"
# as the proxy would ask: for an allowed host, over HTTPS (HARNESS_HTTPS redirects plain HTTP)
hosts = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",")
         if h.strip() and h.strip() != "*"]
headers = {"X-Forwarded-Proto": "https"}
if hosts:
    headers["Host"] = hosts[0].lstrip(".")
try:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as exc:  # noqa: BLE001 - any failure is "unhealthy"
    print(f"health-web: {url}: {exc}", file=sys.stderr)
    sys.exit(1)
EOF
    ;;
  health-worker)
    exec "$PYTHON" -m celery -A tasks --workdir "$APP_DIR" inspect ping -d "$(node_name)" --timeout 10
    ;;
  *)
    exec "$cmd" "$@"
    ;;
esac
