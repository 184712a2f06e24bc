"""Greedy decoding in the unlearning judge: a key-value cache against recomputing the
whole prefix at every new token (the naive loop), on the same prompts, in one run.

The judge decodes every evaluation question after every unlearning epoch (TOFU: 800
questions × 6 models per cell; MUSE: 30 continuations of 128 tokens), so decoding was
most of a cell's time. Both ways give the same tokens (checked here, and in
suites/unlearning/tests/test_unlearning_released.py for a ``transformers`` Llama). Reports,
per model, the seconds of each way at one torch thread and their ratio.

    .venv/bin/python bench/unlearning_decode.py            # the figures in bench/README.md
    .venv/bin/python bench/unlearning_decode.py --smoke    # what the tests run (seconds)
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from suites.unlearning import evaluate as ev
from suites.unlearning import fixtures as fx
from suites.unlearning.decode import generate
from suites.unlearning.model import TinyLM
from suites.unlearning.spec import FIXTURE_TRAINING, MODEL


def _llama(vocab: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)).eval()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = {**MODEL, **FIXTURE_TRAINING, "benchmark": "tofu", "train_on": "full"}
    codec = fx.codec(0)
    splits = ev.splits("tofu", fx.corpus(0), codec, 10, 2, 32)
    prompts = [*splits.forget.prompts, *splits.retain.prompts, *splits.wf.prompts,
               *splits.ke.prompts]
    new_tokens = 32
    if args.smoke:
        prompts, new_tokens = prompts[::40], 8
    tiny = TinyLM(fx.model_config(config))
    models = {"tinylm": (tiny, fx.init_params(config, 0))}
    llama = _llama(tiny.config.vocab_size)
    models["llama"] = (llama, dict(llama.named_parameters()))
    report = {}
    for name, (model, params) in models.items():
        seconds, tokens = {}, {}
        for cache in (False, True):
            start = time.perf_counter()
            # an untrained model rarely says <eos>: every prompt decodes all its tokens
            tokens[cache] = generate(model, params, prompts, new_tokens, codec.eos, cache=cache)
            seconds[cache] = time.perf_counter() - start
        if tokens[True] != tokens[False]:
            raise SystemExit(f"{name}: the cached decode gave other tokens")
        report[name] = {"prompts": len(prompts), "new_tokens": new_tokens,
                        "naive_s": seconds[False], "cached_s": seconds[True],
                        "speedup": seconds[False] / seconds[True]}
    print(f"{'model':8} {'prompts':>7} {'naive s':>8} {'cached s':>9} {'speed-up':>9}")
    for name, r in report.items():
        print(f"{name:8} {r['prompts']:7d} {r['naive_s']:8.2f} {r['cached_s']:9.2f} "
              f"{r['speedup']:8.1f}×")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
