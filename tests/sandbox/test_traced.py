"""Trace inside, run outside: a hook's graph gives the hook's numbers, and nothing but
allow-listed, size-checked ops is ever run from a graph a server sent."""

from __future__ import annotations

import json

import pytest
import torch
from torch.func import vmap

from harness.objectives.loading import load_objective
from harness.sandbox.lossproto import ProtocolError
from harness.sandbox.traced import (
    MAX_ELEMENTS,
    MAX_TOTAL_ELEMENTS,
    CallTimeout,
    Graph,
    TooLarge,
    Untraceable,
    _check_faithful,
    export,
)
from harness.train import reduce_loss

STATELESS = ["ce", "gce", "sce", "nce_rce", "mae", "focal", "label_smoothing", "poly1",
             "taylor_ce", "boot_soft", "boot_hard", "squentropy", "ldr_kl", "only_top_p"]
SPEC = [["<f4", [64, 10]], ["<i8", [64]]]


def _graph(name: str) -> tuple[Graph, object]:
    hook = load_objective(name).bind("classification_loss")
    header, blobs = export(lambda x, y: reduce_loss(hook(x, y)), SPEC)
    # What crosses the pipe is JSON and bytes, nothing else.
    return Graph(json.loads(json.dumps(header)), b"".join(blobs)), hook


@pytest.mark.parametrize("name", STATELESS)
def test_a_traced_builtin_equals_the_hook_bit_for_bit(name):
    """Losses and gradients under vmap over members, for a full and a short last batch
    (the batch dimension is dynamic)."""
    graph, hook = _graph(name)
    gen = torch.Generator().manual_seed(1)
    for rows in (64, 40):
        x = (3 * torch.randn(4, rows, 10, generator=gen)).requires_grad_()
        y = torch.randint(10, (4, rows), generator=gen)
        got = vmap(graph)(x, y)
        (dx,) = torch.autograd.grad(got.sum(), x)
        want = vmap(lambda a, b: reduce_loss(hook(a, b)))(x, y)
        (wx,) = torch.autograd.grad(want.sum(), x)
        assert torch.equal(got, want) and torch.equal(dx, wx), name


def test_a_call_past_the_jobs_deadline_stops_between_ops_and_says_why():
    """The wall clock is looked at between a graph's ops (each op's work is bounded), not
    only between calls: a call still running at the job's deadline stops there."""
    graph, _ = _graph("gce")
    x, y = torch.randn(64, 10), torch.zeros(64, dtype=torch.long)
    graph(x, y)  # sizes checked once, on meta tensors: no deadline there
    calls = []
    graph.deadline, graph.late = 0.0, lambda: calls.append("watched")  # long past
    with pytest.raises(CallTimeout, match="wall-clock limit"):
        graph(x, y)
    assert calls == ["watched"]  # the servers' watch ran first (it raises ServerEnded)
    graph.deadline = float("inf")
    assert torch.isfinite(graph(x, y))


def test_a_closed_over_tensor_travels_as_a_constant():
    table = torch.linspace(0.5, 2.0, 10)
    header, blobs = export(lambda x, y: (x.log_softmax(-1) * table).sum(-1).mean(), SPEC)
    assert header["consts"] == [["<f4", [10]]]
    graph = Graph(header, b"".join(blobs))
    x = torch.randn(64, 10)
    assert torch.equal(graph(x, torch.zeros(64, dtype=torch.long)),
                       (x.log_softmax(-1) * table).sum(-1).mean())


def test_control_flow_on_values_is_untraceable():
    def branchy(x, y):
        return x.sum() if x.mean().item() > 0 else -x.sum()

    with pytest.raises(Untraceable):
        export(branchy, SPEC)


def _gce_wire() -> tuple[dict, bytes]:
    hook = load_objective("gce").bind("classification_loss")
    header, blobs = export(lambda x, y: reduce_loss(hook(x, y)), SPEC)
    return json.loads(json.dumps(header)), b"".join(blobs)


@pytest.mark.parametrize("op", ["empty.memory_format", "from_file.default", "copy_.default",
                                "rand.default", "_local_scalar_dense.default",
                                "set_.source_Storage", "print.default"])
def test_an_op_off_the_allow_list_is_refused(op):
    header, payload = _gce_wire()
    header["nodes"][0][0] = op
    with pytest.raises(Untraceable, match="not on the allow-list"):
        Graph(header, payload)


@pytest.mark.parametrize("damage", [
    lambda h: h["nodes"][0][1].__setitem__(0, {"n": 99}),           # a forward reference
    lambda h: h["nodes"][0][1].__setitem__(0, {"obj": "os.system"}),  # an unknown value
    lambda h: h["nodes"][0][1].__setitem__(1, {"v": {"a": 1}}),      # not a number
    lambda h: h.__setitem__("inputs", [["const", 0]]),               # no such constant
    lambda h: h.__setitem__("consts", [["|O", [1]]]),                # an object array
    lambda h: h["nodes"].extend([h["nodes"][0]] * 5000),             # too many nodes
    lambda h: h["nodes"][6][1].__setitem__(1, {"dtype": "complex128"}),
])
def test_a_malformed_graph_is_refused(damage):
    header, payload = _gce_wire()
    damage(header)
    with pytest.raises((ProtocolError, Untraceable)):
        Graph(header, payload)


