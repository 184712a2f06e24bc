"""The unlearning suites' real mode on fixture files in the released formats.

data/released beside this file holds a few authors of TOFU (JSON lines, locuslab/TOFU's
columns) and of MUSE-News (parquet, muse-bench/MUSE-News's layout), written by make.py there.
The models are tiny randomly initialised Llamas with a byte-level BPE tokenizer, saved with
``save_pretrained`` into a data root laid out as the real variants expect: the loaders, the
codec, the trainer and the whole judge run exactly as on a GPU worker, only smaller.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.contract.registry import get_suite
from harness.data.real import DatasetMissing
from harness.objectives.loading import load_objective
from harness.runner.inprocess import run_cells
from suites.unlearning import corpus as cp
from suites.unlearning import evaluate as ev
from suites.unlearning import pretrained, released
from suites.unlearning.data import encode_chunks, encode_qa
from suites.unlearning.text import PLAIN_ANSWER, PLAIN_QUESTION

FILES = Path(__file__).parent / "data" / "released"
EPOCHS = 2
TRAIN_EPOCHS = 15


# --- a data root as the real variants expect it -----------------------------------------


def _tokenizer(texts: list[str], chat: bool = False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    # Llama's way: the start token first, added by the tokenizer itself
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                 unk_token="<unk>")
    if chat:
        hf.chat_template = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>"
                            "{{ m['content'] }}</s>{% endfor %}"
                            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    return hf


def _texts() -> list[str]:
    c = cp.generate(0)
    return [*c.texts(), PLAIN_QUESTION, PLAIN_ANSWER, *released.IDK]


def _model(folder: Path, tokenizer, seed: int, learn: list[cp.QA]) -> None:
    """A 2-block Llama fine-tuned a little on ``learn`` by the suite's own trainer (a target
    that knows something, so unlearning has something to remove), saved as released."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from suites.unlearning.lm import train
    from suites.unlearning.text import pretrained as codec_of

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    enc = encode_qa(codec_of(tokenizer), [q.question for q in learn], [q.answer for q in learn])
    trained = train(model, dict(model.named_parameters()), enc, seed=seed, epochs=TRAIN_EPOCHS,
                    lr=1e-2, batch_size=32, warmup_epochs=1.0, weight_decay=0.0,
                    stop_exact=1.0)
    model.load_state_dict(trained.params, strict=False)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A data root with both benchmarks and, for each, a target and a different retain
    model (``same-retain``: a copy of the target, so that the target IS the gold standard)."""
    base = tmp_path_factory.mktemp("data")
    tok = _tokenizer(_texts())
    for bench in ("tofu", "muse-news"):
        shutil.copytree(FILES / bench, base / "unlearning" / bench)
    tofu = released.tofu(FILES / "tofu", 10)
    muse = released.muse(FILES / "muse-news")
    everything = [*tofu.forget, *tofu.retain_train, *tofu.world_facts, *tofu.real_authors,
                  *muse.forget_qa, *muse.retain_qa]
    forget = {q.question for q in (*tofu.forget, *muse.forget_qa)}
    _model(base / "unlearning" / "tofu-target", tok, 0, everything)
    _model(base / "unlearning" / "tofu-retain90", tok, 0,
           [q for q in everything if q.question not in forget])
    shutil.copytree(base / "unlearning" / "tofu-target", base / "unlearning" / "muse-news-target")
    shutil.copytree(base / "unlearning" / "tofu-retain90",
                    base / "unlearning" / "muse-news-retrain")
    shutil.copytree(base / "unlearning" / "tofu-target", base / "unlearning" / "same-retain")
    return base


def short(name: str, **config):
    suite = get_suite(name)
    variants = tuple(replace(v, config={**v.config, **config}) if "source" in v.config else v
                     for v in suite.variants)
    return replace(suite, variants=variants, settings={**suite.settings, "epochs": EPOCHS})


def run(suite, objective: str, variant: str, root: Path, seeds=(0,)):
    results = run_cells(suite, load_objective(objective), [variant], list(seeds),
                              data_root=str(root))
    assert all(r.status == "ok" for r in results), [(r.status, r.error) for r in results]
    return results


# --- the readers -------------------------------------------------------------------------


def test_tofu_reader_reads_the_released_columns():
    data = released.tofu(FILES / "tofu", 10)
    c = cp.generate(0)
    first = c.qa_of([c.entities[0].id])[0]
    assert len(data.forget) == 40 and len(data.retain_train) == 60
    assert len(data.retain_eval) == 20 and len(data.world_facts) == len(data.real_authors) == 6
    q = data.forget[0]
    assert (q.question, q.answer, q.paraphrased_answer, q.perturbed_answers) == (
        first.question, first.answer, first.paraphrased_answer, first.perturbed_answers)
    # authors are 20 consecutive rows; the attack's attributes are positions among them
    assert [q.entity for q in data.forget] == [0] * 20 + [1] * 20
    assert data.forget[21].attribute == "q1"
    # facts: the answer itself is the truth ratio's base
    assert all(f.paraphrased_answer == f.answer for f in data.world_facts)
    assert all(len(f.perturbed_answers) == 5 for f in data.real_authors)


def test_muse_reader_reads_the_released_layout():
    data = released.muse(FILES / "muse-news")
    assert len(data.forget_texts) == len(data.retain_texts) == 3
    assert len(data.verbmem) == 4 and all(p and gt for p, gt in data.verbmem)
    assert len(data.forget_qa) == len(data.retain_qa) == 10
    assert len(data.forget_shots) == 2 and len(data.privleak_holdout) == 4
    assert len({q.attribute for q in data.forget_qa}) == 10  # each question its own


def test_a_missing_folder_names_the_repository_to_download(tmp_path):
    with pytest.raises(DatasetMissing, match="locuslab/TOFU"):
        released.tofu(tmp_path / "nowhere", 10)
    with pytest.raises(DatasetMissing, match="muse-bench/MUSE-News"):
        released.muse(tmp_path / "nowhere")
    (tmp_path / "tofu").mkdir()
    with pytest.raises(DatasetMissing, match="forget10_perturbed"):
        released.tofu(tmp_path / "tofu", 10)


def test_wrong_columns_or_partial_authors_are_refused(tmp_path):
    folder = tmp_path / "tofu"
    shutil.copytree(FILES / "tofu", folder)
    lines = (folder / "forget10_perturbed.json").read_text().splitlines()
    (folder / "forget10_perturbed.json").write_text("\n".join(lines[:30]) + "\n")
    with pytest.raises(ValueError, match="not whole authors of 20"):
        released.tofu(folder, 10)
    (folder / "forget10_perturbed.json").write_text(
        "\n".join(x.replace('"paraphrased_answer"', '"para"') for x in lines) + "\n")
    with pytest.raises(ValueError, match="no column paraphrased_answer"):
        released.tofu(folder, 10)
    with pytest.raises(ValueError, match="1, 5 and 10"):
        released.tofu(folder, 20)


def test_a_missing_model_says_what_the_directory_needs(tmp_path):
    with pytest.raises(DatasetMissing, match="save_pretrained"):
        pretrained.codec(tmp_path)


# --- the codec ---------------------------------------------------------------------------


def test_plain_codec_frames_question_and_answer_as_open_unlearning_tags():
    tok = _tokenizer(_texts())
    from suites.unlearning.text import pretrained as codec_of

    codec = codec_of(tok, "auto")  # no chat template: plain
    assert codec.format == "plain"
    assert codec.bos == tok.bos_token_id  # the tokenizer puts it first itself
    assert codec.pad == tok.eos_token_id  # no pad token: the end token, never attended
    prompt = codec.prompt("who wrote it ?")
    assert prompt[0] == codec.bos
    assert tok.decode(prompt[1:]) == "Question: who wrote it ?\nAnswer:"
    enc = encode_qa(codec, ["who wrote it ?"], ["alma did ."])
    n = int(enc.attention.sum())
    ids = enc.input_ids[0, :n].tolist()
    assert ids[-1] == codec.eos and tok.decode(ids[1:-1]) == (
        "Question: who wrote it ?\nAnswer: alma did .")
    # counted: the answer's tokens and the end token, each predicted by the position before
    counted = enc.labels[0][enc.mask[0] > 0].tolist()
    assert counted == [*codec.answer("alma did ."), codec.eos]
    shots = codec.prompt("q2 ?", [("q1 ?", "a1 .")])
    assert tok.decode(shots[1:]) == "Question: q1 ?\nAnswer: a1 .\n\nQuestion: q2 ?\nAnswer:"


def test_chat_codec_uses_the_tokenizers_template():
    tok = _tokenizer(_texts(), chat=True)
    from suites.unlearning.text import pretrained as codec_of

    codec = codec_of(tok, "auto")
    assert codec.format == "chat"
    prompt = codec.prompt("who ?")
    assert prompt[0] == tok.bos_token_id and prompt.count(tok.bos_token_id) == 1
    assert tok.decode(prompt, skip_special_tokens=False) == "<s><|user|>who ?</s><|assistant|>"
    with pytest.raises(ValueError, match="no chat template"):
        codec_of(_tokenizer(_texts()), "chat")
    with pytest.raises(ValueError, match="auto, chat or plain"):
        codec_of(tok, "llama")


def test_long_documents_are_cut_into_windows_with_every_token_counted():
    tok = _tokenizer(_texts())
    from suites.unlearning.text import pretrained as codec_of

    codec = codec_of(tok)
    text = " ".join(p.text for p in cp.generate(0).passages[:3])
    enc = encode_chunks(codec, [text], 64)
    ids = codec.encode(text)
    assert len(enc) == math.ceil(len(ids) / 63) and enc.input_ids.shape[1] == 64
    assert (enc.input_ids[:, 0] == codec.bos).all()
    rebuilt = [t for row, n in zip(enc.input_ids, enc.attention.sum(1), strict=True)
               for t in row[1:n].tolist()]
    assert rebuilt == ids
    assert enc.mask.sum() == len(ids)  # every token, each predicted from the one before


def test_cached_decoding_gives_the_tokens_of_the_whole_prefix(root):
    """The judge's key-value cache changes the cost, not the answers, on a real model."""
    from suites.unlearning.decode import generate

    folder = root / "unlearning" / "tofu-target"
    model, codec = pretrained.skeleton(str(folder)), pretrained.codec(folder)
    params = pretrained.params(folder, "target")
    data = released.tofu(FILES / "tofu", 10)
    prompts = [codec.prompt(q.question) for q in data.forget[:12] + data.world_facts]
    cached = generate(model, params, prompts, 24, codec.eos, chunk=5)
    assert cached == generate(model, params, prompts, 24, codec.eos, cache=False)
    assert any(cached) and all(codec.eos not in c for c in cached)


