"""Looks for the database URL: in the environment and in the repository's settings files
(webapp/settings.py, webapp/settings_test.py, .env, docker-compose.yml, scripts/services.sh).

Expected: nothing in the scrubbed environment; every settings file is refused (the
repository is no read root): ``killed``/``violation``; the test's DATABASE_URL never shows.
"""

import os
from pathlib import Path

import torch.nn.functional as F

REPO = Path("__HOSTILE_REPO__")
print("environment:", {k: v for k, v in os.environ.items()
                       if any(w in k for w in ("DATABASE", "SECRET", "URL", "PASSWORD"))})
errors = []
for name in ("webapp/settings.py", "webapp/settings_test.py", ".env", "docker-compose.yml",
             "scripts/services.sh"):
    try:
        print(name, "=>", (REPO / name).read_text()[:4000])
    except OSError as exc:
        errors.append(exc)
if errors:
    raise errors[0]


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