def test_declared_constants_must_match_the_bytes():
    header, payload = _gce_wire()
    header["consts"] = [["<f4", [1 << 30]]]
    with pytest.raises(ProtocolError, match="constants"):
        Graph(header, payload)


def test_a_huge_intermediate_is_refused_before_any_memory_is_used():
    """``expand`` to a giant shape, then a reduction: checked on meta tensors first."""
    side = int(MAX_ELEMENTS ** 0.5) + 1
    header, blobs = export(lambda x, y: x[:, :1].expand(-1, side * side // 64 + 1).sum(),
                           SPEC)
    graph = Graph(header, b"".join(blobs))
    with pytest.raises(TooLarge, match="makes a tensor of"):
        graph(torch.randn(64, 10), torch.zeros(64, dtype=torch.long))


def test_intermediates_are_bounded_together_not_only_one_by_one():
    """Many intermediates, each under the bound, that together are over it."""
    side = int(MAX_ELEMENTS ** 0.5)
    links = MAX_TOTAL_ELEMENTS // (side * side) + 1

    def chain(x, y):
        z = x.mean() * torch.ones(side, side)
        for _ in range(links):
            z = z + 1.0
        return z.mean()

    header, blobs = export(chain, SPEC)
    graph = Graph(header, b"".join(blobs))
    with pytest.raises(TooLarge, match="intermediates add up to"):
        graph(torch.randn(64, 10), torch.zeros(64, dtype=torch.long))


def test_a_graph_is_a_pure_function_of_its_inputs():
    """Nothing a graph does survives a call: the same inputs give the same loss, whatever
    came before."""
    graph, _ = _graph("ldr_kl")
    x, y = torch.randn(64, 10), torch.randint(10, (64,))
    first = graph(x, y)
    graph(torch.randn(64, 10) * 100, torch.randint(10, (64,)))
    assert torch.equal(graph(x, y), first)


class _CustomSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):  # a straight-through gradient: not the forward's derivative
        return grad


def test_a_custom_autograd_function_is_not_traced():
    """torch.export keeps a Function's forward and drops its backward: the graph would
    train on a different gradient, so the hook is served per call."""
    with pytest.raises(Untraceable, match="custom autograd.Function"):
        export(lambda x, y: _CustomSquare.apply(x).mean(), SPEC)


def test_a_graph_that_is_not_the_hook_is_refused():
    header, blobs = export(lambda x, y: (x * x).mean(), SPEC)
    example = (torch.randn(64, 10), torch.zeros(64, dtype=torch.long))
    with pytest.raises(Untraceable, match="differs from the hook"):
        _check_faithful(lambda x, y: (x * x * 1.01).mean(), example,
                        Graph(header, b"".join(blobs)))
    _check_faithful(lambda x, y: (x * x).mean(), example, Graph(header, b"".join(blobs)))


def test_a_loss_without_a_gradient_is_not_traced_nor_run():
    with pytest.raises(Untraceable, match="no gradient"):
        export(lambda x, y: x.detach().mean(), SPEC)
    # a server that sends such a graph anyway: refused before its first real call
    header, blobs = export(lambda x, y: x.detach().mean(), SPEC, check=False)
    graph = Graph(header, b"".join(blobs))
    with pytest.raises(ValueError, match="no gradient"):
        graph(torch.randn(64, 10, requires_grad=True), torch.zeros(64, dtype=torch.long))


def test_an_op_is_sized_by_the_broadcast_it_works_on_not_only_its_result():
    """cosine_similarity of [n, 1, d] and [1, n, d] returns n·n but holds n·n·d inside."""
    import torch.nn.functional as F

    def similarity(x, y):
        wide = x.repeat(1, 110)  # [64, 1100]: every result here is at most 64·1100
        return F.cosine_similarity(wide[:, None, :], wide[None, :, :], dim=-1).mean()

    header, blobs = export(similarity, SPEC, check=False)
    graph = Graph(header, b"".join(blobs))
    with pytest.raises(TooLarge, match="makes a tensor of 4,505,600 elements"):
        graph(torch.randn(64, 10), torch.zeros(64, dtype=torch.long))


def test_the_work_of_a_call_is_bounded_even_when_every_result_is_small():
    """Reductions of one big view return one number each but read all of it."""
    def sums(x, y):
        big = x.sum() * torch.ones(2048, 2048)  # 4.2 M elements, under the intermediate bound
        total = big.sum()
        for _ in range(40):
            total = total + big.sum()
        return total

    header, blobs = export(sums, SPEC, check=False)
    graph = Graph(header, b"".join(blobs))
    with pytest.raises(TooLarge, match="touch"):
        graph(torch.randn(64, 10), torch.zeros(64, dtype=torch.long))
