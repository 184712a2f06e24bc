"""Trace inside, run outside: a submitted hook as a plain graph of allow-listed ATen ops.

A hook that depends on tensors only (no ``progress`` or other numbers, no ``state``) is
traced once, in its sandboxed server, with ``torch.export`` on synthetic inputs of the
right shapes (nothing of the run's data is used; the batch dimension is dynamic). The
server sends the graph in a plain format — op names, argument references, numbers,
dtypes, and the bytes of any tensor constant — never a pickle. The worker rebuilds it
against :data:`ALLOWED`, a list of side-effect-free ATen ops (no reads or writes, no
random numbers, no uninitialized memory, no host transfers, no in-place writes), checks
every intermediate's size on meta tensors before the first real call of each shape, and
then runs it itself under ``vmap`` over members with autograd: no round trip per step.
A graph is a pure function of its inputs, so it cannot keep anything between calls or
see another member. Hooks that cannot be traced (control flow on tensor values,
``.item()``, in-place state) keep the per-call protocol (:mod:`harness.sandbox.remote`).

Wire format (:func:`export` in the server, :func:`load` here)::

    {"inputs": [["in", leaf] | ["const", k], ...],   # the graph's placeholders, in order
     "nodes": [[op, args, kwargs], ...],              # op: "aten.<name>.<overload>" or "getitem"
     "output": value,
     "consts": [[dtype, shape], ...]}                 # their bytes follow, in order
    value = {"n": i} (input or node i) | {"v": number/bool/None} | {"l": [value]}
          | {"dtype": name} | {"device": null} | {"layout": "strided"}
          | {"memory_format": name}
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from harness.sandbox.lossproto import ProtocolError, split

MAX_NODES = 4000
MAX_CONST_BYTES = 16 << 20
# Every intermediate of a call lives until the call ends (and autograd keeps some after),
# in the worker, outside the sandbox's limits: so both one intermediate and their sum are
# bounded, per member, and so is the work of the products (and the job's wall clock is looked
# at between ops). A graph over a bound is served per call instead, inside the sandbox.
MAX_ELEMENTS = 1 << 22  # per intermediate, per member (16 MiB of float32)
MAX_TOTAL_ELEMENTS = 1 << 24  # every intermediate of a call together, per member (64 MiB)
MAX_FLOPS = 1 << 31  # multiply-adds of every matrix product of a call together, per member
# elements every op of a call reads and writes together, per member: the work of a call
# that is not matrix products (at ~1 ns an element, well under a second)
MAX_TOUCHED = 1 << 27
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "bool": torch.bool, "uint8": torch.uint8}
MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format,
                  "preserve_format": torch.preserve_format}

# Side-effect-free ops a loss is made of. Every overload is named: a new one is refused
# until it is reviewed and added here.
ALLOWED = frozenset("""
abs.default acos.default acosh.default add.Scalar add.Tensor addmm.default alias.default
all.default all.dim amax.default amin.default any.default any.dim argmax.default
argmin.default arange.default arange.start arange.start_step asin.default atan.default
atan2.default bitwise_and.Tensor bitwise_not.default bitwise_or.Tensor bmm.default
cat.default ceil.default clamp.default clamp.Tensor clamp_max.default clamp_min.default
clamp_min.Tensor clamp_max.Tensor clone.default cos.default cosh.default cumsum.default
detach.default diagonal.default div.Scalar div.Tensor div.Tensor_mode eq.Scalar
eq.Tensor erf.default exp.default expand.default expm1.default eye.default fill.Scalar
flip.default floor.default floor_divide.default fmod.Scalar full.default full_like.default
gather.default ge.Scalar ge.Tensor gt.Scalar gt.Tensor index.Tensor index_select.default
isfinite.default isinf.default isnan.default le.Scalar le.Tensor lgamma.default
lift_fresh_copy.default linalg_vector_norm.default log.default log10.default
log1p.default log2.default log_softmax.int logical_and.default logical_not.default
logical_or.default logsumexp.default lt.Scalar lt.Tensor masked_fill.Scalar
masked_fill.Tensor max.default max.dim maximum.default mean.default mean.dim min.default
min.dim minimum.default mm.default mul.Scalar mul.Tensor nan_to_num.default ne.Scalar
ne.Tensor neg.default nll_loss_forward.default norm.ScalarOpt_dim one_hot.default
ones.default ones_like.default permute.default pow.Scalar pow.Tensor_Scalar
pow.Tensor_Tensor prod.default prod.dim_int reciprocal.default relu.default
remainder.Scalar remainder.Tensor repeat.default reshape.default round.default
rsqrt.default rsub.Scalar rsub.Tensor scalar_tensor.default scatter.src scatter.value
scatter_add.default select.int sigmoid.default sign.default sin.default sinh.default
slice.Tensor softmax.int softplus.default sort.default split.Tensor split_with_sizes.default
sqrt.default square.default squeeze.default squeeze.dim squeeze.dims stack.default
sub.Scalar sub.Tensor sum.default sum.dim_IntList sym_size.int t.default tanh.default
topk.default transpose.int tril.default triu.default trunc.default unbind.int
unsqueeze.default var.correction view.default where.self where.ScalarSelf
where.ScalarOther where.Scalar xlogy.Tensor zeros.default zeros_like.default
_log_softmax.default _softmax.default _to_copy.default _unsafe_view.default
_assert_tensor_metadata.default std.correction
cross_entropy_loss.default nll_loss.default nll_loss_nd.default kl_div.default
mse_loss.default l1_loss.default smooth_l1_loss.default huber_loss.default
binary_cross_entropy_with_logits.default binary_cross_entropy.default log_sigmoid.default
matmul.default linear.default mv.default dot.default outer.default diag.default
diag_embed.default trace.default cosine_similarity.default log_softmax.Dimname
softmax.Dimname special_entr.default special_xlog1py.default logit.default
hardtanh.default elu.default gelu.default silu.default leaky_relu.default
""".split())
# Ops whose only effect is a check at trace time: skipped when run here.
NO_OPS = frozenset({"_assert_tensor_metadata.default"})
_SCALARS = (bool, int, float, type(None))


class Untraceable(Exception):
    """The hook cannot be served as a graph; the per-call protocol serves it."""


class TooLarge(Untraceable):
    """The graph is over a size bound for these input shapes (found on meta tensors, before
    any work): the worker will not run it, the per-call protocol serves it."""


# --- in the server ----------------------------------------------------------------------


def export(fn: Callable[..., Tensor], leaves: list[tuple[str, list[int]]], *,
           check: bool = True) -> tuple[dict[str, Any], list[bytes]]:
    """Trace ``fn(*leaves) -> scalar loss`` on synthetic inputs; (header, const bytes).
    ``check`` compares the graph with ``fn`` (:func:`_check_faithful`), which runs
    autograd's engine: never in a process that forks afterwards."""
    from torch.export import Dim
    from torch.export import export as torch_export

    example = tuple(_example(np.dtype(d), shape) for d, shape in leaves)

    class Wrapper(torch.nn.Module):
        def forward(self, *inputs: Tensor) -> Tensor:
            return fn(*inputs)

    batch = Dim("batch", min=1, max=1 << 20)
    dynamic = tuple({0: batch} if t.dim() else None for t in example)
    try:
        program = torch_export(Wrapper(), example, dynamic_shapes=(dynamic,), strict=False)
        program = program.run_decompositions({})
    except Exception as exc:  # noqa: BLE001 - why it cannot be traced, for the record
        raise Untraceable(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
                          if str(exc).strip() else type(exc).__name__) from None
    header, blobs = _serialize(program)
    if check:
        _check_faithful(fn, example, Graph(header, b"".join(blobs)))
    return header, blobs


