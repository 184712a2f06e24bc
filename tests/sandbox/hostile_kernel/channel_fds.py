"""Looks at the descriptors it was given: the parent's channel must be exactly 0 (requests),
3 (replies) and 4 (report), with stdout/stderr on 1 and 2 and nothing else open. Reads a
request on 0, answers on 3 and 4.

Expected: descriptors {0, 1, 2, 3, 4} only; what the test wrote arrives, the answers
arrive at the test's ends.
"""

import fcntl
import json
import os


def is_open(fd):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        return True
    except OSError:
        return False


fds = [fd for fd in range(256) if is_open(fd)]
request = os.read(0, 100).decode()
os.write(3, b"reply:" + request.encode())
os.write(4, b"report:" + request.encode())
out = {"fds": fds, "request": request}
print("RESULT " + json.dumps(out), flush=True)
raise RuntimeError("RESULT " + json.dumps(out))
