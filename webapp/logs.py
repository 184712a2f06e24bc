"""Logs an operator can read: every line to stderr (the container's log), each carrying the
request it came from (a request id, the method, the path, the user id) or the cells and
runs a worker was on, as text or, with ``HARNESS_LOG_FORMAT=json``, one JSON object per
line for a log shipper.

The request is kept in a context variable by :class:`webapp.middleware.RequestIdMiddleware`;
a filter on the handler copies it onto every record, so Django's own "Internal Server
Error" record (logged with the traceback by ``django.request``) carries it too. The JSON
formatter is ``json.dumps`` of the record's fields: a library (python-json-logger,
structlog) would be one more dependency in the image for these few lines.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
from typing import Any

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# the context fields a record carries ("-" when it came from no request)
FIELDS = ("request_id", "method", "path", "user_id")
_request: contextvars.ContextVar[Any] = contextvars.ContextVar("harness_request", default=None)
# a request id a proxy sent (X-Request-ID) is kept when it is short and plain
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def plain_id(value: str | None) -> str | None:
    """``value`` if it is usable as a request id as it is, else None."""
    return value if value and _PLAIN_ID.fullmatch(value) else None


def bind(request: Any) -> contextvars.Token:
    """This request is the one the records of this context come from."""
    return _request.set(request)


def unbind(token: contextvars.Token) -> None:
    _request.reset(token)


def current_request_id() -> str | None:
    request = _request.get()
    return getattr(request, "request_id", None) if request is not None else None


class RequestContext(logging.Filter):
    """Copies the current request's id, method, path and user id onto every record (and
    keeps what a caller put there with ``extra=``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = _request.get()
        values = {"request_id": "-", "method": "-", "path": "-", "user_id": "-"}
        if request is not None:
            values |= {"request_id": getattr(request, "request_id", "-"),
                       "method": request.method or "-", "path": request.path}
            user = getattr(request, "user", None)  # read only once authentication ran
            try:
                if user is not None and user.is_authenticated:
                    values["user_id"] = str(user.pk)
            except Exception:  # noqa: BLE001 - a broken session must not lose the log line
                values["user_id"] = "?"
        for name, value in values.items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


TEXT = ("%(asctime)s %(levelname)s %(name)s [request %(request_id)s %(method)s %(path)s "
        "user %(user_id)s] %(message)s%(where)s")


class WorkerContext(logging.Filter):
    """A worker's records: the cells and runs they are about (``extra={"cells": [...],
    "runs": [...]}``), appended to a text line as ``where``."""

    def filter(self, record: logging.LogRecord) -> bool:
        cells, runs = getattr(record, "cells", None), getattr(record, "runs", None)
        record.where = (f" (cells {_ids(cells)}; runs {_ids(runs)})"
                        if cells is not None or runs is not None else "")
        return True


def _ids(ids: Any) -> str:
    return ",".join(map(str, ids)) if ids else "none"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the request's fields,
    whatever ``extra=`` added (a worker's run and cell ids), the traceback as text."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
        "message", "asctime", "where"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": self.formatTime(record), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        out |= {k: v for k, v in vars(record).items() if k not in self._STANDARD}
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str)


def config(fmt: str = "text", level: str = "INFO") -> dict[str, Any]:
    """Django's ``LOGGING`` (and the workers', :mod:`tasks.celery`): everything to stderr in
    ``fmt``, at ``level``; unhandled request errors (``django.request``) with tracebacks."""
    if fmt not in FORMATS:
        raise ValueError(f"HARNESS_LOG_FORMAT={fmt!r}: use one of {', '.join(FORMATS)}")
    if level.upper() not in LEVELS:
        raise ValueError(f"HARNESS_LOG_LEVEL={level!r}: use one of {', '.join(LEVELS)}")
    formatter = ({"()": "webapp.logs.JsonFormatter"} if fmt == "json"
                 else {"format": TEXT})
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": "webapp.logs.RequestContext"},
                    "worker": {"()": "webapp.logs.WorkerContext"}},
        "formatters": {"harness": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "filters": ["request", "worker"], "formatter": "harness"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        # Django's own: its request errors propagate to the root; its chatter stays quiet
        "loggers": {"django": {"level": "WARNING", "propagate": True},
                    "django.request": {"level": "ERROR", "propagate": True},
                    "django.server": {"level": "INFO", "propagate": True}},
    }
