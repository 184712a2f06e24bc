"""Deployment: Dockerfile, docker-compose.yml and scripts/entrypoint.sh.

No Docker engine runs on the development machines, so the image is never built here.
What can be checked without one is: the compose file's structure (parsed with PyYAML),
the Dockerfile's instructions against the repository and .dockerignore, and the
entrypoint itself, run for real against the PostgreSQL (and Redis) that
scripts/services.sh starts, on a database of its own that is dropped afterwards.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from urllib.request import urlopen

import psycopg
import pytest
import yaml

from tests.conftest import redis_db

REPO = Path(__file__).resolve().parent.parent
ENTRYPOINT = REPO / "scripts" / "entrypoint.sh"
ADMIN_URL = os.environ.get("DATABASE_URL", "postgres://harness:harness@127.0.0.1:5432/harness")
BROKER = "redis://127.0.0.1:6379"


# ------------------------------------------------------------------ docker-compose.yml
@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


APP_SERVICES = ("web", "worker-cpu", "worker-gpu")
WORKERS = ("worker-cpu", "worker-gpu")


def test_compose_services(compose, services):
    assert "version" not in compose  # the compose spec has no version key
    assert set(services) == {"postgres", "redis", "flower", *APP_SERVICES}
    assert not any("beat" in name for name in services)  # the reaper runs in the workers


def test_compose_backing_services(compose, services):
    pg, redis = services["postgres"], services["redis"]
    assert pg["image"] == "postgres:15"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert redis["image"] == "redis:7"
    assert redis["command"][:1] == ["redis-server"]
    assert "--appendonly yes" in " ".join(redis["command"])
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"][1:])
    for name, mount in (("postgres", "/var/lib/postgresql/data"), ("redis", "/data")):
        volume, _, target = services[name]["volumes"][0].partition(":")
        assert target == mount and volume in compose["volumes"], name
        assert "ports" not in services[name], f"{name} is published outside the stack"


def env_of(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in service["environment"].items()}


def test_compose_app_services(compose, services):
    pg_env = services["postgres"]["environment"]
    for name in APP_SERVICES:
        svc, env = services[name], env_of(services[name])
        assert svc["build"] == "." and svc["image"] == services["web"]["image"], name
        assert svc["depends_on"] == {"postgres": {"condition": "service_healthy"},
                                     "redis": {"condition": "service_healthy"}}, name
        db = urlsplit(env["DATABASE_URL"])
        assert (db.scheme, db.hostname, db.port) == ("postgres", "postgres", 5432), name
        assert (db.username, db.password, db.path) == (
            pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"], "/" + pg_env["POSTGRES_DB"])
        assert urlsplit(env["HARNESS_BROKER_URL"]).hostname == "redis", name
        assert env["HARNESS_EXECUTOR"] == "tasks.dispatch:enqueue", name
        # The secret's variable is the one the settings read, with no published default:
        # unset, the first start generates one into the data volume (webapp/secret_key.py).
        assert env["DJANGO_SECRET_KEY"] == "${DJANGO_SECRET_KEY:-}", name
        volume, _, target = svc["volumes"][0].partition(":")
        assert target == "/data" and volume in compose["volumes"], name
        assert svc.get("init") is True, name
    assert 'os.environ.get("DJANGO_SECRET_KEY"' in (REPO / "webapp" / "secret_key.py").read_text()


def test_compose_web(services):
    web = services["web"]
    assert web["command"] == ["web"]
    assert web["healthcheck"]["test"] == ["CMD", "/app/scripts/entrypoint.sh", "health-web"]
    assert any(str(p).endswith(":8000") for p in web["ports"])
    assert env_of(web)["PORT"] == "8000"
    assert web["user"] not in ("root", "0")  # gunicorn needs no privileges
    assert "cap_add" not in web and "profiles" not in web


def test_compose_workers(services):
    for name, queue in (("worker-cpu", "cpu"), ("worker-gpu", "gpu")):
        w = services[name]
        assert w["command"] == ["worker"], name
        assert env_of(w)["HARNESS_QUEUES"] == queue, name
        assert w["healthcheck"]["test"] == ["CMD", "/app/scripts/entrypoint.sh",
                                            "health-worker"], name
        # The sandbox's namespaces (unshare) need CAP_SYS_ADMIN and no default profiles.
        assert w["cap_add"] == ["SYS_ADMIN"], name
        assert set(w["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined"}, name
        assert "ports" not in w and "user" not in w, name
        assert env_of(w)["HARNESS_SANDBOX_STRICT"] == "${HARNESS_SANDBOX_STRICT:-1}", name
    cpu, gpu = services["worker-cpu"], services["worker-gpu"]
    assert "profiles" not in cpu and "deploy" not in cpu  # `docker compose up` needs no GPU
    assert gpu["profiles"] == ["gpu"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]


# ------------------------------------------------------------------ Dockerfile
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        lines.append(current.strip())
        current = ""
    assert not current, "Dockerfile ends in a line continuation"
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def dockerignored(path: str) -> bool:
    """Whether .dockerignore excludes ``path`` (enough of its syntax for this file)."""
    patterns = [p.strip().rstrip("/") for p in (REPO / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    parts = Path(path).parts
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        assert not pattern.startswith("!"), "negations are not handled here"
        bare = pattern.removeprefix("**/")
        for prefix in prefixes:
            if fnmatch.fnmatch(prefix, pattern) or (
                    pattern.startswith("**/") and fnmatch.fnmatch(Path(prefix).name, bare)):
                return True
    return False


def test_dockerfile_entrypoint_and_base():
    instructions = dockerfile()
    froms = [args for op, args in instructions if op == "FROM"]
    args = [a for op, a in instructions if op == "ARG"]
    # one base, a build argument whose default is the official image (a local stand-in
    # where no registry is reachable: docs/deploying.md)
    assert froms == ["${BASE}"] and "BASE=python:3.11-slim-bookworm" in args
    assert [args for op, args in instructions if op == "WORKDIR"] == ["/app"]
    (entry,) = [json.loads(args) for op, args in instructions if op == "ENTRYPOINT"]
    assert entry == ["/app/scripts/entrypoint.sh"]
    assert os.access(ENTRYPOINT, os.X_OK), "entrypoint.sh must be executable"
    env = " ".join(args for op, args in instructions if op == "ENV")
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "HARNESS_HOME=/data"):
        assert setting in env
    static_root = next(w for w in env.split() if w.startswith("STATIC_ROOT="))
    assert not static_root.split("=", 1)[1].startswith("/data")  # outside the volume
    run = " ".join(args for op, args in instructions if op == "RUN")
    assert "util-linux" in run and "pip install '.[web,worker]'" in run and "collectstatic" in run
    # the build's settings get a throwaway key: no generated key baked into /data
    assert "DJANGO_SECRET_KEY=build-time-only python manage.py collectstatic" in run


def test_dockerfile_copies_what_the_package_needs():
    """Every COPY source exists and is in the build context; every package is copied."""
    copied = []
    for op, args in dockerfile():
        if op in ("COPY", "ADD"):
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            copied += words[:-1]
    assert copied
    for src in copied:
        assert (REPO / src).exists(), f"COPY {src}: not in the repository"
        assert not dockerignored(src), f"COPY {src}: excluded by .dockerignore"
    assert "scripts" in copied and "manage.py" in copied
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["readme"] in copied
    for package in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert package.rstrip("*") in copied, f"package {package} is not copied into the image"


def test_dockerignore_keeps_the_context_small():
    for heavy in (".venv", ".git", "harness/__pycache__", "objective_harness.egg-info"):
        assert dockerignored(heavy), heavy
    assert not dockerignored("harness/cli.py")


# ------------------------------------------------------------------ entrypoint.sh
def test_entrypoint_syntax():
    subprocess.run(["bash", "-n", str(ENTRYPOINT)], check=True)
    assert ENTRYPOINT.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in ENTRYPOINT.read_text()


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


@pytest.fixture(scope="module")
def deploy_db():
    """A database of its own on the test PostgreSQL, dropped at the end of the module."""
    name = f"harness_deploy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    yield with_database(ADMIN_URL, name)
    from bench.pages import drop_database  # retried: autovacuum refuses a moment's FORCE

    drop_database(ADMIN_URL, name)


@pytest.fixture
def entry_env(deploy_db, tmp_path) -> dict[str, str]:
    """What a container gets: production settings, PostgreSQL by URL, the broker's URL."""
    # nor the PYTHON that `make test` hands its scripts (a relative path, from the repository)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HARNESS_", "DJANGO_")) and k != "PYTHON"}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        DJANGO_SETTINGS_MODULE="webapp.settings",
        DATABASE_URL=deploy_db,
        HARNESS_BROKER_URL=f"{BROKER}/0",
        HARNESS_HOME=str(tmp_path / "data"),
        STATIC_ROOT=str(tmp_path / "static"),
    )
    return env