def _check_faithful(fn: Callable[..., Tensor], example: tuple[Tensor, ...],
                    graph: Graph) -> None:
    """Refuse a graph that is not the hook: the same loss and the same gradients on the
    example inputs, and no custom ``autograd.Function`` (torch.export traces its forward and
    drops its backward, so the worker's autograd would differentiate something else)."""
    def run(call: Callable[..., Tensor]) -> tuple[Tensor, list[Tensor | None]]:
        inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in example]
        loss = call(*inputs)
        floats = [t for t in inputs if t.requires_grad]
        if not (isinstance(loss, Tensor) and loss.requires_grad and floats):
            return loss, []
        if _custom_function(loss.grad_fn):
            raise Untraceable("it uses a custom autograd.Function, whose backward a traced "
                              "graph would not keep")
        return loss, list(torch.autograd.grad(loss, floats, allow_unused=True))

    with torch.enable_grad():
        try:  # the graph first: its sizes are checked before it runs (the hook's are not)
            traced, traced_grads = run(graph)
        except TooLarge:  # the worker will not run it at these sizes either: per call
            return
        except ValueError as exc:
            raise Untraceable(str(exc)) from None
        eager, eager_grads = run(fn)
        if not eager_grads:
            raise Untraceable("its loss has no gradient with respect to its inputs")
    same = torch.allclose(traced.detach().double(), eager.detach().double(), rtol=1e-4,
                          atol=1e-6, equal_nan=True) and len(traced_grads) == len(eager_grads)
    for a, b in zip(traced_grads, eager_grads, strict=False):
        a = torch.zeros(()) if a is None else a.detach().double()
        b = torch.zeros(()) if b is None else b.detach().double()
        same = same and torch.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True)
    if not same:
        raise Untraceable("the traced graph's loss or gradient differs from the hook's own")


