#!/usr/bin/env bash
# Install (when missing) and start what the tests need: PostgreSQL with a `harness`
# role and database on 127.0.0.1:5432, Redis (the Celery broker) on 127.0.0.1:6379, and
# Debian's Chromium for the browser tests. Idempotent, and quick when all are running;
# needs root (or sudo) for apt and su.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 \
  || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "services: installing ${missing[*]} (Debian packages)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$version main"; then
  as_root pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -q online; then
  as_root pg_ctlcluster "$version" main start
fi
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 0.5
done
pg_isready -h 127.0.0.1 -p 5432

psql_admin() { as_root su postgres -c "psql -v ON_ERROR_STOP=1 -qtA -c \"$1\""; }
if [ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='harness'")" != 1 ]; then
  psql_admin "CREATE USER harness PASSWORD 'harness' CREATEDB"
fi
if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname='harness'")" != 1 ]; then
  psql_admin "CREATE DATABASE harness OWNER harness"
fi
# Redis: a throwaway broker for the tests (no persistence), unless one already answers.
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }
if ! redis_up; then
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no >/dev/null
  for _ in $(seq 1 30); do
    redis_up && break
    sleep 0.2
  done
  redis_up || { echo "services: Redis did not answer on 127.0.0.1:6379" >&2; exit 1; }
fi
redis_version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

echo "services: PostgreSQL $version ready on 127.0.0.1:5432 (user harness);" \
  "Redis $redis_version on 127.0.0.1:6379; $(chromium --version)"
