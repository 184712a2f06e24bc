"""The client side of ``harness submit``: post an upload body to a server, read its answer.

Standard library only (``urllib``): the CLI needs no HTTP package. The server's answers
are JSON; an error answer's ``error`` is shown as the server wrote it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT = 120.0  # the server validates the code in its sandbox before it answers


class UploadFailed(Exception):
    """The upload did not reach the server or was refused, in words."""


def post(server: str, token: str, body: dict) -> dict:
    """POST ``body`` to ``server``/api/uploads; the server's JSON answer (201)."""
    data = json.dumps(body, allow_nan=False).encode("utf-8")
    return _call(urllib.request.Request(
        _url(server, "/api/uploads"), data=data, method="POST",
        headers=_headers(token, {"Content-Type": "application/json"})))


def status(server: str, token: str, upload_id: int) -> dict:
    return _call(urllib.request.Request(_url(server, f"/api/uploads/{upload_id}"),
                                        headers=_headers(token, {})))


def row_key(server: str, token: str, version_key: str) -> str:
    """The server's row-order key for one objective version (``harness.sandbox.remote``)."""
    if not token:
        raise UploadFailed(f"no API token: make one on your account page "
                           f"({server.rstrip('/')}/accounts/) and set HARNESS_TOKEN")
    return _call(urllib.request.Request(_url(server, f"/api/row-keys/{version_key}"),
                                        headers=_headers(token, {})))["row_key"]


def wait(server: str, token: str, upload_id: int, every: float = 5.0,
         limit: float = 6 * 3600) -> dict:
    """Poll the upload until it is no longer pending (at most ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while True:
        answer = status(server, token, upload_id)
        if answer["status"] != "pending" or time.monotonic() > deadline:
            return answer
        time.sleep(every)


def describe(answer: dict[str, Any], server: str) -> str:
    """The server's answer in words: the status, the sample, the differences."""
    sample = ", ".join(f"{c['variant']} seed {c['seed']}" for c in answer["sample"])
    lines = [f"upload #{answer['id']} of {answer['version_label']} on {answer['suite']} "
             f"v{answer['suite_version']}: {answer['status_text']}",
             f"  {answer['cells']} cells uploaded; the server re-runs {len(answer['sample'])}: "
             f"{sample}"]
    if answer.get("reason"):
        lines.append(f"  {answer['reason']}")
    for d in answer.get("differences", [])[:20]:
        lines.append(f"  differs: {d['variant']} seed {d['seed']} {d['metric']}: yours "
                     f"{d['local']}, server {d['server']}")
    lines.append(f"  {_url(server, answer['url'])}")
    return "\n".join(lines)


def sends_in_clear(server: str) -> bool:
    """Whether a token sent to ``server`` would cross a network unencrypted (plain http
    to another machine than this one)."""
    parsed = urllib.parse.urlsplit(server)
    return parsed.scheme == "http" and parsed.hostname not in ("localhost", "127.0.0.1", "::1")


def _url(server: str, path: str) -> str:
    return server.rstrip("/") + path


def _headers(token: str, extra: dict[str, str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json", **extra}


def _call(request: urllib.request.Request) -> dict:
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise UploadFailed(f"the server refused it ({exc.code}): {_message(exc)}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UploadFailed(f"could not reach {request.full_url}: {reason}") from None


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read().decode("utf-8"))["error"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return exc.reason or "no reason given"
