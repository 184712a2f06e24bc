"""Only the loss runs inside: a submitted objective's hooks, served from sandboxed processes.

The trusted trainer keeps the model, the data, the optimizer and every member. For a
submitted objective it binds :meth:`LossServers.objective` instead of the objective's
module, whose hooks (:mod:`harness.sandbox.remote_hook`) send every member's slice of
exactly what the hook's signature asks for (the positional tensors, the named context; a
lazily computed context such as ``crown_ibp_worst_logits`` is computed here first) to
that member's own sandboxed server (:class:`LossServers`, one process per member, so no
process sees two members' labels), and get back the member's reduced loss and its
gradients with respect to the tensors it was sent. ``index`` is never sent; the
per-sample ``state`` is the batch's slice, written back here. The wire format is
:mod:`harness.sandbox.lossproto`; this module writes the requests, reads and checks the
replies (every size known before a byte is read), watches the limits meanwhile and keeps
the secret row order's key (:func:`version_row_key`).

The hook is called inside ``torch.func.vmap`` over members (harness.train.loop); the
autograd function's ``vmap`` rule turns the member-batched call into one round trip to
all servers, their replies read as they arrive.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import select
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from harness.contract import registry
from harness.objectives.loading import LoadedObjective
from harness.sandbox import lossproto
from harness.sandbox.lossproto import ProtocolError
from harness.sandbox.process import Limits, Process
from harness.sandbox.remote_hook import RemoteHook
from harness.sandbox.traced import MAX_CONST_BYTES, Graph, Untraceable

HEARTBEAT_SECONDS = 5.0
APPLY = -2  # a post-hoc reply: its header declares the output, checked (_payload)
MAX_APPLY_BYTES = 64 << 20
# Traced graphs (their wire form) by code, hook and call, most recent last.
_TRACED: dict[str, tuple[dict[str, Any], bytes]] = {}
JSON_SCALARS = (str, int, float, bool, type(None))


class ServerEnded(Exception):
    """A member's server ended or broke the protocol: the whole group stops."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(error)
        self.reason, self.error = reason, error

    def __reduce__(self):  # pickles (a worker's pool returns it): both arguments, not args
        return type(self), (self.reason, self.error)