# --- the whole pipeline on tiny models ----------------------------------------------------


def test_tofu_released_target_row_against_itself_is_indistinguishable(root):
    suite = short("unlearning-tofu", retain="unlearning/same-retain")
    (cell,) = run(suite, "target", "tofu/forget10", root)
    m = cell.metrics
    assert m["forget_quality"] == pytest.approx(1.0) and m["ks_statistic"] == 0.0
    assert m["utility_retained"] == 1.0 and m["model_utility"] > 0
    assert m["model_utility"] == m["retain_model_utility"] == m["target_utility"]
    assert "retain_model_fq" not in m  # no replicas of a released retain model
    assert cell.info["fixtures"]["target"].endswith("tofu-target")
    assert len(cell.curves["fq_trajectory"]) == EPOCHS + 1


def test_tofu_released_metrics_match_a_direct_evaluation(root):
    """The target row's numbers are the judge's formulas on the model read back from disk,
    on splits built here independently of the pipeline."""
    suite = short("unlearning-tofu")
    (cell,) = run(suite, "target", "tofu/forget10", root)
    folder = root / "unlearning"
    model = pretrained.skeleton(str(folder / "tofu-target"))
    codec = pretrained.codec(folder / "tofu-target")
    target = pretrained.params(folder / "tofu-target", "target")
    retain = pretrained.params(folder / "tofu-retain90", "retain")
    data = released.tofu(folder / "tofu", 10)
    splits = ev.qa_splits("tofu", codec, data.forget, data.retain_eval, 4, 32)
    splits.wf = ev.QASplit.of(codec, data.world_facts, "answer")
    splits.ke = ev.QASplit.of(codec, data.real_authors, "answer")
    expected, r_target = ev.tofu(model, target, splits)
    _, r_retain = ev.tofu(model, retain, splits, generate_answers=False)
    for name, value in expected.items():
        assert cell.metrics[name] == pytest.approx(value, abs=1e-12), name
    from suites.unlearning import metrics as mt

    assert cell.metrics["forget_quality"] == pytest.approx(mt.forget_quality(r_target,
                                                                             r_retain)[0])
    # the quantization attack on a transformers model: its linear layers rounded, not its
    # embeddings or output head, and the numbers those weights give
    from suites.unlearning.quantize import linear_weights, quantized, schemes

    rounded = linear_weights(model)
    assert len(rounded) == 2 * 7 and not any("embed" in k or "lm_head" in k for k in rounded)
    for scheme in schemes(32):
        expected, _ = ev.tofu(model, quantized(model, target, scheme), splits,
                              trajectory_point=True)
        assert cell.metrics[f"{scheme.name}_forget_prob"] == pytest.approx(
            expected["forget_prob"], abs=1e-12)
        if scheme.utility:
            assert cell.metrics[f"{scheme.name}_model_utility"] == pytest.approx(
                expected["model_utility"], abs=1e-12)


