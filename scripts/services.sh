#!/usr/bin/env bash
# Install (when missing) and start what the tests need: PostgreSQL with a `harness`
# role and database on 127.0.0.1:5432, and Debian's Chromium for the browser tests.
# Idempotent; needs root (or sudo) for apt and su.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
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
echo "services: PostgreSQL $version ready on 127.0.0.1:5432 (user harness); $(chromium --version)"