class RemoteError(Exception):
    """The objective's hook raised (or returned something that is not a loss) in its server."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(text)
        self.reason = reason

    def __reduce__(self):
        return type(self), (str(self), self.reason)


class LossServers:
    """One sandboxed loss server per member, all serving the same objective file."""

    def __init__(self, members: int, code: str, filename: str,
                 hyperparameters: Mapping[str, Any], limits: Limits, *, device: str = "cpu",
                 python_guard: bool = True, heartbeat: Callable[[], None] | None = None,
                 identity: str = "", row_secret: bytes | None = None) -> None:
        self.limits, self.heartbeat = limits, heartbeat
        self.deadline = time.monotonic() + limits.wall_seconds
        self._last_beat = self._last_idle_watch = time.monotonic()
        self.code, self.filename = code, filename
        # The row order: secret, but the same whenever the same job runs again; drawn from
        # the version's own key (row_secret: the one a server gave for it, see version_row_key)
        from harness.objectives.loading import version_key_of

        self.row_secret = row_secret or version_row_key(version_key_of(code, hyperparameters))
        digest = hmac.new(self.row_secret, json.dumps([identity]).encode(),
                          hashlib.sha256).digest()
        self.rows = np.random.default_rng(int.from_bytes(digest[:16], "little"))
        self.processes: list[Process] = []
        self.declared: dict[str, Any] = {}
        self.served: dict[str, str] = {}  # per hook: "graph", or why it is served per call
        fields = {"task": "serve", "hyperparameters": dict(hyperparameters)}
        job = f"job-{uuid.uuid4().hex}"  # their memory, bounded together
        try:  # started side by side (each from its own fork server)
            failures: list[BaseException] = []
            with ThreadPoolExecutor(max_workers=min(members, 8)) as pool:
                futures = [pool.submit(Process, fields, code, filename, limits, threads=1,
                                       python_guard=python_guard, job=job)
                           for _ in range(members)]
                for future in futures:  # the loss is small: one thread, on the CPU
                    try:
                        self.processes.append(future.result())
                    except BaseException as exc:  # noqa: BLE001 - the rest are closed below
                        failures.append(exc)
            if failures:
                raise failures[0]
            for p in self.processes:
                os.set_blocking(p.requests, False)
                os.set_blocking(p.replies, False)
        except BaseException:
            self.close()
            raise

    def start(self) -> None:
        """Wait for every server's hello: the objective loaded (or raise its failure)."""
        hellos = self._exchange({}, {m: 0 for m in range(len(self.processes))}, hello=True)
        for m, (head, _) in sorted(hellos.items()):
            if "error" in head:
                raise self._error(m, head)
        self.declared = _checked_declaration(hellos[0][0].get("hello"))

    # --- the objective as the trainer sees it -----------------------------------------

    def objective(self) -> LoadedObjective:
        d = self.declared
        return LoadedObjective(name=d["name"], origin="file", source=self.code,
                               hooks={h: RemoteHook(self, h) for h in d["hooks"]},
                               defaults=d["defaults"], hyperparameters=d["hyperparameters"],
                               path=self.filename, context=d["context"], model=d["model"])

    # --- one hook call --------------------------------------------------------------------

    def call(self, hook: str, args: list[Any], kwargs: dict[str, Any], leaves: list[Tensor],
             grad: list[int], mutable: list[int]) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Every member's (loss, grads of ``grad`` leaves, new ``mutable`` leaves); the
        leaves are stacked ``[M, ...]``, member ``m`` gets row ``m``."""
        members = len(self.processes)
        rows = [[leaf[m].detach().cpu().contiguous().numpy() for leaf in leaves]
                for m in range(members)]
        spec = [[a.dtype.str, list(a.shape)] for a in rows[0]]
        header = {"hook": hook, "leaves": spec, "args": args, "kwargs": kwargs,
                  "grad": grad, "mutable": mutable}
        text = json.dumps(header, separators=(",", ":")).encode()
        prefix = lossproto.LENGTH.pack(len(text)) + text
        requests = [prefix + b"".join(a.tobytes() for a in row) for row in rows]
        expected = 8 + lossproto.nbytes(spec, grad) + lossproto.nbytes(spec, mutable)
        replies = self._exchange(dict(enumerate(requests)), dict.fromkeys(range(members),
                                                                            expected))
        losses, grads, mutated = [], [], []
        for m, (head, payload) in sorted(replies.items()):
            if "error" in head:
                raise self._error(m, head)
            losses.append(np.frombuffer(payload, "<f8", count=1)[0])
            parts = lossproto.split(memoryview(payload)[8:], spec, grad + mutable)
            grads.append(parts[:len(grad)])
            mutated.append(parts[len(grad):])
        device = leaves[0].device
        dtype = next((leaves[i].dtype for i in grad), torch.float32)
        loss = torch.tensor(np.array(losses), dtype=dtype, device=device)
        stack = lambda k, rows: torch.from_numpy(np.stack([r[k] for r in rows])).to(device)  # noqa: E731
        return (loss, [stack(k, grads) for k in range(len(grad))],
                [stack(k, mutated) for k in range(len(mutable))])

    def apply(self, hook: str, args: list[Any], kwargs: dict[str, Any],
              leaves: list[Tensor]) -> Tensor:
        """Every member's output of a post-hoc hook (no loss, no gradient), stacked; the
        leaves are stacked ``[M, ...]``, member ``m`` gets row ``m``."""
        members = len(self.processes)
        rows = [[leaf[m].detach().cpu().contiguous().numpy() for leaf in leaves]
                for m in range(members)]
        spec = [[a.dtype.str, list(a.shape)] for a in rows[0]]
        header = {"hook": hook, "leaves": spec, "args": args, "kwargs": kwargs, "apply": True}
        text = json.dumps(header, separators=(",", ":")).encode()
        prefix = lossproto.LENGTH.pack(len(text)) + text
        requests = [prefix + b"".join(a.tobytes() for a in row) for row in rows]
        replies = self._exchange(dict(enumerate(requests)),
                                 dict.fromkeys(range(members), APPLY))
        outs = []
        for m, (head, payload) in sorted(replies.items()):
            if "error" in head:
                raise self._error(m, head)
            dtype, shape = head["out"]
            outs.append(np.frombuffer(payload, dtype).reshape(shape))
        if any(o.shape != outs[0].shape or o.dtype != outs[0].dtype for o in outs):
            raise RemoteError(f"{hook} returned outputs of different shapes or dtypes for "
                              f"different members: {[(o.dtype.str, o.shape) for o in outs]}"
                              [:2000], "objective")
        return torch.from_numpy(np.stack(outs))

    def _exchange(self, requests: dict[int, bytes], expected: dict[int, int], *,
                  hello: bool = False) -> dict[int, tuple[dict[str, Any], bytes]]:
        """Write each request, read a reply from every member in ``expected`` (its payload's
        size, known beforehand), as the pipes allow; watch the limits meanwhile."""
        todo = {m: memoryview(r) for m, r in requests.items() if r}
        replies: dict[int, tuple[dict[str, Any], bytes]] = {}
        buffers = {m: bytearray() for m in expected}
        heads: dict[int, dict[str, Any]] = {}
        poller = select.poll()
        by_fd = {}
        for m in expected:
            p = self.processes[m]
            by_fd[p.replies] = m
            poller.register(p.replies, select.POLLIN)
            if m in todo:
                by_fd[p.requests] = m
                poller.register(p.requests, select.POLLOUT)
        while len(replies) < len(expected):
            self.watch()
            for fd, _ in poller.poll(200):
                m = by_fd[fd]
                if fd == self.processes[m].requests:
                    try:
                        todo[m] = todo[m][os.write(fd, todo[m]):]
                    except OSError as exc:
                        if exc.errno == errno.EAGAIN:
                            continue
                        raise self._ended(m) from None  # EPIPE: it is gone
                    if not todo[m]:
                        poller.unregister(fd)
                    continue
                head = heads.get(m)
                try:
                    need = (4 if len(buffers[m]) < 4 else 4 + lossproto.header_length(
                        bytes(buffers[m][:4]))) if head is None else _payload(head, expected[m])
                except ProtocolError as exc:
                    raise self._broken(m, str(exc)) from None
                try:
                    chunk = os.read(fd, max(need - len(buffers[m]), 1))
                except BlockingIOError:
                    continue
                if not chunk:
                    raise self._ended(m)
                buffers[m] += chunk
                if len(buffers[m]) > need:
                    raise self._broken(m, "more bytes than a reply holds")
                if len(buffers[m]) < need:
                    continue
                if head is None and need > 4:
                    try:
                        head = heads[m] = lossproto.parse_header(bytes(buffers[m][4:]))
                        _verdict(head, expected[m], hello)
                        size = _payload(head, expected[m])
                    except ProtocolError as exc:
                        raise self._broken(m, str(exc)) from None
                    buffers[m] = bytearray()
                    if hello or size == 0:
                        replies[m] = (head, b"")
                        poller.unregister(fd)
                elif head is not None:
                    replies[m] = (head, bytes(buffers[m]))
                    poller.unregister(fd)
        return replies

    def trace(self, hook: str, spec: list[list[Any]], args: list[Any],
              kwargs: dict[str, Any]) -> Graph | None:
        """The hook as a checked graph the worker runs itself, traced by member 0's server on
        synthetic inputs of these shapes; None (and why, in ``served``) when it cannot be."""
        header = {"trace": hook, "leaves": spec, "args": args, "kwargs": kwargs}
        key = hashlib.sha256(json.dumps([header, self.code, self.declared["hyperparameters"]],
                                        default=repr).encode()).hexdigest()
        if key in _TRACED:  # the same code, hook and call traced before in this worker
            head, payload = _TRACED[key]
        else:
            (head, payload), = self._exchange({0: lossproto.frame(header)}, {0: -1}).values()
            if "graph" in head:
                _TRACED[key] = (head, payload)
                while len(_TRACED) > 64:
                    _TRACED.pop(next(iter(_TRACED)))
        if "error" in head:
            raise self._error(0, head)
        if "graph" not in head:
            self.served[hook] = f"per call: {str(head.get('untraceable', ''))[:300]}"
            return None
        try:
            graph = Graph(head["graph"], payload)
        except (ProtocolError, Untraceable) as exc:
            self.served[hook] = f"per call: {exc}"
            return None
        self.served[hook] = "graph"
        graph.deadline, graph.late = self.deadline, self.watch  # this job's wall clock
        return graph

    def _error(self, m: int, head: dict[str, Any]) -> RemoteError:
        reason = head.get("reason")
        reason = reason if reason in ("objective", "memory", "disk") else "objective"
        text = self.processes[m].scrub(str(head["error"])[:20_000])
        if reason == "disk":  # the tmpfs quota made its write fail: say which limit it was
            quota = self.processes[m].limits.disk_bytes >> 20
            text = f"ran out of its {quota} MiB disk quota: {text}"
        return RemoteError(text, reason)

    def watch_idle(self) -> None:
        """:meth:`watch` while the servers are not asked anything (a traced graph runs here,
        once a step): every 50 ms is soon enough for limits counted in seconds."""
        now = time.monotonic()
        if now - self._last_idle_watch >= 0.05:
            self._last_idle_watch = now
            self.watch()

    def watch(self) -> None:
        """Enforce the limits (then every server is stopped) and send heartbeats."""
        now = time.monotonic()
        for m, p in enumerate(self.processes):
            reason = p.watch()
            if reason:
                raise self._ended(m)
        if self.heartbeat is not None and now - self._last_beat > HEARTBEAT_SECONDS:
            self._last_beat = now
            try:
                self.heartbeat()
            except Exception:  # noqa: BLE001 - a database blip must not kill a healthy cell
                pass

    def _ended(self, m: int) -> ServerEnded:
        """Why member ``m``'s server stopped answering (every server is stopped)."""
        process = self.processes[m]
        for p in self.processes:
            if p is not process:
                p.kill()
        if process.poll() is None and not process.reason:
            process.wait(timeout=2)  # it closed its pipe: its exit follows
        reason, error = process.explain()
        if not reason:
            reason, error = "crash", "the sandboxed loss server stopped answering"
        return ServerEnded(reason, process.scrub(error))

    def _broken(self, m: int, what: str) -> ServerEnded:
        for p in self.processes:
            p.kill()
        return ServerEnded("invalid-output",
                           f"the sandboxed loss server broke the protocol: {what}")

    # --- after the run ----------------------------------------------------------------

    def captured(self) -> str:
        """The servers' output: each distinct text once (every member runs the same code)."""
        texts = [self.processes[m].scrub(p.capture.text()) for m, p in
                 enumerate(self.processes)]
        distinct = list(dict.fromkeys(t for t in texts if t))
        if len(distinct) <= 1:
            return distinct[0] if distinct else ""
        return "\n".join(f"[member {texts.index(t)}]\n{t}" for t in distinct)[
            :max(self.limits.output_bytes, 1) * 2]

    def isolation(self) -> dict[str, Any]:
        record = self.processes[0].isolation() if self.processes else {}
        return {**record, "protocol": "loss-only", "servers": len(self.processes),
                "served": dict(self.served),
                "row_order": hmac.new(self.row_secret, b"fingerprint",
                                      hashlib.sha256).hexdigest()[:16]}

    def end_requests(self) -> None:
        """No more requests: each server reads end of file and exits, while the trusted side
        goes on (judging); :meth:`stop` then finds them gone."""
        for p in self.processes:
            p.end_requests()

    def stop(self) -> tuple[str, str]:
        """No more requests: an honest server exits; what it printed is all captured.
        ("violation", its report) when a server was refused something after its last
        reply (on its way out), else ("", ""): a refusal counts whenever it happens."""
        self.end_requests()
        late = ("", "")
        for p in self.processes:
            p.wait(timeout=5)
            p.capture.join()
            if not late[0] and not p.reason:
                reason, error = p.explain()
                if reason == "violation":
                    late = (reason, p.scrub(error))
        return late

    def close(self) -> None:
        for p in self.processes:
            p.close()

    def __enter__(self) -> LossServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _verdict(head: dict[str, Any], expected: int, hello: bool) -> None:
    """A reply says exactly one of the things a reply to this request may say."""
    kinds = ({"hello", "error"} if hello else {"graph", "untraceable", "error"}
             if expected == -1 else {"ok", "error"})
    said = sorted(kinds & head.keys())
    if len(said) != 1:
        raise ProtocolError(f"a reply that says {' and '.join(said) or 'none'} of "
                            f"{', '.join(sorted(kinds))}")