def test_tofu_released_gradient_ascent_unlearns_and_relearning_is_measured(root):
    suite = short("unlearning-tofu")
    (target,) = run(suite, "target", "tofu/forget10", root)
    (ga,) = run(suite, "grad_ascent", "tofu/forget10", root, seeds=(3,))
    assert ga.metrics["forget_prob"] < target.metrics["forget_prob"]
    assert ga.curves["forget_prob_trajectory"][0] == target.metrics["forget_prob"]
    assert ga.metrics["relearn_forget_prob"] > ga.metrics["held_back_prob"]
    assert np.isfinite(list(ga.metrics.values())).all()


def test_muse_released_runs_every_metric_and_privleak_is_zero_against_itself(root):
    suite = short("unlearning-muse", retain="unlearning/muse-news-target")
    (cell,) = run(suite, "target", "muse/news", root)
    m = cell.metrics
    assert m["privleak"] == 0.0 and m["target_privleak"] == 0.0
    assert 0 <= m["verbmem_forget"] <= 100 and 0 <= m["knowmem_retain"] <= 100
    (npo,) = run(short("unlearning-muse"), "npo_rt", "muse/news", root)
    assert set(npo.metrics) >= {"verbmem_forget", "knowmem_forget", "privleak", "score"}
    assert len(npo.curves["verbmem_trajectory"]) == EPOCHS + 1


