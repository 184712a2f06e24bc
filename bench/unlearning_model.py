"""Which causal LM the mini unlearning suites train: the suite's TinyLM against the same
sizes instantiated from ``transformers`` configs (Llama, GPT-2), on the suites' own batches.

Reports, side by side in one run, per model: parameters, milliseconds per training step
(forward, backward, AdamW) at one torch thread, and the step of 5 members stacked under
``torch.func.vmap`` against a loop over the same 5 members, each as a ratio to TinyLM.

    .venv/bin/python bench/unlearning_model.py            # the figures in the README
    .venv/bin/python bench/unlearning_model.py --smoke    # what the tests run (seconds)
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.func import functional_call, vmap

from suites.unlearning.fixtures import model_config, training_set
from suites.unlearning.model import TinyLM, parameters_count
from suites.unlearning.spec import FIXTURE_TRAINING, MODEL

MEMBERS = 5


def models(vocab: int) -> dict[str, torch.nn.Module]:
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    c = model_config({**MODEL, **FIXTURE_TRAINING})
    return {
        "tinylm": TinyLM(c),
        "llama": LlamaForCausalLM(LlamaConfig(
            vocab_size=vocab, hidden_size=c.d_model, intermediate_size=c.mlp,
            num_hidden_layers=c.layers, num_attention_heads=c.heads,
            num_key_value_heads=c.heads, max_position_embeddings=c.max_length,
            tie_word_embeddings=True)),
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=c.d_model,
                                           n_layer=c.layers, n_head=c.heads,
                                           n_positions=c.max_length)),
    }


def loss_of(model: torch.nn.Module, params, ids, labels, mask):
    """The answer tokens' mean NLL (a float mask: no data-dependent shapes under vmap)."""
    out = functional_call(model, params, (), {"input_ids": ids,
                                              "attention_mask": torch.ones_like(ids)})
    logp = out.logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return -(logp * mask).sum() / mask.sum()


def step_ms(model, batch, repeats: int) -> float:
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    opt = torch.optim.AdamW(params.values(), lr=1e-3)
    for i in range(repeats + 2):  # two warm-up steps
        if i == 2:
            start = time.perf_counter()
        opt.zero_grad()
        loss_of(model, params, *batch).backward()
        opt.step()
    return 1000 * (time.perf_counter() - start) / repeats


def members_ms(model, batch, repeats: int, batched: bool) -> float:
    stacked = {k: torch.stack([v.detach()] * MEMBERS).requires_grad_()
               for k, v in model.named_parameters()}
    ids, labels, mask = batch
    if batched:
        run = vmap(lambda p: loss_of(model, p, ids, labels, mask))
    else:
        def run(p):
            return torch.stack([loss_of(model, {k: v[m] for k, v in p.items()}, *batch)
                                for m in range(MEMBERS)])
    for i in range(repeats + 1):
        if i == 1:
            start = time.perf_counter()
        run(stacked).sum().backward()
    return 1000 * (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 2 if args.smoke else 30
    enc, _ = training_set({**MODEL, **FIXTURE_TRAINING, "benchmark": "tofu",
                           "train_on": "full"})
    rows = torch.randperm(len(enc), generator=torch.Generator().manual_seed(0))[:32]
    ids = torch.from_numpy(enc.input_ids[rows.numpy()])
    batch = (ids, torch.from_numpy(enc.labels[rows.numpy()]),
             torch.from_numpy(enc.mask[rows.numpy()]))
    vocab = model_config({**MODEL, **FIXTURE_TRAINING}).vocab_size
    report = {}
    for name, model in models(vocab).items():
        report[name] = {"parameters": parameters_count(model),
                        "step_ms": step_ms(model, batch, repeats)}
        try:
            report[name]["vmap5_ms"] = members_ms(model, batch, max(repeats // 3, 1), True)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be vmapped is a finding
            report[name]["vmap5_ms"] = None
            report[name]["vmap_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        report[name]["loop5_ms"] = members_ms(model, batch, max(repeats // 3, 1), False)
    base = report["tinylm"]["step_ms"]
    print(f"{'model':8} {'params':>8} {'ms/step':>8} {'× tinylm':>9} {'vmap5 ms':>9} "
          f"{'loop5 ms':>9}")
    for name, r in report.items():
        r["ratio_to_tinylm"] = r["step_ms"] / base
        vm = f"{r['vmap5_ms']:.1f}" if r["vmap5_ms"] else "fails"
        print(f"{name:8} {r['parameters']:8d} {r['step_ms']:8.2f} {r['ratio_to_tinylm']:9.2f} "
              f"{vm:>9} {r['loop5_ms']:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
