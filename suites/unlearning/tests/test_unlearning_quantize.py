"""The quantization attack's rounding (suites/unlearning/quantize.py): known answers by
hand, the round-trip error bound, a grid it already sits on left exactly in place, and
which of a model's weights it rounds (the mini model here; a transformers Llama in
test_unlearning_released.py)."""

from __future__ import annotations

import pytest
import torch

from suites.unlearning.model import LMConfig, TinyLM
from suites.unlearning.quantize import Scheme, linear_weights, quantized, rtn, schemes


def test_per_channel_rounding_by_hand():
    # 4 bits: scale = max|w| / 7 per row; round half to even (-3.5 -> -4)
    w = torch.tensor([[1.0, -0.5, 0.25, 0.1], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    expected = torch.tensor([[7, -4, 2, 1], [0, 0, 0, 0]], dtype=torch.float64) / 7
    expected[1] = 0.0  # an all-zero row stays zero (no division by a zero scale)
    assert torch.equal(rtn(w, 4), expected)
    # 8 bits: 127 levels a side; 0.1 * 127 = 12.7 -> 13
    assert rtn(w, 8)[0, 3].item() == pytest.approx(13 / 127)


def test_groups_have_their_own_scales_and_a_short_last_group_is_kept():
    w = torch.tensor([[1.0, 0.5, 0.02, 0.01, 0.3]], dtype=torch.float64)
    out = rtn(w, 4, group=2)
    # groups [1, .5], [.02, .01], [.3]: scales 1/7, .02/7, .3/7
    expected = torch.tensor([[7 / 7, 4 / 7, 0.02, 0.02 * 4 / 7, 0.3]], dtype=torch.float64)
    assert torch.allclose(out, expected, rtol=0, atol=1e-15)
    # per channel, the small weights would have rounded to zero
    assert rtn(w, 4)[0, 3].item() == 0.0


@pytest.mark.parametrize("bits,group", [(8, None), (4, None), (4, 32), (3, 24)])
def test_round_trip_error_is_at_most_half_a_step_and_the_grid_is_a_fixed_point(bits, group):
    gen = torch.Generator().manual_seed(bits)
    w = torch.randn(48, 96, generator=gen) * torch.logspace(-3, 0, 48)[:, None]
    out = rtn(w, bits, group)
    size = 96 if group is None else group
    steps = w.reshape(48, -1, size).abs().amax(2, keepdim=True) / (2 ** (bits - 1) - 1)
    error = (out - w).reshape(48, -1, size).abs()
    assert (error <= steps / 2 * (1 + 1e-6)).all()
    levels = [len(torch.unique(row.reshape(-1, size)[k])) for row in out
              for k in range(96 // size)]
    assert max(levels) <= 2 ** bits
    assert torch.equal(rtn(out, bits, group), out)  # already quantized: unchanged
    assert out.dtype == w.dtype


def test_bad_shapes_and_widths_are_refused():
    with pytest.raises(ValueError, match="weight matrix"):
        rtn(torch.ones(4), 4)
    with pytest.raises(ValueError, match="bits"):
        rtn(torch.ones(2, 2), 1)
    with pytest.raises(ValueError, match="at least one input"):
        rtn(torch.ones(2, 2), 4, group=0)


def test_the_mini_models_linear_weights_are_rounded_and_nothing_else():
    model = TinyLM(LMConfig(vocab_size=50, d_model=64, layers=2, heads=4, mlp=256,
                            max_length=16))
    params = dict(model.named_parameters())
    names = linear_weights(model)
    assert sorted(names) == sorted(f"blocks.{b}.{m}.weight" for b in range(2)
                                   for m in ("qkv", "proj", "up", "down"))
    for scheme in schemes(32):
        out = quantized(model, params, scheme)
        for k, v in params.items():
            assert torch.equal(out[k], rtn(v, scheme.bits, scheme.group)) if k in names \
                else out[k] is v, k
    with pytest.raises(ValueError, match="linear weights"):
        quantized(model, {"embed.weight": params["embed.weight"]}, Scheme("int4", 4))


def test_a_move_smaller_than_half_a_step_rounds_back_to_the_grid_point():
    """The attack's premise (Zhang et al.): unlearning that moves an on-grid model's weights
    by less than half a rounding step (its largest weight per row left in place) is undone
    exactly by rounding; a larger move is not."""
    gen = torch.Generator().manual_seed(7)
    target = rtn(torch.randn(16, 64, generator=gen, dtype=torch.float64), 4)
    step = target.abs().amax(1, keepdim=True) / 7
    keep = target.abs() == target.abs().amax(1, keepdim=True)  # the rows' scales stay
    small = torch.where(keep, 0.0, (torch.rand(16, 64, generator=gen, dtype=torch.float64)
                                    - 0.5) * 0.9 * step)
    assert torch.equal(rtn(target + small, 4), target)
    large = torch.where(keep, 0.0, 1.5 * step)
    assert not torch.equal(rtn(target + large, 4), target)