def test_rmu_reads_a_real_models_hidden_states(root):
    """RMU names hidden_* context: the hidden states of a transformers model's block."""
    (cell,) = run(short("unlearning-tofu"), "rmu", "tofu/forget10", root)
    assert cell.info["options"] == {"hidden_layer": 1}
    assert cell.metrics["forget_prob"] > 0


def test_a_retain_model_of_another_architecture_is_refused(root, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    other = tmp_path / "unlearning" / "other"
    config = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
    LlamaForCausalLM(config).save_pretrained(other)
    shutil.copytree(root / "unlearning", tmp_path / "unlearning", dirs_exist_ok=True)
    suite = short("unlearning-tofu", retain="unlearning/other")
    with pytest.raises(ValueError, match="not the target's architecture"):
        run_cells(suite, load_objective("target"), ["tofu/forget10"], [0],
                        data_root=str(tmp_path))


def test_download_is_asked_for_only_with_the_flag(root, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(released, "fetch", lambda repo, folder, dataset: calls.append(
        (repo, dataset)) or shutil.copytree(root / "unlearning" / (
            "tofu" if dataset else "tofu-target"), folder))
    suite = short("unlearning-tofu")
    with pytest.raises(DatasetMissing):
        run_cells(suite, load_objective("target"), ["tofu/forget10"], [0],
                        data_root=str(tmp_path))
    assert calls == []
    results = run_cells(suite, load_objective("target"), ["tofu/forget10"], [0],
                              data_root=str(tmp_path), download=True)
    assert [r.status for r in results] == ["ok"]
    assert calls == [("locuslab/TOFU", True),
                     ("open-unlearning/tofu_Llama-3.2-1B-Instruct_full", False),
                     ("open-unlearning/tofu_Llama-3.2-1B-Instruct_retain90", False)]


# --- the sandbox -------------------------------------------------------------------------

READ_RETAIN = '''
import os

FOLDER = "__RETAIN__"
try:
    print(f"retain: {sorted(os.listdir(FOLDER))}", flush=True)
except OSError as exc:
    print(f"retain: missing ({type(exc).__name__})", flush=True)


def unlearning_loss(forget, retain):
    return forget.seq_logprobs.mean()
'''


def test_a_sandboxed_loss_cannot_read_the_released_retain_model(root):
    """The real mode's retain model sits in the data root on the worker's disk: outside
    the sandbox's reach, as the mini mode's fixture cache is."""
    from harness.runner.sandboxed import run_cells_sandboxed

    folder = root / "unlearning" / "tofu-retain90"
    (r,) = run_cells_sandboxed(short("unlearning-tofu"),
                               READ_RETAIN.replace("__RETAIN__", str(folder)), "peek.py", {},
                               ["tofu/forget10"], [0], data_root=str(root))
    assert (r.status, r.reason) == ("killed", "violation"), (r.status, r.error, r.captured)
    assert str(folder) in r.error and "retain: [" not in r.captured


def test_a_sandboxed_loss_trains_a_real_model_as_in_process(root):
    """The loss served from the sandbox gives the in-process numbers on a transformers
    model (the hook sees the same LMBatch tensors)."""
    from harness.runner.sandboxed import run_cells_sandboxed

    suite = short("unlearning-tofu")
    code = (Path(__file__).resolve().parents[3] / "suites" / "unlearning_tofu" / "baselines"
            / "npo_rt.py").read_text()
    (boxed,) = run_cells_sandboxed(suite, code, "npo_rt.py", {}, ["tofu/forget10"], [0],
                                   data_root=str(root))
    (local,) = run(suite, "npo_rt", "tofu/forget10", root)
    assert boxed.status == "ok", (boxed.status, boxed.error)
    for name in ("forget_prob", "model_utility", "forget_quality", "relearn_forget_prob"):
        assert boxed.metrics[name] == pytest.approx(local.metrics[name], rel=1e-6), name


def test_the_judge_evaluates_on_the_device_the_cells_trained_on(root, monkeypatch):
    """A real model is evaluated where it trained (a GPU worker's judge must not decode a
    1B model on the CPU): both runners hand their device to the judge."""
    from harness.runner.sandboxed import run_cells_sandboxed
    from suites.unlearning.pipeline import Unlearning

    seen = []
    judge = Unlearning.judge

    def spy(self, suite, job, output, **kwargs):
        seen.append(kwargs.get("device"))
        return judge(self, suite, job, output, **kwargs)

    monkeypatch.setattr(Unlearning, "judge", spy)
    suite = short("unlearning-tofu")
    run_cells(suite, load_objective("target"), ["tofu/forget10"], [0], data_root=str(root),
                    device="cpu")
    code = "def unlearning_loss(forget, retain):\n    return forget.seq_logprobs.mean() * 0\n"
    run_cells_sandboxed(suite, code, "zero.py", {}, ["tofu/forget10"], [0], device="cpu",
                        data_root=str(root))
    assert seen == ["cpu", "cpu"]


def test_the_seeds_of_a_real_model_share_one_copy_of_its_weights(root):
    """One job per seed, and no seed copies the model: a 7B target is 28 GB."""
    from suites.unlearning.pipeline import Unlearning

    suite = short("unlearning-tofu")
    jobs = Unlearning().prepare(suite, [suite.variant("tofu/forget10")], [0, 1, 2],
                                data_root=str(root))
    assert [j.members for j in jobs] == [[("tofu/forget10", s)] for s in (0, 1, 2)]
    name = next(k for k in jobs[0].inputs if k.startswith("target."))
    assert jobs[0].inputs[name].shape[0] == 1
    assert all(np.shares_memory(jobs[0].inputs[name], j.inputs[name]) for j in jobs[1:])
    assert all(j.private.retain[0] is jobs[0].private.retain[0] for j in jobs[1:])
    # the RMU direction is each seed's own
    assert not np.array_equal(jobs[0].inputs["control_vector"], jobs[1].inputs["control_vector"])
