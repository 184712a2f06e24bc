"""The sandbox's kernel layers hold on their own: IPC, disk quota, memory, the minimal root,
W^X, and the descriptors a job gets.

Each attack is a file in tests/sandbox/hostile_kernel/ (its docstring says what it attempts and
what must happen), run as an objective's top-level code: through
``harness.sandbox.validate_sandboxed`` where the real validation path is enough, or
straight through ``harness.sandbox.launch.launch`` (a validation job, as
``harness.sandbox.process`` writes it) where the test needs its own limits, the Python
guard out of the way (it refuses ctypes and mmap before the kernel could), a channel, or
to look at the running job from outside. Where possible the property is checked from
this side: the machine's /proc/sysvipc, the job's tmpfs through /proc/PID/root, its exit
status.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from harness.contract import registry
from harness.sandbox import launch as sandbox_launch
from harness.sandbox import validate_sandboxed
from harness.sandbox.child import read_roots, write_roots
from harness.sandbox.launch import Launch, isolation_support

HOSTILE = Path(__file__).resolve().parent / "hostile_kernel"
REPO = Path(__file__).resolve().parents[2]
PARAMS_LINE = "PARAMS: dict = {}  # the test puts its parameters here"
SUPPORT = isolation_support()
NAMESPACES = bool(SUPPORT["namespaces"])
LANDLOCK = int(SUPPORT["landlock"])
MiB = 1 << 20


def _memory_cgroup_available() -> bool:
    if Path("/sys/fs/cgroup/memory/cgroup.procs").exists():
        return True
    try:
        return "memory" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        return False


needs_kernel = pytest.mark.skipif(not (NAMESPACES and LANDLOCK and os.geteuid() == 0),
                                  reason=f"needs root, namespaces and Landlock ({SUPPORT})")
needs_memory_cgroup = pytest.mark.skipif(not _memory_cgroup_available(),
                                         reason="needs a memory cgroup controller")
pytestmark = needs_kernel


def attack(name: str, **params: object) -> str:
    code = (HOSTILE / f"{name}.py").read_text()
    assert PARAMS_LINE in code or not params, name
    return code.replace(PARAMS_LINE, f"PARAMS: dict = {params!r}")


def result_of(text: str) -> dict:
    """The attack's ``RESULT {...}`` line."""
    found = re.findall(r"RESULT (\{.*\})", text)
    assert found, f"the attack reported nothing:\n{text[-3000:]}"
    return json.loads(found[-1])


