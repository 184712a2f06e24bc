"""Members' parameters: stacked on dim 0, from a fresh init per seed or a checkpoint each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from harness.contract import seeding


def stacked_init(model: nn.Module, seeds: list[int]) -> dict[str, Tensor]:
    """Parameters of ``model`` re-initialised once per seed (its INIT stream), stacked."""
    per_seed = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seeding.stream_seed(seed, seeding.INIT))
        with seeding.torch_global(int(torch.randint(2**62, (1,), generator=gen))):
            for module in model.modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
            per_seed.append({k: v.detach().clone() for k, v in model.named_parameters()})
    return stack(per_seed)


def stack(per_member: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """One parameter dict per member (a checkpoint each: a pretrained start) → stacked."""
    if not per_member:
        raise ValueError("no members to stack")
    names = list(per_member[0])
    for p in per_member[1:]:
        if list(p) != names or any(p[k].shape != per_member[0][k].shape for k in names):
            raise ValueError("every member needs the same parameter names and shapes")
    return {k: torch.stack([p[k].detach() for p in per_member]) for k in names}


@torch.no_grad()
def predict(model: nn.Module, params: Mapping[str, Tensor], inputs: Tensor,
            chunk: int = 4096) -> Tensor:
    """[M, N] argmax predictions of every member on shared inputs."""
    if len(inputs) == 0:
        return torch.zeros(next(iter(params.values())).shape[0], 0, dtype=torch.long)
    return torch.cat(list(_forward_chunks(model, params, inputs, chunk, Tensor.argmax)),
                     dim=1)


@torch.no_grad()
def logits(model: nn.Module, params: Mapping[str, Tensor], inputs: Tensor,
           chunk: int = 4096) -> Tensor:
    """[M, N, K] outputs of every member on shared inputs, on the CPU; the inputs go to the
    members' device a chunk at a time."""
    return torch.cat([out.cpu() for out in _forward_chunks(model, params, inputs, chunk)],
                     dim=1)


def _forward_chunks(model, params, inputs, chunk, reduce=None):
    forward = vmap(lambda p, xs: functional_call(model, p, (xs,)), in_dims=(0, None))
    device = next(iter(params.values())).device
    for i in range(0, len(inputs), chunk):
        out = forward(dict(params), inputs[i:i + chunk].to(device))
        yield out if reduce is None else reduce(out, -1)