def entry(*args: str, env: dict[str, str], cwd: Path = REPO,
          timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(ENTRYPOINT), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_migrate(entry_env, deploy_db):
    done = entry("migrate", env=entry_env)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(deploy_db) as con:
        apps = {r[0] for r in con.execute("SELECT DISTINCT app FROM django_migrations")}
    assert {"webapp", "auth", "sessions"} <= apps
    again = entry("migrate", env=entry_env)  # idempotent
    assert again.returncode == 0 and "No migrations to apply" in again.stdout


def test_check_prints_config_with_masked_password(entry_env):
    entry_env["HARNESS_BROKER_URL"] = f"redis://:s3cret-pw@{BROKER.split('//')[1]}/0"
    entry_env["HARNESS_QUEUES"] = "gpu"
    done = entry("check", env=entry_env)
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "no issues" in out
    assert "database:  postgresql harness_deploy_" in out and "connected" in out
    assert "queues:    gpu" in out and "sandbox:   " in out
    if not (REPO / "tasks" / "celery.py").exists():  # the Celery app may resolve its own URL
        assert "broker:    redis://:***@127.0.0.1:6379/0" in out
    assert "s3cret-pw" not in out


def test_check_fails_without_database(entry_env):
    entry_env["DATABASE_URL"] = with_database(f"postgres://harness:x@127.0.0.1:{free_port()}",
                                              "nothing")
    assert entry("check", env=entry_env).returncode != 0
    entry_env["HARNESS_DB_WAIT"] = "2"
    start = time.monotonic()
    done = entry("migrate", env=entry_env)
    assert done.returncode != 0 and "database not reachable after 2 s" in done.stderr
    assert 2 <= time.monotonic() - start < 30


def test_passthrough_runs_the_cli_in_the_callers_directory(entry_env, tmp_path):
    done = entry("harness", "ls", env=entry_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "noisy-labels" in done.stdout
    assert entry("pwd", env=entry_env, cwd=tmp_path).stdout.strip() == str(tmp_path)
    assert entry("false", env=entry_env).returncode == 1  # exit status passes through


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (the entrypoint execs; its children follow), then KILL."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def wait_healthy(probe: str, env: dict[str, str], proc: subprocess.Popen,
                 log: Path, timeout: float = 60, ready=lambda: True) -> float:
    """Seconds until ``probe`` succeeds, probing once ``ready()`` says it may; ``log``: the
    process's output, shown if it exits first."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        assert proc.poll() is None, (
            f"exited with {proc.returncode} before it was healthy:\n{log.read_text()[-3000:]}")
        if ready() and entry(probe, env=env, timeout=30).returncode == 0:
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{probe} did not succeed within {timeout:.0f} s")


def answers_ping(broker: str, node: str) -> bool:
    """A ping from here, waiting 1 s: `health-worker` is a Celery start-up of its own whose
    ping waits 10 s, and a ping sent before the worker listens is lost (Redis pub/sub)."""
    from celery import Celery

    with Celery(broker=broker, set_as_current=False) as app:  # not the tests' own app
        return bool(app.control.ping(destination=[node], timeout=1))


def test_web_serves_and_is_healthy(entry_env, tmp_path):
    port = free_port()
    entry_env.update(PORT=str(port), WEB_WORKERS="1")
    assert entry("health-web", env=entry_env).returncode != 0  # nothing listens yet
    log = (tmp_path / "web.log").open("w")
    proc = subprocess.Popen([str(ENTRYPOINT), "web"], env=entry_env, cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy("health-web", entry_env, proc, tmp_path / "web.log")
        base = f"http://127.0.0.1:{port}"
        with urlopen(f"{base}/", timeout=30) as page:  # production settings, gunicorn
            assert page.status == 200 and b"<html" in page.read().lower()
        with urlopen(f"{base}/static/vendor/plotly.min.js", timeout=30) as js:
            assert js.status == 200  # whitenoise, no CDN
    finally:
        stop(proc)
        log.close()
    text = (tmp_path / "web.log").read_text()
    assert proc.returncode == 0, text
    assert "Listening at: http://0.0.0.0:" in text and "Apply all migrations" in text


def fake_celery(tmp_path: Path) -> Path:
    """A Python whose `-m celery` prints what it was started with (argv and the thread
    share); anything else runs in the real one (the entrypoint runs Celery as a module)."""
    script = tmp_path / "python"
    script.write_text('#!/usr/bin/env bash\n'
                      'if [ "$1 $2" = "-m celery" ]; then\n'
                      '  shift 2\n'
                      '  echo "threads=${HARNESS_TORCH_THREADS:-unset}"\n'
                      '  printf "%s\\n" "$@"\n'
                      f'else exec {shlex.quote(sys.executable)} "$@"; fi\n')
    script.chmod(0o755)
    return script


def cpu_share(concurrency: int) -> int:
    cpus = len(os.sched_getaffinity(0))
    cpu_max = Path("/sys/fs/cgroup/cpu.max")
    if cpu_max.exists():
        quota, period = cpu_max.read_text().split()
        if quota != "max":
            cpus = min(cpus, -(-int(quota) // int(period)))
    return max(1, cpus // concurrency)


@pytest.mark.parametrize("concurrency", [1, 2, 10_000])
def test_worker_command_line(entry_env, tmp_path, concurrency):
    entry_env["PYTHON"] = str(fake_celery(tmp_path))
    entry_env.update(HARNESS_QUEUES="gpu", HARNESS_CONCURRENCY=str(concurrency))
    done = entry("worker", env=entry_env)
    assert done.returncode == 0, done.stderr
    threads, *argv = done.stdout.splitlines()
    assert threads == f"threads={cpu_share(concurrency)}"
    node = f"gpu@{socket.gethostname()}"
    # a GPU task in a fresh pool process: a device-side assert poisons its CUDA context
    assert argv == ["-A", "tasks", "--workdir", str(REPO), "worker", "--queues", "gpu",
                    "--concurrency", str(concurrency), "--loglevel", "INFO", "--hostname", node,
                    "--max-tasks-per-child", "1"]
    if concurrency == 1:  # a CPU worker's processes live on
        cpu = entry("worker", env={**entry_env, "HARNESS_QUEUES": "cpu"})
        assert "--max-tasks-per-child" not in cpu.stdout.splitlines()
    if concurrency == 2:  # an explicit share wins (whatever the concurrency: checked once)
        entry_env["HARNESS_TORCH_THREADS"] = "3"
        assert entry("worker", env=entry_env).stdout.startswith("threads=3\n")
    ping = entry("health-worker", env=entry_env).stdout.splitlines()[1:]
    assert ping == ["-A", "tasks", "--workdir", str(REPO), "inspect", "ping", "-d", node,
                    "--timeout", "10"]


@pytest.mark.skipif(not (REPO / "tasks" / "celery.py").exists(),
                    reason="the Celery app (tasks/celery.py) is not written yet")
def test_worker_starts_and_answers_ping(entry_env, tmp_path):
    assert entry("migrate", env=entry_env).returncode == 0
    # A database of this test worker's (8-15 on gw1): never the queues of a development
    # worker, nor another test's.
    entry_env.update(HARNESS_BROKER_URL=f"{BROKER}/{redis_db(7)}", HARNESS_QUEUES="cpu",
                     HARNESS_CONCURRENCY="1")
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen([str(ENTRYPOINT), "worker"], env=entry_env, cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        node = f"cpu@{socket.gethostname()}"
        wait_healthy("health-worker", entry_env, proc, tmp_path / "worker.log",
                     ready=lambda: answers_ping(entry_env["HARNESS_BROKER_URL"], node))
    finally:
        stop(proc)
        log.close()
    text = (tmp_path / "worker.log").read_text()
    assert f"cpu@{socket.gethostname()}" in text and "torch threads per process" in text, text


def test_deployed_static_files_are_hashed_compressed_and_cached_long(tmp_path):
    """What the image's collectstatic and gunicorn do: plotly.min.js under a content-hashed
    name, a gzip copy served to a client that accepts it, cached for a year (it was 4.8 MB
    uncompressed with max-age 60)."""
    env = {**os.environ, "HARNESS_STATIC_MANIFEST": "1", "STATIC_ROOT": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "webapp.settings_test"}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   cwd=REPO, env=env, check=True, timeout=300)
    assert (tmp_path / "staticfiles.json").is_file()
    probe = textwrap.dedent("""
        import django
        django.setup()
        from django.templatetags.static import static
        from django.test import Client
        url = static("vendor/plotly.min.js")
        response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
        print(url)
        print(response.status_code, response.get("Content-Encoding"),
              response.get("Cache-Control"))
    """)
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout.split("\n")
    assert re.fullmatch(r"/static/vendor/plotly\.min\.[0-9a-f]{12}\.js", out[0]), out
    status, encoding, cache = out[1].split(" ", 2)
    assert (status, encoding) == ("200", "gzip")
    assert "max-age=315360000" in cache and "immutable" in cache


def test_flower_is_an_opt_in_monitor_on_the_workers_broker(services):
    """`--profile ops` adds Flower on the broker the workers use, unprivileged, reachable
    from this host only (it has no login unless FLOWER_BASIC_AUTH is set)."""
    flower, broker = services["flower"], env_of(services["worker-cpu"])["HARNESS_BROKER_URL"]
    assert flower["profiles"] == ["ops"] and flower["user"] == "harness"
    shell, flag, script = flower["command"]
    assert (shell, flag) == ("sh", "-c") and "unset FLOWER_BASIC_AUTH" in script
    command = script.split("exec", 1)[1].split()
    assert command[:3] == ["python", "-m", "celery"] and "flower" in command
    assert command[command.index("--broker") + 1] == broker
    assert all(p.startswith("127.0.0.1:") for p in flower["ports"])
    assert "cap_add" not in flower and "FLOWER_BASIC_AUTH" in flower["environment"]
