"""The quantization attack (Zhang et al., ICLR 2025, "Catastrophic failure of LLM unlearning
via quantization"): an unlearned model whose weights are rounded to fewer bits can give
back what unlearning took away, because unlearning moved the weights by less than one
quantization step and rounding undoes the move.

Weight-only round-to-nearest (RTN), the scheme every quantized deployment starts from and
the one the paper's RTN rows use: each weight matrix of a linear layer (``nn.Linear`` in
the mini model and in a ``transformers`` model alike) is replaced by its dequantized
rounding; embeddings, the output head, norms and biases stay in full precision, as
GPTQ/AWQ and bitsandbytes leave them.

- ``per channel``: symmetric, one scale per output row, ``s = max|w_row| / (2^(b-1) - 1)``,
  ``q = clamp(round(w / s), -2^(b-1), 2^(b-1) - 1)``; the int8/int4 weights of LLM.int8's
  vector-wise scheme.
- ``group-wise``: the same rounding with one scale per ``group`` consecutive inputs of a
  row: llama.cpp's Q4_0/Q8_0 blocks of 32 (GPTQ and AWQ checkpoints use groups of 128 with
  a zero point; the mini model's rows are only 64 and 256 wide, so groups of 32 are the
  ones that differ from per channel there: ``Scheme.group``). Symmetric rounding also
  keeps a matrix already on its grid exactly where it is, which an asymmetric zero point
  computed in float32 does not (it moves such a matrix by one unit in the last place).

Rounding is deterministic: the same weights give the same model, and a matrix already on
the grid is returned unchanged (the tests' known answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from suites.unlearning.spec import QUANT_HEADLINE, QUANT_SCHEMES


@dataclass(frozen=True)
class Scheme:
    """One way to round: ``bits`` per weight, and ``group`` inputs per scale (``None``:
    one symmetric scale per output row)."""

    name: str
    bits: int
    group: int | None = None
    utility: bool = False  # the attack measures utility after this rounding too


def schemes(group: int) -> tuple[Scheme, ...]:
    """The attack's roundings (``spec.QUANT_SCHEMES``): 8 and 4 bits per output channel
    (the columns "after 8-bit" and "after 4-bit"), and 4 bits in groups of ``group``
    inputs. 8-bit group-wise is left out: per channel it already moves a weight by at most
    1/254 of its row's range. Utility is measured after ``spec.QUANT_HEADLINE``, the
    rounding per channel that moves a model most: its scoring is most of what the attack
    costs (bench/unlearning_judge.py)."""
    return tuple(Scheme(name, bits, group if grouped else None, name == QUANT_HEADLINE)
                 for name, _, bits, grouped in QUANT_SCHEMES)


def rtn(weight: Tensor, bits: int, group: int | None = None) -> Tensor:
    """``weight`` ``[out, in]`` rounded to ``bits`` and dequantized (the same dtype): one
    symmetric scale per output row, or per ``group`` consecutive inputs of a row."""
    if weight.dim() != 2:
        raise ValueError(f"RTN rounds a weight matrix [out, in], got shape "
                         f"{tuple(weight.shape)}")
    if not 2 <= bits <= 16:
        raise ValueError(f"bits must be 2..16, got {bits}")
    if group is not None and group < 1:
        raise ValueError(f"a group holds at least one input, got {group}")
    rows, cols = weight.shape
    size = cols if group is None else group
    # a short last group (as llama.cpp's and GPTQ's): padded with zeros, which change no
    # group's largest magnitude, and cut off after rounding
    w = torch.nn.functional.pad(weight.detach().double(), (0, -cols % size))
    g = w.reshape(rows, -1, size)
    top = 2 ** (bits - 1) - 1
    scale = g.abs().amax(dim=2, keepdim=True) / top
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero group
    q = torch.clamp(torch.round(g / scale), -top - 1, top)
    return (q * scale).reshape(rows, -1)[:, :cols].to(weight.dtype)


def linear_weights(model: nn.Module) -> list[str]:
    """The names of the weights RTN rounds: every ``nn.Linear``'s but the output head's."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [f"{name}.weight" for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and module is not head]


def quantized(model: nn.Module, params: Mapping[str, Tensor], scheme: Scheme
              ) -> dict[str, Tensor]:
    """``params`` with every linear weight of ``model`` rounded by ``scheme``; the other
    tensors are the same objects."""
    names = set(linear_weights(model))
    missing = names - params.keys()
    if missing:
        raise ValueError(f"parameters lack the model's linear weights: {sorted(missing)[:3]}")
    return {k: rtn(v, scheme.bits, scheme.group) if k in names else v
            for k, v in params.items()}