def _payload(head: dict[str, Any], expected: int) -> int:
    """The payload size of a reply: what this side expects of an "ok" reply (``expected``,
    -1 for none), a graph's declared constants (capped), nothing for anything else."""
    if "ok" in head and expected >= 0:
        return expected
    if "ok" in head and expected == APPLY:
        return _output_size(head.get("out"))
    if "graph" in head and expected == -1:
        consts = head["graph"].get("consts") if isinstance(head["graph"], dict) else None
        if not isinstance(consts, list):
            raise ProtocolError("a graph without its constants")
        try:
            if any(c[0] not in lossproto.DTYPES for c in consts):
                raise ProtocolError("a graph constant of a dtype that is not allowed")
            total = sum(np.dtype(c[0]).itemsize * int(np.prod(c[1], dtype=np.int64))
                        for c in consts)
        except (TypeError, ValueError, IndexError, OverflowError):
            raise ProtocolError("malformed graph constants") from None
        if not 0 <= total <= MAX_CONST_BYTES:
            raise ProtocolError(f"graph constants of {total:,} bytes")
        return total
    return 0


def _output_size(out: Any) -> int:
    """The size of a post-hoc output its header declares: ``[dtype, shape]``, checked."""
    try:
        dtype, shape = out
        if dtype not in lossproto.DTYPES or not isinstance(shape, list) or len(shape) > 8 \
                or not all(type(n) is int and 0 <= n < 1 << 40 for n in shape):
            raise ValueError
        size = np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64))
    except (TypeError, ValueError, OverflowError):
        raise ProtocolError("a post-hoc output declared as something other than "
                            "[dtype, shape]") from None
    if size > MAX_APPLY_BYTES:
        raise ProtocolError(f"a post-hoc output of {size:,} bytes (at most "
                            f"{MAX_APPLY_BYTES:,})")
    return size


