# One image for the CLI now (and the web app and workers in later issues).
# torch==2.14.1 from PyPI is the CUDA build: the same image runs on CPU and on GPU hosts.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HARNESS_HOME=/data
WORKDIR /app

COPY pyproject.toml README.md ./
COPY harness ./harness
COPY suites ./suites
COPY webapp ./webapp
COPY manage.py ./
RUN pip install --no-cache-dir -e . && mkdir -p /data

VOLUME ["/data"]
ENTRYPOINT ["harness"]
CMD ["run", "suite", "noisy-labels"]
