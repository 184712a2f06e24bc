"""A seccomp-bpf filter for the sandbox child: no sockets, no new processes, no programs.

Landlock covers files and TCP; it does not cover unix-domain sockets reachable by
path (e.g. a database's socket) or process creation. This filter, installed after
the trusted imports and before the objective loads, makes the kernel refuse:

- ``socket``, ``socketpair``, ``connect``: the trainer needs no sockets at all;
- ``fork``, ``vfork``, and ``clone`` without ``CLONE_THREAD`` (threads stay allowed:
  the BLAS and OpenMP pools need them); ``clone3`` answers ENOSYS so the C library
  falls back to ``clone``, whose flags the filter can read;
- ``memfd_create``/``memfd_secret`` (native code imported from an anonymous file);
- ``chmod``/``chown``/``utimensat``/``*xattr`` and their variants: Landlock does not
  cover file metadata, and the child may be uid 0 without capabilities (owner of
  root's files);
- ``execve``/``execveat``, ``ptrace``, ``process_vm_*``, namespaces, mounts, ``bpf``,
  ``userfaultfd``, ``perf_event_open``, ``io_uring``, kernel keyrings;
- System V IPC (``shm*``, ``msg*``, ``sem*``) and POSIX message queues (``mq_*``): a
  segment or queue is a channel between jobs (each job also has its own IPC namespace);
- new executable memory (W^X): ``mmap`` with ``PROT_EXEC`` of anonymous memory or together
  with ``PROT_WRITE``, and ``mprotect``/``pkey_mprotect`` with ``PROT_EXEC``. Only files
  can be mapped executable, read-only: the libraries of the read roots (importing an
  extension module still works); the work directory and the devices are ``noexec``.
  Nothing can write code into memory and run it (shellcode, a JIT). What a loss computes
  on the CPU does not need it (softmax, log-softmax, gather, matmul, cross-entropy,
  logsumexp, autograd: tests/sandbox/test_sandbox_kernel.py); oneDNN's convolutions do (they
  JIT-compile their kernels, and fail with "could not create a primitive"), but the model
  runs in the worker, not here. ``install(exec_mappings=True)`` leaves this rule out;
- any other ABI (32-bit or x32 system calls on x86-64): the process is killed.

Denied calls fail with EPERM (ENOSYS for ``clone3``); nothing is killed for trying.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP = {"x86_64": 317, "aarch64": 277}  # the seccomp(2) system call
_SET_MODE_FILTER, _FILTER_FLAG_TSYNC = 1, 1
_LD_ABS_W, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
CLONE_THREAD = 0x00010000

# name -> (x86_64, aarch64) system call numbers; None where the call does not exist.
_CALLS = {
    "socket": (41, 198), "socketpair": (53, 199), "connect": (42, 203),
    "fork": (57, None), "vfork": (58, None), "execve": (59, 221), "execveat": (322, 281),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "bpf": (321, 280),
    "userfaultfd": (323, 282), "perf_event_open": (298, 241), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "keyctl": (250, 219),
    "add_key": (248, 217), "request_key": (249, 218),
    # anonymous files that could be mapped executable (a native module from memory)
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    # file metadata: Landlock has no right for modes, owners, times or extended attributes
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "utime": (132, None), "utimes": (235, None), "futimesat": (261, None),
    "utimensat": (280, 88), "setxattr": (188, 5), "lsetxattr": (189, 6),
    "fsetxattr": (190, 7), "removexattr": (197, 14), "lremovexattr": (198, 15),
    "fremovexattr": (199, 16), "setxattrat": (463, 463), "removexattrat": (466, 466),
    # System V IPC and POSIX message queues: channels that could outlive a job or reach another
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183), "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
}
_CLONE, _CLONE3 = (56, 220), (435, 435)
_MMAP, _MPROTECT, _PKEY_MPROTECT = (9, 222), (10, 226), (329, 288)
PROT_WRITE, PROT_EXEC, MAP_ANONYMOUS = 0x2, 0x4, 0x20  # the same on x86_64 and aarch64
_ARG = (16, 24, 32, 40, 48, 56)  # offsets of seccomp_data.args[i] (low 32 bits, little-endian)
_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}


def supported() -> bool:
    return platform.machine() in _ARCH


def _program(exec_mappings: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter; ``exec_mappings=True`` leaves out the W^X rule (new executable memory)."""
    audit_arch, column = _ARCH[platform.machine()]
    denied = sorted({numbers[column] for numbers in _CALLS.values()
                     if numbers[column] is not None})
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    # (code, jump if true, jump if false, k) with jumps as labels, resolved at the end
    prog: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS_W, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, audit_arch),
        (_RET_K, 0, 0, _KILL_PROCESS),
        (_LD_ABS_W, 0, 0, 0)]  # seccomp_data.nr
    if column == 0:  # x32 system calls carry bit 30
        prog += [(_JGE_K, "eperm", 0, 0x40000000)]
    for nr in denied:
        prog += [(_JEQ_K, "eperm", 0, nr)]
    prog += [(_JEQ_K, "enosys", 0, _CLONE3[column])]
    if not exec_mappings:
        prog += [(_JEQ_K, "protect", 0, _MPROTECT[column]),
                 (_JEQ_K, "protect", 0, _PKEY_MPROTECT[column]),
                 (_JEQ_K, 0, "clone", _MMAP[column]),
                 (_LD_ABS_W, 0, 0, _ARG[2]),  # mmap's prot
                 (_JSET_K, 0, "allow", PROT_EXEC),
                 (_JSET_K, "eperm", 0, PROT_WRITE),
                 (_LD_ABS_W, 0, 0, _ARG[3]),  # mmap's flags
                 (_JSET_K, "eperm", "allow", MAP_ANONYMOUS),
                 ("protect", _LD_ABS_W, 0, 0, _ARG[2]),  # mprotect's prot
                 (_JSET_K, "eperm", "allow", PROT_EXEC)]
    prog += [("clone", _JEQ_K, 0, "allow", _CLONE[column]),
             (_LD_ABS_W, 0, 0, _ARG[0]),  # clone's flags: low 32 bits of args[0]
             (_JSET_K, "allow", "eperm", CLONE_THREAD),
             ("allow", _RET_K, 0, 0, _ALLOW),
             ("eperm", _RET_K, 0, 0, eperm),
             ("enosys", _RET_K, 0, 0, enosys)]
    return _resolve(prog)


