"""Hides its violation where the guard used to report it: points file descriptor 2
(stderr) elsewhere while it reads /etc/passwd (refused, exception swallowed), puts
stderr back, and monkeypatches json.dumps so that whatever its server writes says
nothing of violations; trains normally. Per case (``__HOSTILE_PARAM__``), fd 2 becomes:

- ``devnull``: /dev/null;
- ``broken_pipe``: a pipe whose read end is closed, with SIGPIPE back to its default
  action (Python ignores it), so that a report written there would kill the process with
  SIGPIPE.

Expected: the guard no longer writes to stderr at all but to its own report pipe
(descriptor 4): the refusal ends the server (nothing after it runs) and the cell is
``killed``/``violation`` naming /etc/passwd, as if stderr had not been touched.
"""

import json
import os
import signal

import torch.nn.functional as F

if "__HOSTILE_PARAM__" == "devnull":
    target = os.open("/dev/null", os.O_WRONLY)
else:
    read_end, target = os.pipe()
    os.close(read_end)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
saved = os.dup(2)
os.dup2(target, 2)
try:
    open("/etc/passwd").read()
except OSError as exc:
    print("read refused:", type(exc).__name__, flush=True)
finally:
    os.dup2(saved, 2)

_dumps = json.dumps
json.dumps = lambda report, **kw: _dumps({**report, "violations": []}, **kw)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