def _custom_function(node: Any) -> bool:
    """Whether the autograd graph below ``node`` holds a custom ``autograd.Function``."""
    seen, stack = set(), [node]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            return True
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return False


_warm = False


def warm() -> None:
    """Trace once, so that everything ``torch.export`` imports lazily is imported before a
    sandbox's lock-down (the fork server does it once for all its children)."""
    global _warm
    if not _warm:
        from harness.sandbox.shared_pages import thread_locks_only

        thread_locks_only()  # nothing shared with the jobs forked after this
        # unchecked: the check starts autograd's threads, which a fork cannot take along
        export(lambda x: (x * 2).sum(), [["<f4", [2, 2]]], check=False)
        _warm = True


def _example(dtype: np.dtype, shape: list[int]) -> Tensor:
    gen = torch.Generator().manual_seed(0)
    if dtype.kind == "f":
        return torch.randn(shape, generator=gen).to(torch.from_numpy(np.zeros(0, dtype)).dtype)
    return torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype)


def _serialize(program: Any) -> tuple[dict[str, Any], list[bytes]]:
    from torch.export.graph_signature import InputKind

    graph = program.graph
    index: dict[str, int] = {}
    inputs: list[list[Any]] = []
    consts: list[list[Any]] = []
    blobs: list[bytes] = []
    user = 0
    specs = {s.arg.name: s for s in program.graph_signature.input_specs}
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs[node.name]
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(["in", user])
            user += 1
        else:  # a tensor the hook closed over (a constant, a parameter, a buffer)
            value = (program.constants.get(spec.target) if spec.target in program.constants
                     else program.state_dict[spec.target])
            array = value.detach().cpu().contiguous().numpy()
            consts.append([array.dtype.str, list(array.shape)])
            blobs.append(array.tobytes())
            inputs.append(["const", len(consts) - 1])
        index[node.name] = len(index)
    nodes: list[list[Any]] = []
    output: Any = None
    for node in graph.nodes:
        if node.op == "call_function":
            name = ("getitem" if node.target is operator.getitem
                    else str(node.target).removeprefix("aten."))
            nodes.append([name, [_value(a, index) for a in node.args],
                          {k: _value(v, index) for k, v in node.kwargs.items()}])
            index[node.name] = len(index)
        elif node.op == "output":
            (out,) = node.args[0] if isinstance(node.args[0], tuple | list) else (node.args[0],)
            output = _value(out, index)
        elif node.op != "placeholder":
            raise Untraceable(f"a graph node of kind {node.op}")
    return {"inputs": inputs, "nodes": nodes, "output": output, "consts": consts}, blobs


def _value(a: Any, index: dict[str, int]) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"n": index[a.name]}
    if isinstance(a, _SCALARS):
        return {"v": a}
    if isinstance(a, list | tuple):
        return {"l": [_value(v, index) for v in a]}
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, torch.device):
        return {"device": None}  # run on the device of the inputs
    if isinstance(a, torch.layout):
        return {"layout": "strided"}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    raise Untraceable(f"an argument of type {type(a).__name__}")


# --- in the worker ------------------------------------------------------------------------