def _resolve(prog: list[tuple]) -> list[tuple[int, int, int, int]]:
    """Turn label jumps into BPF's relative offsets (forward only, at most 255)."""
    labels = {ins[0]: i for i, ins in enumerate(prog) if isinstance(ins[0], str)}
    out = []
    for i, ins in enumerate(prog):
        code, jt, jf, k = ins[1:] if isinstance(ins[0], str) else ins
        jt, jf = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp program: jump out of range")
        out.append((code, jt, jf, k))
    return out


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(exec_mappings: bool = False) -> dict[str, object]:
    """Install the filter on every thread of this process (TSYNC) and all they create.

    ``exec_mappings=True`` keeps new executable memory allowed (for a trainer that needs a
    JIT); by default only files can be mapped executable."""
    if not supported():
        raise OSError(f"no seccomp filter for {platform.machine()}")
    prog = _program(exec_mappings)
    raw = b"".join(struct.pack("HBBI", *instruction) for instruction in prog)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    fprog = _Fprog(len(prog), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    result = libc.syscall(_SECCOMP[platform.machine()], _SET_MODE_FILTER, _FILTER_FLAG_TSYNC,
                          ctypes.byref(fprog))
    if result != 0:
        raise OSError(ctypes.get_errno() or errno.EBUSY, "seccomp(SET_MODE_FILTER) failed")
    return {"denied": sorted(_CALLS), "instructions": len(prog),
            "exec_mappings": exec_mappings}