def _checked_declaration(raw: Any) -> dict[str, Any]:
    """The hello, every field type-checked (the objective's code wrote it)."""
    if not isinstance(raw, dict):
        raise ServerEnded("invalid-output", "the sandboxed loss server did not describe the "
                          "objective")
    specs = registry.hooks()
    hooks = [h for h in raw.get("hooks", []) if isinstance(h, str) and h in specs]
    context = raw.get("context") if isinstance(raw.get("context"), dict) else {}

    def scalars(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            return {}
        return {str(k)[:100]: v for k, v in list(value.items())[:100]
                if isinstance(v, JSON_SCALARS)}

    return {"name": str(raw.get("name", ""))[:200] or "objective", "hooks": hooks,
            "context": {h: tuple(n for n in context.get(h, ()) if n in specs[h].context
                                 and n != "index") for h in hooks
                        if isinstance(context.get(h, ()), list)},
            "hyperparameters": scalars(raw.get("hyperparameters")),
            "defaults": scalars(raw.get("defaults")), "model": scalars(raw.get("model"))}


def version_row_key(version_key: str) -> bytes:
    """The row-order key of one objective version (its ``version_key``) on this machine.

    A server may hand it to the version's submitter, whose local sandboxed run then sends
    rows in the server's order and can be verified to the last bit. That gives a loss
    nothing to find its rows with: the key depends on the code and hyperparameters, so a
    loss cannot carry its own key (it would have to contain an HMAC of itself), and any
    other version's key orders rows differently. A cell records a fingerprint of it."""
    return hmac.new(row_key(), b"row-order:" + version_key.encode(),
                    hashlib.sha256).hexdigest().encode()


def row_key() -> bytes:
    """The secret the row order is drawn from: ``HARNESS_SANDBOX_KEY``, else a random key
    made once per machine (outside every sandbox read root), so a run repeats exactly."""
    given = os.environ.get("HARNESS_SANDBOX_KEY", "")
    if given:
        return given.encode()
    from harness.data import data_root

    path = Path(data_root()) / "sandbox.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32).encode()
        try:
            with open(path, "xb") as f:
                f.write(key)
            os.chmod(path, 0o600)
        except FileExistsError:
            pass
        return path.read_bytes()