class Graph:
    """A checked graph, callable like the hook's reduced loss: ``graph(*leaves) -> loss``."""

    def __init__(self, header: dict[str, Any], payload: bytes) -> None:
        if not isinstance(header, dict):
            raise ProtocolError("a graph that is not a JSON object")
        nodes, inputs = header.get("nodes"), header.get("inputs")
        consts = header.get("consts")
        if not (isinstance(nodes, list) and isinstance(inputs, list)
                and isinstance(consts, list)):
            raise ProtocolError("a graph without nodes, inputs or constants")
        if len(nodes) > MAX_NODES:
            raise ProtocolError(f"a graph of {len(nodes)} nodes (at most {MAX_NODES})")
        spec = []
        for c in consts:
            if not (isinstance(c, list) and len(c) == 2 and c[0] in _NP_DTYPES
                    and isinstance(c[1], list) and all(type(d) is int and d >= 0
                                                       for d in c[1])):
                raise ProtocolError("a malformed graph constant")
            spec.append((c[0], tuple(c[1])))
        total = sum(np.dtype(d).itemsize * int(np.prod(s, dtype=np.int64)) for d, s in spec)
        if total > MAX_CONST_BYTES or total != len(payload):
            raise ProtocolError(f"graph constants of {len(payload):,} bytes (declared "
                                f"{total:,}, at most {MAX_CONST_BYTES:,})")
        self.consts = [torch.from_numpy(a) for a in split(payload, spec, list(range(len(spec))))]
        self.inputs: list[tuple[str, int]] = []
        users = 0
        for item in inputs:
            if not (isinstance(item, list) and len(item) == 2 and item[0] in ("in", "const")
                    and type(item[1]) is int):
                raise ProtocolError("a malformed graph input")
            limit = len(self.consts) if item[0] == "const" else 1 << 20
            if not 0 <= item[1] < limit:
                raise ProtocolError("a graph input out of range")
            users += item[0] == "in"
            self.inputs.append((item[0], item[1]))
        self.arity = users
        self.ops: list[tuple[str, Callable[..., Any], list[Any], dict[str, Any]]] = []
        for i, node in enumerate(nodes):
            if not (isinstance(node, list) and len(node) == 3 and isinstance(node[0], str)
                    and isinstance(node[1], list) and isinstance(node[2], dict)):
                raise ProtocolError("a malformed graph node")
            name = node[0]
            available = len(self.inputs) + i
            args = [_checked(a, available) for a in node[1]]
            kwargs = {str(k): _checked(v, available) for k, v in node[2].items()}
            self.ops.append((name, _op(name), args, kwargs))
        self.output = _checked(header.get("output"), len(self.inputs) + len(self.ops))
        self._checked_shapes: set[tuple] = set()
        # The job's wall deadline (time.monotonic) and what to call once it has passed (it
        # raises: the job's servers stopped, the cell a timeout). Looked at between ops: an
        # op's own work is bounded by the checks above, so a call ends within one op of it.
        self.deadline: float | None = None
        self.late: Callable[[], None] | None = None

    def __call__(self, *leaves: Tensor) -> Tensor:
        if len(leaves) != self.arity:
            raise ValueError(f"the graph takes {self.arity} tensors, got {len(leaves)}")
        key = tuple((tuple(t.shape), t.dtype) for t in leaves)
        if key not in self._checked_shapes:  # sizes first, on meta tensors: no memory used
            with torch.enable_grad():
                out = self._run([torch.empty(t.shape, dtype=t.dtype, device="meta",
                                             requires_grad=t.is_floating_point())
                                 for t in leaves], check=True)
            if not (isinstance(out, Tensor) and out.dim() == 0 and out.is_floating_point()):
                raise ValueError("the traced hook does not give a scalar loss")
            if any(t.is_floating_point() for t in leaves) and not out.requires_grad:
                raise ValueError("the traced hook's loss has no gradient: it does not depend "
                                 "on its inputs through operations autograd differentiates")
            self._checked_shapes.add(key)
        return self._run(list(leaves), check=False)

    def _run(self, leaves: list[Tensor], *, check: bool) -> Any:
        device = leaves[0].device if leaves else torch.device("cpu")
        env: list[Any] = [leaves[i] if kind == "in" else self.consts[i].to(device)
                          for kind, i in self.inputs]
        totals = [0, 0, 0]  # elements made, multiply-adds, elements touched
        deadline = None if check else self.deadline
        for name, fn, args, kwargs in self.ops:
            if deadline is not None and time.monotonic() > deadline:
                self._late()
            if name in NO_OPS:
                env.append(None)
                continue
            a = [_resolve(v, env, device) for v in args]
            k = {key: _resolve(v, env, device) for key, v in kwargs.items()}
            out = fn(*a, **k)
            if check:
                _check_size(name, a, out, totals)
            env.append(out)
        return _resolve(self.output, env, device)


    def _late(self) -> None:
        if self.late is not None:
            self.late()
        raise CallTimeout("the traced hook's call ran past the job's wall-clock limit")


class CallTimeout(RuntimeError):
    """A graph call still running at the job's deadline (when nothing else stopped it)."""


