"""The key Django signs sessions, CSRF tokens and password-reset links with.

``DJANGO_SECRET_KEY`` when set. Otherwise, with ``DEBUG`` on, a constant for development
(tests set it too: webapp/settings_test.py). Otherwise a random key generated once into
the data directory (``secret_key``, mode 0600) and read from there by every later start and
every process that shares the directory: a deployment without a configured key is never
signed with the constant this repository publishes, and its users stay logged in across
restarts.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from harness.storage.home import data_dir

DEVELOPMENT_KEY = "local-development-only-not-secret"
MIN_LENGTH = 50  # what `manage.py check --deploy` asks of a key (security.W009)


def secret_key(debug: bool) -> str:
    given = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if given:
        return given
    if debug:
        return DEVELOPMENT_KEY
    return stored_key(data_dir() / "secret_key")


def stored_key(path: Path) -> str:
    """The key in ``path``, generated there first if there is none. Processes that start at
    once (gunicorn's workers, the Celery pool) agree: each writes its own candidate to a
    private file and links it into place, and a link never replaces a file, so the first
    one wins and the others read it. The file belongs to the directory's owner: in the
    image the workers run as root (the sandbox needs it) and the web app as the data
    volume's unprivileged owner, and whichever starts first writes the key both read."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
        fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            owner = path.parent.stat()
            if os.geteuid() == 0 and owner.st_uid != 0:
                os.fchown(fd, owner.st_uid, owner.st_gid)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(MIN_LENGTH) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.link(candidate, path)
        except FileExistsError:
            pass  # another process's key is in place
        finally:
            candidate.unlink(missing_ok=True)
    try:
        key = path.read_text().strip()
    except PermissionError as exc:
        raise ImproperlyConfigured(
            f"{path} (the generated secret key) is not readable by uid {os.geteuid()}: give "
            f"it to the account the web app runs as, or set DJANGO_SECRET_KEY") from exc
    if len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(
            f"{path} holds a secret key of {len(key)} characters, fewer than {MIN_LENGTH}: "
            f"delete the file to have a new one generated, or set DJANGO_SECRET_KEY")
    return key
