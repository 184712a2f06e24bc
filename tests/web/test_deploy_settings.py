"""Production defaults (issue 35, item 5): no deployment is signed with the key this
repository publishes, and behind a TLS proxy (HARNESS_HTTPS=1) `manage.py check --deploy`
has nothing to report."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp.secret_key import DEVELOPMENT_KEY, MIN_LENGTH, secret_key, stored_key

ROOT = Path(__file__).resolve().parents[2]

# `check --deploy` in the production settings, and what they resolved
PROBE = """
import django
django.setup()
from django.conf import settings
from django.core.management import call_command
call_command("check", deploy=True, fail_level="WARNING")
print("origins", settings.CSRF_TRUSTED_ORIGINS, "key", settings.SECRET_KEY)
"""


def _production(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DJANGO_", "HARNESS_HTTPS", "CSRF_", "ALLOWED_HOSTS"))}
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**clean, "DJANGO_SETTINGS_MODULE": "webapp.settings",
             "HARNESS_HOME": str(tmp_path / "home"), **env})


def test_check_deploy_is_clean_behind_a_tls_proxy_and_not_without(tmp_path):
    key = secrets.token_urlsafe(MIN_LENGTH)
    ok = _production(tmp_path, DJANGO_SECRET_KEY=key, HARNESS_HTTPS="1",
                     ALLOWED_HOSTS="board.example.org,.example.net")
    assert ok.returncode == 0, ok.stderr
    assert "System check identified no issues" in ok.stdout + ok.stderr
    assert "origins ['https://board.example.org', 'https://example.net']" in ok.stdout
    plain = _production(tmp_path, DJANGO_SECRET_KEY=key)
    assert plain.returncode != 0  # what HARNESS_HTTPS=1 is for
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in plain.stderr


def test_without_a_key_a_deployment_generates_one_into_its_data_directory(tmp_path):
    first = _production(tmp_path, HARNESS_HTTPS="1")
    assert first.returncode == 0, first.stderr
    key = first.stdout.split("key ")[1].strip()
    assert key != DEVELOPMENT_KEY and len(key) >= MIN_LENGTH
    path = tmp_path / "home" / "secret_key"
    assert path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = _production(tmp_path, HARNESS_HTTPS="1")  # a restart keeps its sessions valid
    assert again.stdout.split("key ")[1].strip() == key


def test_processes_starting_at_once_agree_on_one_key(tmp_path):
    path = tmp_path / "data" / "secret_key"
    keys: list[str] = []
    threads = [threading.Thread(target=lambda: keys.append(stored_key(path)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no candidate left


def test_the_key_comes_from_the_environment_then_debug_then_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    monkeypatch.setenv("DJANGO_SECRET_KEY", "  given-by-the-operator  ")
    assert secret_key(debug=False) == "given-by-the-operator"
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    assert secret_key(debug=True) == DEVELOPMENT_KEY
    assert not (tmp_path / "secret_key").exists()  # development writes nothing
    (tmp_path / "secret_key").write_text("short\n")
    with pytest.raises(ImproperlyConfigured, match="5 characters, fewer than 50"):
        secret_key(debug=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root writes a file for another account")
def test_a_key_written_by_root_belongs_to_the_data_directorys_owner(tmp_path):
    """In the image the workers run as root and the web app as the volume's owner: a key the
    worker wrote first must be readable by the web app (a 500 at first start otherwise)."""
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 10001, 10001)
    key = stored_key(data / "secret_key")
    info = (data / "secret_key").stat()
    assert (info.st_uid, info.st_gid) == (10001, 10001) and len(key) >= MIN_LENGTH
    assert stat.S_IMODE(info.st_mode) == 0o600
