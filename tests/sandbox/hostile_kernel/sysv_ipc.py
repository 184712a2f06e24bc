"""Creates a System V shared-memory segment under a known key and leaves a message in it
(``create``), or looks for that segment and reads the message (``read``), to pass data
from one job to a later one; also tries message queues, semaphores and POSIX message
queues. Runs without the Python guard (ctypes), so only the kernel layers answer.

Expected: each job has its own IPC namespace (a segment dies with its job: the machine's
/proc/sysvipc/shm never shows it, a later job finds nothing) and seccomp refuses every
System V and POSIX IPC call with EPERM.
"""

import ctypes
import json
import os

PARAMS: dict = {}  # the test puts its parameters here
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
out = {}


def call(name, fn, *args):
    result = fn(*args)
    failed = result in (-1, None, ctypes.c_void_p(-1).value)
    out[name] = os.strerror(ctypes.get_errno()) if failed else "ok"
    return None if failed else result


key, size = PARAMS["key"], PARAMS["size"]
if PARAMS["mode"] == "create":
    shm = call("shmget", libc.shmget, key, size, IPC_CREAT | IPC_EXCL | 0o666)
    if shm is not None:
        address = call("shmat", libc.shmat, shm, None, 0)
        if address is not None:
            ctypes.memmove(address, PARAMS["message"].encode(), len(PARAMS["message"]))
    call("msgget", libc.msgget, key, IPC_CREAT | 0o666)
    call("semget", libc.semget, key, 1, IPC_CREAT | 0o666)
    libc.mq_open.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
    call("mq_open", libc.mq_open, b"/harness-kernel", os.O_CREAT | os.O_RDWR, 0o666, None)
else:
    shm = call("shmget", libc.shmget, key, 0, 0)
    if shm is not None:
        address = call("shmat", libc.shmat, shm, None, 0)
        if address is not None:
            out["message"] = ctypes.string_at(address, len(PARAMS["message"])).decode()
    call("msgget", libc.msgget, key, 0)
print("RESULT " + json.dumps(out), flush=True)
raise RuntimeError("RESULT " + json.dumps(out))
