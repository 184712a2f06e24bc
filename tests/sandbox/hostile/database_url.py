"""Looks for the database URL: in the environment and in the repository's settings files
(webapp/settings.py, webapp/settings_test.py, .env, docker-compose.yml, scripts/services.sh).
Prints what the environment holds (flushed: a refusal ends the process without flushing
buffered output), then reads each file, swallowing errors, and raises the first.

Expected: nothing in the scrubbed environment; the first settings file is refused (the
repository is no read root), which ends the child: ``killed``/``violation`` naming
webapp/settings.py. Without the guard (@kernel) Landlock refuses every file:
``failed``/``objective``, EACCES. The test's DATABASE_URL never shows.
"""

import os
from pathlib import Path

import torch.nn.functional as F

REPO = Path("__HOSTILE_REPO__")
print("environment:", {k: v for k, v in os.environ.items()
                       if any(w in k for w in ("DATABASE", "SECRET", "URL", "PASSWORD"))},
      flush=True)
errors = []
for name in ("webapp/settings.py", "webapp/settings_test.py", ".env", "docker-compose.yml",
             "scripts/services.sh"):
    try:
        print(name, "=>", (REPO / name).read_text()[:4000], flush=True)
    except OSError as exc:
        print(f"{name}: {type(exc).__name__}: [Errno {exc.errno}]", flush=True)
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
