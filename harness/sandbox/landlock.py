"""Linux Landlock through ctypes: the kernel-enforced file and TCP allow-list of the sandbox.

Landlock (Linux ≥ 5.13, TCP rules ≥ 6.7) lets an unprivileged process give up access
to everything outside a set of directory trees; the restriction is inherited by its
children and cannot be lifted. The sandbox child applies it before loading untrusted
code. Reference: the kernel's Documentation/userspace-api/landlock.rst.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # syscall numbers (all archs)
_VERSION_FLAG = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << 8, 1 << 9, 1 << 10, 1 << 11,
                                                        1 << 12)
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = READ_FILE | READ_DIR
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | TRUNCATE
         | IOCTL_DEV)  # ioctl: /dev/nvidia* for CUDA workers
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled."""
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _VERSION_FLAG)
    except (AttributeError, OSError):
        return 0
    return max(int(version), 0)


def _handled_fs(abi: int) -> int:
    access = (EXECUTE | READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR
              | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    if abi >= 2:
        access |= REFER
    if abi >= 3:
        access |= TRUNCATE
    if abi >= 5:
        access |= IOCTL_DEV
    return access


def restrict(read: Iterable[str | Path], write: Iterable[str | Path]) -> dict[str, object]:
    """Allow reading under ``read`` and reading/writing under ``write``; nothing else.

    Also denies every TCP bind and connect (ABI ≥ 4) and signals or abstract unix
    sockets leaving the sandbox (ABI ≥ 6). Returns what was enforced; raises OSError
    when the kernel has no Landlock (the caller decides whether that is fatal).
    """
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    libc = _libc()
    handled = _handled_fs(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        added = []
        for paths, access in ((read, READ), (write, READ | WRITE)):  # never EXECUTE
            for path in paths:
                if _add(libc, fd, Path(path), access & handled):
                    added.append(str(path))
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return {"abi": abi, "tcp": abi >= 4, "scoped": abi >= 6, "rules": len(added)}


def _add(libc: ctypes.CDLL, ruleset: int, path: Path, access: int) -> bool:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False  # a path that does not exist here grants nothing
    try:
        if not path.is_dir():
            access &= FILE_ONLY
        rule = _PathBeneathAttr(access, target)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
        return True
    finally:
        os.close(target)
