"""The web half of scripts/compose-smoke.sh: a visitor of the running stack, standard library
only (it runs on the host, outside the image).

    python3 scripts/compose_smoke.py BASE_URL signup USER PASSWORD
    python3 scripts/compose_smoke.py BASE_URL submit USER PASSWORD NAME SUITE... --seeds 3
    python3 scripts/compose_smoke.py BASE_URL wait RUN [--until-done N] [--timeout S]
    python3 scripts/compose_smoke.py BASE_URL pages SLUG SUITE

``submit`` prints the run's number; ``wait`` polls the run's status.json until every cell
has finished (or, with ``--until-done N``, until N cells are done) and fails unless every
cell is ``ok``; ``pages`` checks the home, suite and objective pages and the JSON API.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# A loss the engine has never seen: CE with its largest per-sample terms down-weighted.
OBJECTIVE = '''
import torch
import torch.nn.functional as F


def classification_loss(logits, targets, *, cap: float = 4.0):
    """Cross-entropy, each sample's term capped at ``cap`` nats (softly)."""
    ce = F.cross_entropy(logits, targets, reduction="none")
    return cap * torch.tanh(ce / cap)
'''


class Visitor:
    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[int, str, str]:
        """Status, final URL and body (redirects followed)."""
        try:
            with self.opener.open(self.base + path, timeout=60) as r:
                return r.status, r.geturl(), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, path, e.read().decode(errors="replace")

    def post(self, path: str, data: dict) -> tuple[int, str, str]:
        _, _, form = self.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        if not token:
            raise SystemExit(f"no CSRF token on {path}")
        body = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), **data},
                                      doseq=True).encode()
        request = urllib.request.Request(self.base + path, body,
                                         headers={"Referer": self.base + path})
        try:
            with self.opener.open(request, timeout=300) as r:
                return r.status, r.geturl(), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, path, e.read().decode(errors="replace")

    def login(self, user: str, password: str) -> None:
        status, url, body = self.post("/accounts/login/", {"username": user,
                                                            "password": password})
        if "/accounts/login/" in url:
            raise SystemExit(f"login as {user} failed ({status})")


def _errors(body: str) -> str:
    return "; ".join(re.findall(r'errorlist[^>]*>\s*<li>([^<]*)', body)) or body[-500:]


def signup(v: Visitor, user: str, password: str) -> None:
    status, url, body = v.post("/accounts/signup/", {"username": user, "password1": password,
                                                      "password2": password})
    if "/accounts/signup/" in url:
        raise SystemExit(f"sign-up refused ({status}): {_errors(body)}")
    print(f"signed up as {user}")


def submit(v: Visitor, user: str, password: str, name: str, suites: list[str],
           seeds: int) -> None:
    v.login(user, password)
    started = time.monotonic()
    status, url, body = v.post("/submit/", {
        "name": name, "description": "compose smoke", "paper_url": "",
        "code_text": OBJECTIVE, "visibility": "public", "hyperparameters": "",
        "suites": suites, "seeds": str(seeds)})
    run = re.search(r"/runs/(\d+)/", url)
    if not run:
        raise SystemExit(f"submission refused ({status}): {_errors(body)}")
    print(f"submitted {name!r} as run {run.group(1)} (the form answered in "
          f"{time.monotonic() - started:.1f} s)", file=sys.stderr)
    print(run.group(1))


def wait(v: Visitor, run: int, until_done: int | None, timeout: float) -> None:
    started, last = time.monotonic(), None
    while True:
        status, _, body = v.get(f"/runs/{run}/status.json")
        if status != 200:
            raise SystemExit(f"status.json of run {run}: {status}")
        state = json.loads(body)
        counts = {k: n for k, n in state["counts"].items() if n}
        if counts != last:
            print(f"  {time.monotonic() - started:6.0f} s  run {run}: {counts}", flush=True)
            last = counts
        done = state["counts"].get("ok", 0)
        if until_done is not None and done >= until_done:
            return
        if state["finished"]:
            bad = [c for c in state["cells"] if c["status"] != "ok"]
            if bad:
                which = [(c["variant"], c["seed"], c["status"], c["reason"]) for c in bad]
                raise SystemExit(f"run {run}: {len(bad)} cells not ok: {which}")
            tries = sorted({c["attempts"] for c in state["cells"]})
            print(f"run {run}: {len(state['cells'])} cells ok in "
                  f"{time.monotonic() - started:.0f} s (attempts per cell: {tries})")
            return
        if time.monotonic() - started > timeout:
            raise SystemExit(f"run {run} not finished after {timeout:.0f} s: {counts}")
        time.sleep(3)


def pages(v: Visitor, slug: str, suite: str) -> None:
    for path, needle in (("/", slug), (f"/suites/{suite}/", slug),
                         (f"/objectives/{slug}/", slug), ("/api/", "suites"),
                         (f"/api/suites/{suite}", slug), (f"/api/objectives/{slug}", slug)):
        started = time.monotonic()
        status, _, body = v.get(path)
        ms = (time.monotonic() - started) * 1000
        if status != 200 or needle not in body:
            raise SystemExit(f"{path}: {status}, {needle!r} {'in' if needle in body else 'not in'}"
                             f" the page")
        print(f"  {path:32} 200 in {ms:5.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("signup")
    s.add_argument("user")
    s.add_argument("password")
    s = sub.add_parser("submit")
    s.add_argument("user")
    s.add_argument("password")
    s.add_argument("name")
    s.add_argument("suites", nargs="+")
    s.add_argument("--seeds", type=int, default=3)
    s = sub.add_parser("wait")
    s.add_argument("run", type=int)
    s.add_argument("--until-done", type=int)
    s.add_argument("--timeout", type=float, default=1800)
    s = sub.add_parser("pages")
    s.add_argument("slug")
    s.add_argument("suite")
    a = ap.parse_args()
    v = Visitor(a.base)
    if a.what == "signup":
        signup(v, a.user, a.password)
    elif a.what == "submit":
        submit(v, a.user, a.password, a.name, a.suites, a.seeds)
    elif a.what == "wait":
        wait(v, a.run, a.until_done, a.timeout)
    else:
        pages(v, a.slug, a.suite)


if __name__ == "__main__":
    main()
