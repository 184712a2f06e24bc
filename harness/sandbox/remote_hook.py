"""A submitted objective's hook as the trainer calls it, its body in the loss servers.

:class:`RemoteHook` stands for the hook in the objective the trainer binds
(:meth:`harness.sandbox.remote.LossServers.objective`). Per call it sends only the context
the hook's signature names (never ``index``), puts every per-sample row in a secret order
(the servers' keyed generator; autograd puts the gradients back in place), and then
either runs the hook's traced graph here (:mod:`harness.sandbox.traced`: tensors only,
nothing written) or makes one round trip to every member's server: the autograd function
:class:`_Remote`'s ``vmap`` rule turns the member-batched call into
:meth:`~harness.sandbox.remote.LossServers.call`, and :class:`_Stacked` carries the
returned gradients into the model. A post-hoc hook goes through :meth:`RemoteHook.each_member`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from harness.contract import registry
from harness.sandbox import lossproto
from harness.sandbox.traced import Graph, TooLarge

if TYPE_CHECKING:
    from harness.sandbox.remote import LossServers


class RemoteHook:
    """A hook whose body runs in the loss servers; called like the objective's own."""

    # The servers bind the hyperparameters they loaded; per-member values would be dropped.
    takes_hyperparameters = False

    def __init__(self, servers: LossServers, name: str) -> None:
        self.servers, self.name = servers, name
        self.__name__ = name
        self.spec = registry.hooks()[name]
        # Per call structure: its traced graph, or None where it is served per call.
        self.graphs: dict[str, Graph | None] = {}

    def _graph(self, leaves: list[Tensor], args: list[Any],
               kwargs: dict[str, Any]) -> Graph | None:
        if not _tensors_only(kwargs):
            self.servers.served.setdefault(self.name, "per call: a number in its context")
            return None
        try:
            spec = _spec(leaves)
        except TypeError:  # a dtype numpy has no name for (bfloat16)
            self.servers.served.setdefault(self.name, "per call: a dtype numpy cannot name")
            return None
        key = json.dumps([args, kwargs, [(d, len(shape)) for d, shape in spec]])
        if key not in self.graphs:
            self.graphs[key] = self.servers.trace(self.name, spec, args, kwargs)
        return self.graphs[key]

    def _context(self, context: dict[str, Any]) -> dict[str, Any]:
        """Only the context the hook's signature asks for; never ``index``."""
        return {k: v for k, v in context.items()
                if k in self.servers.declared["context"].get(self.name, ()) and k != "index"}

    def each_member(self, *args: Tensor, **context: Any) -> Tensor:
        """A post-hoc hook on each member's slice of the member-stacked ``args`` (and tensor
        context): member ``m``'s server gets row ``m`` and returns its output. The rows of
        each row count go out in a secret order; an output with one of those row counts
        comes back in the trainer's order."""
        context = self._context(context)
        counts = sorted({a.shape[1] for a in (*args, *context.values())
                         if isinstance(a, Tensor) and a.dim() > 1})
        perms = {n: torch.from_numpy(self.servers.rows.permutation(n)) for n in counts}

        def permuted(v: Any) -> Any:
            if isinstance(v, Tensor) and v.dim() > 1 and v.shape[1] in perms:
                return v[:, perms[v.shape[1]].to(v.device)]
            return v

        leaves: list[Tensor] = []
        is_leaf = lambda v: isinstance(v, Tensor)  # noqa: E731
        spec_args = [lossproto.flatten(permuted(a), leaves, is_leaf) for a in args]
        spec_kwargs = {k: lossproto.flatten(permuted(v), leaves, is_leaf)
                       for k, v in context.items()}
        out = self.servers.apply(self.name, spec_args, spec_kwargs, leaves)
        self.servers.served.setdefault(self.name, "per member: a post-hoc hook")
        if out.dim() > 1 and out.shape[1] in perms:
            out = out[:, torch.argsort(perms[out.shape[1]])]
        return out.to(args[0].device if args else "cpu")

    def __call__(self, *args: Any, **context: Any) -> Tensor:
        context = self._context(context)
        spec = self.spec
        # The rows go out in a secret order (autograd puts the gradients back in place), so
        # a server that reconstructs the public data order still cannot tell which row is
        # which sample. Per-member context (a memory, the parameters) keeps its order.
        rows = _rows(args)
        perm = torch.from_numpy(self.servers.rows.permutation(rows)).to(_device(args))
        args = tuple(_permuted(a, perm, rows) for a in args)
        written = {k: v for k, v in context.items() if k in spec.mutable}
        context = {k: v if k in spec.shared else _permuted(v, perm, rows)
                   for k, v in context.items()}
        leaves: list[Tensor] = []
        is_leaf = lambda v: isinstance(v, Tensor)  # noqa: E731
        spec_args = [lossproto.flatten(a, leaves, is_leaf) for a in args]
        spec_kwargs = {k: lossproto.flatten(v, leaves, is_leaf) for k, v in context.items()}
        if not written:
            graph = self._graph(leaves, spec_args, spec_kwargs)
        else:  # what it writes must come back, so each call goes to the servers
            graph = None
            self.servers.served.setdefault(
                self.name, f"per call: it writes its {', '.join(sorted(written))}")
        if graph is not None:  # run here, under the trainer's vmap, with autograd
            self.servers.watch_idle()
            try:
                return graph(*leaves)
            except TooLarge as exc:  # found on meta tensors, before any work: per call
                self.servers.served[self.name] = f"per call: {exc}"
                self.graphs = {k: None if g is graph else g for k, g in self.graphs.items()}
        sent = {k: spec_kwargs[k]["t"] for k in written}
        grad = [i for i, t in enumerate(leaves) if t.is_floating_point()
                and i not in sent.values()]
        mutable = list(sent.values())
        call = _Call(self.servers, self.name, spec_args, spec_kwargs, grad, mutable)
        loss, *new = _Remote.apply(call, *leaves)
        with torch.no_grad():
            for (name, target), value in zip(written.items(), new, strict=True):
                if name in spec.shared:
                    target.copy_(value)
                else:  # target[perm] = value, as a gather (index_copy_ has no vmap rule)
                    target.copy_(value.index_select(0, torch.argsort(perm)))
        return loss