def _check_size(name: str, args: list[Any], out: Any, totals: list[int]) -> None:
    """Refuse an op whose result is too big, or after which the call's intermediates, the
    elements its ops touch or its matrix products add up to too much (``totals``: so far,
    updated). An op is sized by what it works on as well as what it returns: a composite
    op broadcasts its inputs inside the kernel (``cosine_similarity`` of ``[n, 1, d]`` and
    ``[1, n, d]`` holds ``n·n·d`` elements to return ``n·n``), a reduction reads its whole
    input to return one number."""
    outs = [t for t in (out if isinstance(out, tuple | list) else (out,))
            if isinstance(t, Tensor)]
    ins = [t for a in args for t in (a if isinstance(a, list | tuple) else (a,))
           if isinstance(t, Tensor)]
    made = sum(t.numel() for t in outs)
    inside = _broadcast_numel(ins)
    for size in [t.numel() for t in outs] + [inside]:
        if size > MAX_ELEMENTS:
            raise TooLarge(f"the traced hook makes a tensor of {size:,} elements "
                           f"(at most {MAX_ELEMENTS:,})")
    # what the kernel holds besides its result: a broadcast bigger than every input and output
    if len(ins) > 1 and inside > max([made, *(t.numel() for t in ins)]):
        made += inside
    totals[0] += made
    if totals[0] > MAX_TOTAL_ELEMENTS:
        raise TooLarge(f"the traced hook's intermediates add up to {totals[0]:,} "
                       f"elements (at most {MAX_TOTAL_ELEMENTS:,})")
    totals[2] += sum(t.numel() for t in ins) + max(made, inside)
    if totals[2] > MAX_TOUCHED:
        raise TooLarge(f"the traced hook's operations touch {totals[2]:,} elements in a "
                       f"call (at most {MAX_TOUCHED:,})")
    if name in ("mm.default", "bmm.default", "addmm.default", "matmul.default",
                "linear.default"):
        left = args[1] if name == "addmm.default" else args[0]
        totals[1] += out.numel() * left.shape[-1]
        if totals[1] > MAX_FLOPS:
            raise TooLarge(f"the traced hook multiplies matrices at {totals[1]:,} "
                           f"multiply-adds (at most {MAX_FLOPS:,})")


def _broadcast_numel(tensors: list[Tensor]) -> int:
    """Elements of the inputs' common broadcast shape (the largest input where they do not
    broadcast together, e.g. a matrix product's)."""
    if not tensors:
        return 0
    try:
        return int(np.prod(torch.broadcast_shapes(*(t.shape for t in tensors)), dtype=np.int64))
    except RuntimeError:
        return max(t.numel() for t in tensors)


_NP_DTYPES = frozenset({"<f4", "<f8", "<f2", "<i8", "<i4", "|b1", "|u1"})


def _op(name: str) -> Callable[..., Any]:
    if name == "getitem":
        return operator.getitem
    if name not in ALLOWED:
        raise Untraceable(f"the op aten.{name} is not on the allow-list")
    packet, _, overload = name.rpartition(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


def _checked(value: Any, available: int, depth: int = 0) -> Any:
    """A wire value, every reference pointing back to an earlier node."""
    if depth > 8 or not isinstance(value, dict) or len(value) != 1:
        raise ProtocolError("a malformed graph value")
    (kind, inner), = value.items()
    if kind == "n":
        if type(inner) is not int or not 0 <= inner < available:
            raise ProtocolError("a graph reference out of order")
        return ("n", inner)
    if kind == "v":
        if not isinstance(inner, _SCALARS):
            raise ProtocolError("a graph constant that is not a number")
        return ("v", inner)
    if kind == "l":
        if not isinstance(inner, list) or len(inner) > 64:
            raise ProtocolError("a malformed graph list")
        return ("l", [_checked(v, available, depth + 1) for v in inner])
    if kind == "dtype":
        if inner not in DTYPES:
            raise ProtocolError(f"dtype {inner!r} is not allowed")
        return ("v", DTYPES[inner])
    if kind == "device":
        return ("device", None)
    if kind == "layout":
        return ("v", torch.strided)
    if kind == "memory_format":
        if inner not in MEMORY_FORMATS:
            raise ProtocolError(f"memory format {inner!r} is not allowed")
        return ("v", MEMORY_FORMATS[inner])
    raise ProtocolError(f"unknown graph value kind {kind!r}")


def _resolve(value: tuple, env: list[Any], device: torch.device) -> Any:
    kind, inner = value
    if kind == "n":
        return env[inner]
    if kind == "l":
        return [_resolve(v, env, device) for v in inner]
    if kind == "device":
        return device
    return inner
