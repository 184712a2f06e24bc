# One image for the CLI, the web app and the Celery workers (docker-compose.yml runs it
# as `web`, `worker-cpu` and `worker-gpu`). torch==2.14.1 from PyPI is the CUDA build:
# the same image runs on CPU hosts and, given a GPU, on GPU hosts.
#
#   docker build -t objective-harness .
#   docker run --rm objective-harness harness run suite noisy-labels   # the CLI, SQLite in /data
#   docker compose up --build                                          # the full stack
#
# bookworm: the Debian release the project's machines (and scripts/services.sh) use.
# BASE: another image with Python 3.11 on bookworm (a local stand-in where no registry is
# reachable: docs/deploying.md); the default is everyone else's.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBIAN_FRONTEND=noninteractive \
    HARNESS_HOME=/data \
    HARNESS_DATA=/data/datasets \
    STATIC_ROOT=/app/staticfiles \
    HARNESS_STATIC_MANIFEST=1

# util-linux: `unshare` and `setpriv`, which the sandbox (harness/sandbox/) uses to put
# untrusted objective code in its own namespaces and drop it to an unprivileged uid.
RUN apt-get update \
 && apt-get install -y --no-install-recommends util-linux \
 && rm -rf /var/lib/apt/lists/* \
 && command -v unshare && command -v setpriv

# An unprivileged account: compose runs `web` as this user (workers stay root because the
# sandbox needs CAP_SYS_ADMIN; the code they run drops privileges itself).
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home harness \
 && mkdir -p /data && chown harness:harness /data

WORKDIR /app

# Dependencies first, from the pins in pyproject.toml (the engine's and the web and worker
# extras'), so that editing the code does not reinstall torch (several GB with its CUDA
# libraries).
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(dict.fromkeys(p['dependencies'] + p['optional-dependencies']['web'] + p['optional-dependencies']['worker'])))" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

COPY README.md manage.py ./
COPY harness ./harness
COPY suites ./suites
COPY webapp ./webapp
COPY tasks ./tasks
COPY scripts ./scripts
# The project itself (its dependencies are already satisfied), then the static files
# (plotly.js, CSS) collected into STATIC_ROOT, outside the /data volume so a rebuilt image
# never serves stale ones. whitenoise serves them from gunicorn. The throwaway key keeps the
# settings from generating /data/secret_key into the image (every deployment would share
# it); a container generates its own on first start (webapp/secret_key.py).
RUN pip install '.[web,worker]' \
 && rm -rf build ./*.egg-info \
 && DJANGO_SECRET_KEY=build-time-only python manage.py collectstatic --noinput -v 0 \
 && harness --help >/dev/null

VOLUME ["/data"]
EXPOSE 8000
ENTRYPOINT ["/app/scripts/entrypoint.sh"]
CMD ["web"]