def _tensors_only(kwargs: dict[str, Any]) -> bool:
    """Whether the context sent is tensors only (numbers would be baked into a graph)."""
    def ok(value: dict[str, Any]) -> bool:
        (kind, inner), = value.items()
        return (kind == "t" or kind in ("l", "tu") and all(ok(v) for v in inner)
                or kind == "r" and all(ok(v) for v in inner[1]) or kind == "fn" and ok(inner))

    return all(ok(v) for v in kwargs.values())


def _spec(leaves: list[Tensor]) -> list[list[Any]]:
    """Each leaf's numpy dtype and per-member shape (under vmap: one member's view)."""
    return [[_numpy_dtype(t.dtype), list(t.shape)] for t in leaves]


_NUMPY_DTYPES: dict[torch.dtype, str] = {}


def _numpy_dtype(dtype: torch.dtype) -> str:
    """numpy's name of a torch dtype (TypeError where it has none); asked once per call
    and leaf, so remembered."""
    if dtype not in _NUMPY_DTYPES:
        _NUMPY_DTYPES[dtype] = torch.empty(0, dtype=dtype).numpy().dtype.str
    return _NUMPY_DTYPES[dtype]


def _device(args: tuple[Any, ...]) -> torch.device:
    if args and isinstance(args[0], Tensor):  # a loss's first argument: no pytree walk
        return args[0].device
    from torch.utils._pytree import tree_leaves

    return next((t.device for t in tree_leaves(args) if isinstance(t, Tensor)),
                torch.device("cpu"))


def _rows(args: tuple[Any, ...]) -> int:
    """The sample count of a call: the rows of its first tensor (in a named tuple too)."""
    for a in args:
        if isinstance(a, Tensor):
            return a.shape[0]
        if isinstance(a, list | tuple):
            found = _rows(tuple(a))
            if found >= 0:
                return found
    return -1


def _permuted(value: Any, perm: Tensor, rows: int) -> Any:
    """``value`` with the rows of every per-sample tensor in it reordered by ``perm``."""
    if isinstance(value, Tensor):  # index_select: value[perm]'s rows, at less cost a call
        return value.index_select(0, perm) if value.dim() and value.shape[0] == rows else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return type(value)(*(_permuted(v, perm, rows) for v in value))
    if isinstance(value, list | tuple):
        return type(value)(_permuted(v, perm, rows) for v in value)
    if callable(value):
        return lambda: _permuted(value(), perm, rows)
    return value


class _Call:
    """One hook call's description (not a tensor: autograd passes it through)."""

    def __init__(self, servers: LossServers, hook: str, args: list[Any],
                 kwargs: dict[str, Any], grad: list[int], mutable: list[int]) -> None:
        self.servers, self.hook, self.args, self.kwargs = servers, hook, args, kwargs
        self.grad, self.mutable = grad, mutable


class _Remote(torch.autograd.Function):
    """The hook as an autograd function; only its ``vmap`` rule runs (members batched)."""

    generate_vmap_rule = False

    @staticmethod
    def forward(call: _Call, *leaves: Tensor) -> Any:
        raise RuntimeError("a sandboxed hook runs batched over members (vmap), one server "
                           "per member")

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        pass

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> Any:
        raise RuntimeError("unreachable: the vmap rule's function carries the gradient")

    @staticmethod
    def vmap(info: Any, in_dims: tuple, call: _Call, *leaves: Tensor) -> Any:
        stacked = [leaf.movedim(d, 0) if d is not None
                   else leaf.expand(info.batch_size, *leaf.shape)
                   for leaf, d in zip(leaves, in_dims[1:], strict=True)]
        # Only what autograd needs comes back (here, not under vmap, requires_grad is true).
        call.grad = [i for i in call.grad if stacked[i].requires_grad]
        out = _Stacked.apply(call, *stacked)
        return out, (0,) * len(out)


class _Stacked(torch.autograd.Function):
    """Every member's loss from its server; backward scales the returned gradients."""

    @staticmethod
    def forward(call: _Call, *leaves: Tensor) -> tuple[Tensor, ...]:
        loss, grads, mutated = call.servers.call(call.hook, call.args, call.kwargs,
                                                 list(leaves), call.grad, call.mutable)
        call.grads = grads  # kept on the call, not as outputs: they are not results
        return (loss, *mutated)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        call, *leaves = inputs
        ctx.call, ctx.count = call, len(leaves)
        ctx.mark_non_differentiable(*output[1:])

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, *_: Tensor) -> tuple[Tensor | None, ...]:
        out: list[Tensor | None] = [None] * (ctx.count + 1)
        for i, g in zip(ctx.call.grad, ctx.call.grads, strict=True):
            out[i + 1] = g * grad_loss.reshape(-1, *[1] * (g.dim() - 1)).to(g.dtype)
        return tuple(out)