class Job:
    """One validation job through ``launch``: the attack's top-level code runs in the
    child after its lock-down (Landlock, seccomp and the guard, each as asked)."""

    def __init__(self, code: str, *, disk: int = 64 * MiB, memory: int = 16 << 30,
                 memory_bytes: int | None = None, guard: bool = False, landlock: bool = True,
                 seccomp: bool = True, channel: bool = False, mode: str = "fork",
                 job: str | None = None) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="harness-sandbox-"))
        (self.workdir / "tmp").mkdir()
        (self.workdir / "attack.py").write_text(code)
        (self.workdir / "job.json").write_text(json.dumps({
            "task": "validate", "overrides": {}, "objective_file": "attack.py", "threads": 1,
            "device": "cpu", "suite_packages": registry.import_roots(),
            "python_guard": guard, "landlock": landlock, "seccomp": seccomp,
            "pid_namespace": NAMESPACES}))
        rlimits = {"RLIMIT_AS": (memory, memory), "RLIMIT_CPU": (120, 125),
                   "RLIMIT_NOFILE": (256, 256), "RLIMIT_NPROC": (256, 256),
                   "RLIMIT_FSIZE": (disk, disk), "RLIMIT_CORE": (0, 0)}
        self.ends: list[int] = []
        ours: tuple[int, int, int] | None = None
        theirs = None
        if channel:
            pipes = [os.pipe() for _ in range(3)]
            theirs = (pipes[0][0], pipes[1][1], pipes[2][1])
            ours = (pipes[0][1], pipes[1][0], pipes[2][0])
        self.requests, self.replies, self.report = ours or (None, None, None)
        previous = os.environ.get("HARNESS_SANDBOX_MODE")
        os.environ["HARNESS_SANDBOX_MODE"] = mode
        try:
            extra = {"memory_bytes": memory_bytes} if memory_bytes is not None else {}
            if job:  # one of a job's processes: their memory bounded together
                extra.update(job=job, job_memory_bytes=memory_bytes)
            self.running = sandbox_launch.launch(Launch(
                self.workdir, rlimits, None, NAMESPACES, 1, "cpu", channel=theirs, **extra))
        finally:
            if previous is None:
                os.environ.pop("HARNESS_SANDBOX_MODE")
            else:
                os.environ["HARNESS_SANDBOX_MODE"] = previous
            for fd in theirs or ():  # the caller closes its copies after launch
                os.close(fd)
        self.output = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.code: int | None = None

    def _read(self) -> None:
        while chunk := os.read(self.running.output.fileno(), 65536):
            self.output += chunk

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def wait_for(self, needle: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            assert time.monotonic() < deadline, f"no {needle!r} in:\n{self.text[-3000:]}"
            assert self.running.poll() is None, f"ended before {needle!r}:\n{self.text}"
            time.sleep(0.02)

    def wait(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while (ended := self.running.poll()) is None:
            if time.monotonic() > deadline:
                self.running.kill()
                pytest.fail(f"the job did not end:\n{self.text[-3000:]}")
            time.sleep(0.02)
        self.reader.join(timeout=10)
        self.code = ended[0]
        return self.code

    def close(self) -> None:
        if self.code is None:
            self.running.kill()
            self.wait(timeout=30)
        self.running.close()
        for fd in (self.requests, self.replies, self.report):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_job(code: str, **kwargs: object) -> tuple[int, str]:
    with Job(code, **kwargs) as job:
        return job.wait(), job.text


def validation_result(code: str, filename: str = "attack.py") -> dict:
    report = validate_sandboxed(code, filename)
    return result_of("\n".join(p.message for p in report.problems))


# --- System V and POSIX IPC ----------------------------------------------------------------


def _host_shm_keys() -> set[int]:
    with open("/proc/sysvipc/shm") as f:
        next(f)
        return {int(line.split()[0]) for line in f if line.strip()}


def _remove_host_segment(key: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    shm = libc.shmget(key, 0, 0)
    if shm >= 0:
        libc.shmctl(shm, 0, None)  # IPC_RMID


def test_seccomp_refuses_every_ipc_call():
    key = 0x48000000 | (uuid.uuid4().int & 0xFFFFFF)
    try:
        code, text = run_job(attack("sysv_ipc", mode="create", key=key, size=MiB,
                                    message="secret"))
        result = result_of(text)
        assert result == {"shmget": "Operation not permitted",
                          "msgget": "Operation not permitted",
                          "semget": "Operation not permitted",
                          "mq_open": "Operation not permitted"}, result
        assert key not in _host_shm_keys()
    finally:
        _remove_host_segment(key)


def test_a_shared_memory_segment_dies_with_its_job():
    """Seccomp off: the IPC namespace alone keeps a segment from the machine and from the
    next job (256 MiB, as in the report)."""
    key = 0x48000000 | (uuid.uuid4().int & 0xFFFFFF)
    message = f"left by an earlier job {uuid.uuid4().hex}"
    try:
        _, text = run_job(attack("sysv_ipc", mode="create", key=key, size=256 * MiB,
                                 message=message), seccomp=False)
        assert result_of(text)["shmget"] == "ok"  # made, in the job's own namespace
        assert key not in _host_shm_keys()
        _, text = run_job(attack("sysv_ipc", mode="read", key=key, size=0, message=message),
                          seccomp=False)
        result = result_of(text)
        assert result["shmget"] == "No such file or directory", result
        assert message not in text
    finally:
        _remove_host_segment(key)


# --- the disk quota: a tmpfs of the quota -------------------------------------------------


def _tmpfs_seen_from_outside(job: Job) -> os.statvfs_result:
    """The job's work directory as the machine sees it through the job's root."""
    return os.statvfs(f"/proc/{job.running.pid}/root{job.workdir}")


def _bytes_under(root: Path) -> int:
    """What the files under ``root`` hold on the machine's disk (any depth: by descriptor)."""
    total = 0
    for _, _, files, fd in os.fwalk(root):
        total += sum(os.stat(name, dir_fd=fd, follow_symlinks=False).st_blocks * 512
                     for name in files)
    return total


@pytest.mark.parametrize("mode", ["unlinked", "deep"])
def test_the_disk_quota_counts_what_a_walk_cannot_see(mode):
    quota = 16 * MiB
    code = attack("disk_quota", mode=mode, bound=4 * quota, file_bytes=4 * MiB, wait=True)
    with Job(code, disk=quota, guard=True, channel=True) as job:
        job.wait_for("RESULT")
        result = result_of(job.text)
        st = _tmpfs_seen_from_outside(job)
        host = _bytes_under(job.workdir)
        os.write(job.requests, b"x")
        job.wait()
    assert result["error"] == "ENOSPC", result
    assert quota - 2 * MiB <= result["written"] <= quota, result
    if mode == "deep":
        assert result["depth"] * 201 > 4096
    assert st.f_blocks * st.f_frsize == quota  # the kernel's size is the quota
    assert (st.f_blocks - st.f_bfree) * st.f_frsize <= quota
    assert host < MiB  # nothing of it on the machine's disk
    assert job.running.tmpfs_workdir is True


def test_filling_the_quota_through_unlinked_files_ends_the_validation():
    """Through the real validation path: ENOSPC at the 64 MiB validation quota."""
    code = attack("disk_quota", mode="unlinked", bound=256 * MiB, file_bytes=16 * MiB,
                  wait=False)
    report = validate_sandboxed(code, "fill.py")
    text = "\n".join(p.message for p in report.problems)
    assert "ENOSPC" in text or "disk quota" in text, text
    if "RESULT" in text:
        assert result_of(text)["written"] <= 64 * MiB


# --- memory: a cgroup per job --------------------------------------------------------------


@needs_memory_cgroup
def test_the_memory_cgroup_stops_what_the_address_space_limit_allows():
    limit = 256 * MiB
    with Job(attack("memory_touch", bound=1 << 30), memory=16 << 30, memory_bytes=limit,
             guard=True) as job:
        code = job.wait()
        text = job.text
    held = [int(n) for n in re.findall(r"held (\d+) MiB", text)]
    assert code == -9, (code, text[-2000:])  # the kernel's OOM kill
    assert "done" not in text
    assert held and max(held) <= (limit >> 20) + 32, held
    assert job.running.memory_cgroup is True


@needs_memory_cgroup
def test_a_jobs_processes_share_one_memory_budget():
    """Each of a job's loss servers may hold up to the budget, all of them together no more:
    a first one holds 160 of 256 MiB and waits, a second one keeps allocating. The kernel
    kills within the job (the larger first) whenever the two together reach the budget;
    with a budget each, the first would wait out its minute untouched."""
    limit = 256 * MiB
    job = f"job-{uuid.uuid4().hex}"
    with Job(attack("memory_touch", bound=160 * MiB, hold=60), memory_bytes=limit,
             job=job) as holder:
        holder.wait_for("holding")
        # the first processes the kernel kills when the machine runs out (the job's too)
        assert Path(f"/proc/{holder.running.pid}/oom_score_adj").read_text().strip() == "1000"
        with Job(attack("memory_touch", bound=1 << 30), memory_bytes=limit, job=job) as other:
            assert other.wait() == -9, other.text[-2000:]
        assert holder.wait(timeout=10) == -9, holder.text[-2000:]  # long before its minute
    held = [int(n) for n in re.findall(r"held (\d+) MiB", other.text)]
    assert held and max(held) <= (limit >> 20), held


# --- the minimal root -----------------------------------------------------------------------


@pytest.fixture
def host_paths(tmp_path):
    """Host paths outside every root: a marker file, another job's work directory with a
    file in it, a symbolic link; and one path inside the roots, as a control."""
    marker = tmp_path / f"marker-{uuid.uuid4().hex}"
    marker.write_text("on the machine")
    sibling = Path(tempfile.mkdtemp(prefix="harness-sandbox-"))
    (sibling / "job.json").write_text("{}")
    link = tmp_path / f"link-{uuid.uuid4().hex}"
    link.symlink_to("/etc/passwd")
    control = str(REPO / "harness" / "__init__.py")
    yield {"paths": [str(marker), str(sibling), str(sibling / "job.json"), "/etc/passwd",
                     str(REPO / "README.md"), control],
           "link": str(link), "watch": str(sibling), "roots": sorted(_allowed_mount_points())}
    shutil.rmtree(sibling, ignore_errors=True)


def _assert_only_the_roots(result: dict, n: int) -> None:
    for i in range(n - 1):
        assert result[f"stat:{i}"] == "ENOENT", result
        assert result[f"lstat:{i}"] == "ENOENT", result
        assert result[f"exists:{i}"] is False, result
    assert result[f"stat:{n - 1}"].startswith("ok"), result  # the roots are there
    assert result["readlink"] == "ENOENT", result
    assert result["/proc/cmdline"] == "ENOENT", result
    assert result["/proc/loadavg"] == "ENOENT", result


def _allowed_mount_points() -> set[str]:
    nowhere = Path("/nonexistent")
    roots = read_roots(nowhere, True, "cpu") + write_roots(nowhere, "cpu")
    return {os.path.realpath(p) for p in roots} | {"/", "/proc"}


def test_host_paths_do_not_exist_for_the_objective(host_paths):
    """Through the real validation path, guard on (``stat`` raises no audit event)."""
    result = validation_result(attack("host_paths", **host_paths))
    _assert_only_the_roots(result, len(host_paths["paths"]))
    assert result["mount points"] == []  # nothing mounted but its roots and work directory


def test_host_paths_do_not_exist_for_the_kernel_alone(host_paths):
    """Guard off: inotify on another job's directory (ctypes) finds nothing either."""
    code, text = run_job(attack("host_paths", inotify=True, **host_paths))
    result = result_of(text)
    _assert_only_the_roots(result, len(host_paths["paths"]))
    assert result["inotify"] == "ENOENT", result


def test_the_cmdline_the_job_could_read_is_not_the_machines():
    """Whatever /proc shows, it is not the host's kernel command line."""
    host = Path("/proc/cmdline").read_text().strip()
    code = ("try:\n    text = open('/proc/cmdline').read()\nexcept OSError as exc:\n"
            "    text = type(exc).__name__\nraise RuntimeError('CMDLINE ' + text)\n")
    report = validate_sandboxed(code, "cmdline.py")
    message = "\n".join(p.message for p in report.problems)
    assert "CMDLINE FileNotFoundError" in message, message
    assert host not in message


# --- W^X ------------------------------------------------------------------------------------


def test_no_new_executable_memory_in_the_sandbox():
    code, text = run_job(attack("exec_memory"))
    result = result_of(text)
    assert result == {"anonymous rwx": "EPERM", "anonymous rx": "EPERM",
                      "/dev/zero rwx": "EPERM", "mprotect rx": "EPERM",
                      "import extension": "ok"}, result


LOSS_OPS = textwrap.dedent("""
    import json, mmap, sys
    import torch
    import torch.nn.functional as F
    from harness.sandbox import seccomp
    torch.set_num_threads(1)
    if sys.argv[1] == "allowed":
        seccomp.install(exec_mappings=True)
    else:
        seccomp.install()  # the default
    out = {}
    try:
        mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        out["rwx"] = "ok"
    except OSError as exc:
        out["rwx"] = exc.errno
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        logits = torch.randn(256, 10, dtype=dtype, requires_grad=True)
        targets = torch.randint(0, 10, (256,))
        w = torch.randn(10, 10, dtype=dtype)
        logp = F.log_softmax(logits, 1)
        loss = (F.cross_entropy(logits, targets) + F.softmax(logits, 1).max(1).values.mean()
                - logp.gather(1, targets[:, None]).mean() + torch.logsumexp(logits, 1).mean()
                + torch.matmul(logits, w).mean() + (logits @ logits.T).mean()
                + F.nll_loss(logp, targets) + torch.bmm(logits[None], w[None]).mean())
        loss.backward()
        out[str(dtype)] = bool(torch.isfinite(logits.grad).all())
    print(json.dumps(out))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux only")
@pytest.mark.parametrize("mappings", ["refused", "allowed"])
def test_a_losss_torch_ops_work_without_executable_memory(mappings):
    proc = subprocess.run([sys.executable, "-c", LOSS_OPS, mappings], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rwx"] == (1 if mappings == "refused" else "ok")  # EPERM
    assert out["torch.float32"] is True and out["torch.float64"] is True


# --- shared pages --------------------------------------------------------------------------------

SHARED_PAGES = textwrap.dedent("""
    import json, mmap
    import tqdm
    from harness.sandbox import shared_pages, traced
    traced.warm()  # what the fork server does before it forks its first job
    tqdm.tqdm(total=1, disable=False).close()
    kept = shared_pages.writable_shared()
    page = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED)  # what the check must see
    print(json.dumps([kept, shared_pages.writable_shared()]))
""")


def test_the_fork_server_holds_no_writable_shared_page():
    """torch.export's tqdm made a semaphore in a shared page that every forked job mapped;
    the check the fork server and each job run before serving finds such a page."""
    proc = subprocess.run([sys.executable, "-c", SHARED_PAGES], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept, found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert kept == []
    assert len(found) == 1 and " rw-s " in found[0], found


# --- the descriptors a job gets ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fork", "exec"])
def test_the_channel_is_0_3_and_4_and_nothing_else(mode):
    with Job(attack("channel_fds"), channel=True, guard=True, mode=mode) as job:
        os.write(job.requests, b"hello")
        job.wait_for("RESULT")
        reply = os.read(job.replies, 100)
        report = os.read(job.report, 100)
        job.wait()
        result = result_of(job.text)
    assert result == {"fds": [0, 1, 2, 3, 4], "request": "hello"}, result
    assert (reply, report) == (b"reply:hello", b"report:hello")


def test_without_a_channel_stdin_is_empty_and_only_stdio_is_open():
    code, text = run_job(textwrap.dedent("""
        import fcntl, json, os
        def is_open(fd):
            try:
                fcntl.fcntl(fd, fcntl.F_GETFD)
                return True
            except OSError:
                return False
        out = {"fds": [fd for fd in range(256) if is_open(fd)], "stdin": os.read(0, 10).decode()}
        print("RESULT " + json.dumps(out), flush=True)
    """))
    assert result_of(text) == {"fds": [0, 1, 2], "stdin": ""}
