"""The judge's evaluation of one model: TOFU's and MUSE's numbers from its parameters.

The evaluation splits (:class:`Splits`) hold everything the objective never sees: the
paraphrased and perturbed answers, the retained authors' evaluation questions, the world
facts, the known entities, the holdout passages. :func:`tofu` and :func:`muse` compute
one model's metrics with :mod:`suites.unlearning.metrics` (the formulas and their sources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from suites.unlearning import corpus as cp
from suites.unlearning import metrics as mt
from suites.unlearning.data import Encoded, encode_passages, encode_qa
from suites.unlearning.decode import generate
from suites.unlearning.lm import Scores, counted_logits, score
from suites.unlearning.model import forward
from suites.unlearning.prefixed import score_prefixed
from suites.unlearning.text import Codec

FQ_FLOOR, FQ_GOAL = 1e-30, 0.05  # the score's forget-quality scale (log10): 0 → 1
PROMPT_TOKENS = 32  # of a passage, before the continuation VerbMem compares
MIN_K = 0.4


@dataclass
class QASplit:
    """One QA evaluation split: the answers, the base answers of the truth ratio (the
    paraphrase for authors, the answer itself for facts) and K perturbed answers each
    (none for MUSE's QA: only its greedy answers are compared)."""

    questions: list[str]
    answers: list[str]
    answer: Encoded
    base: Encoded
    perturbed: Encoded | None  # [N·K] item-major
    k: int
    prompts: list[list[int]]

    @classmethod
    def of(cls, codec: Codec, items: list[cp.QA], base: str,
           shots: Sequence[tuple[str, str]] = ()) -> QASplit:
        """``shots``: in-context examples before every greedy answer's question."""
        qs = [q.question for q in items]
        answers = [q.answer for q in items]
        bases = [getattr(q, base) for q in items]
        k = len(items[0].perturbed_answers)
        pert_q = [q.question for q in items for _ in range(k)]
        pert_a = [a for q in items for a in q.perturbed_answers]
        answer = encode_qa(codec, qs, answers)
        return cls(qs, answers, answer,
                   encode_qa(codec, qs, bases) if bases != answers else answer,
                   encode_qa(codec, pert_q, pert_a) if k else None, k,
                   [codec.prompt(q, shots) for q in qs])


@dataclass
class Continuations:
    """VerbMem's prompts (token ids) and the text the model should not continue them with."""

    prompts: list[list[int]]
    continuations: list[str]


def continuations(codec: Codec, texts: list[str]) -> Continuations:
    """The mini protocol: each passage's first ``PROMPT_TOKENS`` tokens, and its next 128."""
    prompts, rest = [], []
    for t in texts:
        ids = codec.encode(t)
        prompts.append([*codec.start(), *ids[:PROMPT_TOKENS]])
        rest.append(codec.decode(ids[PROMPT_TOKENS:PROMPT_TOKENS + 128]))
    return Continuations(prompts, rest)


@dataclass
class Splits:
    benchmark: str
    codec: Codec
    forget: QASplit
    retain: QASplit
    wf: QASplit | None = None  # TOFU's world facts
    ke: QASplit | None = None  # TOFU's known entities (real authors)
    verbmem: Continuations | None = None  # MUSE: forget passages' openings
    mia_forget: Encoded | None = None  # MUSE: members (forget passages)
    mia_holdout: Encoded | None = None  # MUSE: non-members (holdout passages)
    relearn: Encoded | None = None  # the attack's forget QA
    held_back: QASplit | None = None  # the other forget QA, measured after the attack
    max_new_tokens: int = 32
    verbmem_new_tokens: int = 128
    cache: dict[str, object] = field(default_factory=dict)


def qa_splits(benchmark: str, codec: Codec, forget_qa: list[cp.QA], retain_qa: list[cp.QA],
              relearn_attributes: int, max_new_tokens: int,
              shots: Sequence[tuple[str, str]] = (),
              retain_shots: Sequence[tuple[str, str]] | None = None) -> Splits:
    """The forget and retain QA splits, and the relearning attack's split of the forget QA:
    the questions of the first ``relearn_attributes`` attributes of every forget entity
    are the attack's, the rest are held back and measured. ``shots`` (``retain_shots``):
    in-context examples before the forget (retain) questions' greedy answers."""
    attributes = list(dict.fromkeys(q.attribute for q in forget_qa))[:relearn_attributes]
    attack = [q for q in forget_qa if q.attribute in attributes]
    rest = [q for q in forget_qa if q.attribute not in attributes]
    if not attack or not rest:
        raise ValueError(f"the relearning attack needs forget questions to train on and "
                         f"others to measure: {len(attack)} and {len(rest)}")
    return Splits(benchmark, codec, QASplit.of(codec, forget_qa, "paraphrased_answer", shots),
                  QASplit.of(codec, retain_qa, "paraphrased_answer",
                             shots if retain_shots is None else retain_shots),
                  relearn=encode_qa(codec, [q.question for q in attack],
                                    [q.answer for q in attack]),
                  held_back=QASplit.of(codec, rest, "paraphrased_answer", shots),
                  max_new_tokens=max_new_tokens)


def splits(benchmark: str, corpus: cp.Corpus, codec: Codec, forget: int,
           relearn_attributes: int, max_new_tokens: int) -> Splits:
    """The generated corpus's evaluation splits for a forget split of ``forget`` entities."""
    forget_ids = corpus.forget_splits[forget]
    s = qa_splits(benchmark, codec, list(corpus.qa_of(forget_ids)),
                  list(corpus.qa_of(corpus.retain_eval[forget])), relearn_attributes,
                  max_new_tokens)
    s.wf = QASplit.of(codec, list(corpus.world_facts), "answer")
    s.ke = QASplit.of(codec, list(corpus.known_entities), "answer")
    if benchmark == "muse":
        forget_texts = [p.text for p in corpus.passages_of(forget_ids)]
        s.verbmem = continuations(codec, forget_texts)
        s.mia_forget = encode_passages(codec, forget_texts)
        s.mia_holdout = encode_passages(codec, [p.text for p in
                                                corpus.passages_of(corpus.holdout)])
    return s


def _answers(model: nn.Module, params: Mapping[str, Tensor], s: Splits,
             split: QASplit) -> list[str]:
    return [s.codec.decode(g) for g in generate(model, params, split.prompts,
                                                 s.max_new_tokens, s.codec.eos)]


def truth_ratios(model: nn.Module, params: Mapping[str, Tensor], split: QASplit, *,
                 convention: str = "tofu") -> np.ndarray:
    """Per-question truth ratios of ``split`` (TOFU's own form unless ``convention`` says
    open-unlearning's: :func:`suites.unlearning.metrics.truth_ratios`)."""
    assert split.perturbed is not None, "a truth ratio needs perturbed answers"
    base, pert = score_prefixed(model, params, split.base, split.perturbed)
    return _ratios(split, base, pert, convention)


def _ratios(split: QASplit, base: Scores, pert: Scores, convention: str = "tofu"
            ) -> np.ndarray:
    """Per-question truth ratios from the base and the K perturbed answers' scores."""
    return mt.truth_ratios(pert.normalized.reshape(-1, split.k), base.normalized,
                           convention=convention)


def qa_scores(model: nn.Module, params: Mapping[str, Tensor], split: QASplit
              ) -> tuple[Scores, Scores, Scores]:
    """The answers', the truth ratio's base answers' and the perturbed answers' scores of
    ``split``, its questions run once for all three (:mod:`suites.unlearning.prefixed`);
    the base is the answer's scores where the base answers are the answers."""
    assert split.perturbed is not None, "a truth ratio needs perturbed answers"
    if split.base is split.answer:
        a, pert = score_prefixed(model, params, split.answer, split.perturbed)
        return a, a, pert
    a, base, pert = score_prefixed(model, params, split.answer, split.base, split.perturbed)
    return a, base, pert


def tofu(model: nn.Module, params: Mapping[str, Tensor], s: Splits, *,
         generate_answers: bool = True, trajectory_point: bool = False
         ) -> tuple[dict[str, float], np.ndarray]:
    """TOFU's numbers of one model, and its per-question forget truth ratios (for the KS
    test against the retain model's). Without ``generate_answers`` the ROUGE numbers (and
    the utility, which needs them) are left out. A ``trajectory_point`` has only what the
    trajectories show (forget probability and truth ratios, model utility): no forget
    ROUGE, so the forget questions are not decoded."""
    out: dict[str, float] = {}
    f, r_forget = forget_scores(model, params, s)
    out["forget_prob"] = float(mt.probability(f.normalized))
    if not trajectory_point:
        out["forget_truth_ratio"] = float(mt.truth_ratio_forget(r_forget))
        out["extraction_strength"] = float(np.mean([
            mt.extraction_strength(p, t) for p, t in zip(f.predicted, f.target,
                                                         strict=True)]))
    utility = _utility_splits(s)
    for key, split in utility:
        # each set scored once: the facts' truth-ratio base is their answer, and their
        # probability and truth ratio share the perturbed answers
        a, base, pert = (x.normalized for x in qa_scores(model, params, split))
        pert = pert.reshape(-1, split.k)
        out[f"{key}_prob"] = float(mt.probability(a) if key == "retain" else
                                   mt.probability_with_options(a, pert))
        out[f"{key}_truth_ratio"] = float(mt.truth_ratio_true_better(
            mt.truth_ratios(pert, base)))
    if generate_answers:
        if not trajectory_point:
            out["forget_rouge"] = float(np.mean(mt.rouge_l_recall(
                s.forget.answers, _answers(model, params, s, s.forget))))
        for key, split in utility:
            out[f"{key}_rouge"] = float(np.mean(mt.rouge_l_recall(
                split.answers, _answers(model, params, s, split))))
        out["model_utility"] = float(mt.model_utility(
            [out[f"{k}_{w}"] for k in ("retain", "wf", "ke")
             for w in ("prob", "rouge", "truth_ratio")]))
    return out, r_forget


def forget_scores(model: nn.Module, params: Mapping[str, Tensor], s: Splits
                  ) -> tuple[Scores, np.ndarray]:
    """The forget answers' scores and the forget questions' truth ratios, in one scoring."""
    f, base, pert = qa_scores(model, params, s.forget)
    return f, _ratios(s.forget, base, pert)


def _utility_splits(s: Splits) -> list[tuple[str, QASplit]]:
    if s.wf is None or s.ke is None:
        raise ValueError("TOFU's utility needs the world facts and the known entities")
    return [("retain", s.retain), ("wf", s.wf), ("ke", s.ke)]


def mia_scores(model: nn.Module, params: Mapping[str, Tensor], passages: Encoded,
               codec: Codec, reference: list[np.ndarray] | None = None
               ) -> dict[str, np.ndarray]:
    """Every attack's score of each passage (``mt.MIA_ATTACKS``; larger = less likely),
    from one scoring pass; ``reference``: a reference model's token log-probabilities of the
    same passages (no reference attack without it)."""
    logprobs, targets, mus, variances = scored_with_moments(model, params, passages)
    out = {"min_k": [mt.min_k_score(t, k=MIN_K) for t in logprobs],
           "loss": [mt.loss_score(t) for t in logprobs],
           "zlib": [mt.zlib_score(t, codec.decode(ids.tolist()))
                    for t, ids in zip(logprobs, targets, strict=True)],
           "min_k_plus_plus": [mt.min_k_plus_plus_score(t, mu, var, k=MIN_K) for t, mu, var
                               in zip(logprobs, mus, variances, strict=True)]}
    if reference is not None:
        out["reference"] = [mt.reference_score(t, r) for t, r
                            in zip(logprobs, reference, strict=True)]
    return {k: np.array(v) for k, v in out.items()}


@torch.inference_mode()
def scored_with_moments(model: nn.Module, params: Mapping[str, Tensor], enc: Encoded,
                        chunk: int = 512) -> tuple[list[np.ndarray], ...]:
    """Per sequence, from one forward pass: its counted tokens' log-probabilities and the
    tokens (exactly as :func:`suites.unlearning.lm.score` computes them), and at each
    counted position the mean and variance of ``log p`` over the vocabulary under ``p``
    itself, in float64 (Min-K%++'s standardisation). Written beside ``lm.score`` because
    ``lm.py`` is in the fixtures' key: changing it would rebuild every fixture model."""
    logprobs, targets, mus, variances = [], [], [], []
    device = next(iter(params.values())).device
    for lo in range(0, len(enc), chunk):
        attention = torch.from_numpy(enc.attention[lo:lo + chunk])
        width = int(attention.any(0).nonzero().max()) + 1

        def part(a: np.ndarray) -> Tensor:
            return torch.from_numpy(a[lo:lo + chunk, :width]).to(device)  # noqa: B023

        mask = part(enc.mask) > 0
        logits = counted_logits(model, params, part(enc.input_ids), part(enc.attention),
                                mask).float()
        target = part(enc.labels)[mask]
        token = logits.log_softmax(-1).gather(-1, target[:, None]).squeeze(-1).double().cpu()
        every = logits.double().log_softmax(-1)
        mu = (every.exp() * every).sum(-1)
        var = ((every.exp() * every.square()).sum(-1) - mu.square()).cpu()
        mu, target = mu.cpu(), target.cpu()
        ends = mask.sum(-1).cumsum(0).tolist()
        for start, end in zip([0, *ends[:-1]], ends, strict=True):
            logprobs.append(token[start:end].numpy())
            targets.append(target[start:end].numpy())
            mus.append(mu[start:end].numpy())
            variances.append(var[start:end].numpy())
    return logprobs, targets, mus, variances


def token_logprobs(model: nn.Module, params: Mapping[str, Tensor], passages: Encoded
                   ) -> list[np.ndarray]:
    """A (reference) model's log-probabilities of each passage's tokens."""
    return score(model, params, passages).token_logprobs


def muse(model: nn.Module, params: Mapping[str, Tensor], s: Splits, *,
         trajectory_point: bool = False,
         reference: tuple[list[np.ndarray], list[np.ndarray]] | None = None
         ) -> dict[str, float]:
    """MUSE's numbers of one model (×100 ROUGE-L F1), and its membership AUCs, forget
    passages against holdout passages: ``auc`` by Min-40% (MUSE's), ``auc_<attack>`` by the
    rest of ``mt.MIA_ATTACKS`` (the reference attack given a reference model's token
    log-probabilities of the forget and holdout passages). Not for a ``trajectory_point``:
    the trajectories show VerbMem and KnowMem only."""
    assert s.mia_forget is not None and s.mia_holdout is not None
    out = {"verbmem_forget": verbmem(model, params, s),
           "knowmem_forget": knowmem(model, params, s, s.forget),
           "knowmem_retain": knowmem(model, params, s, s.retain)}
    if trajectory_point:
        return out
    # The membership AUC: P(a forget passage looks more familiar than a holdout one), i.e.
    # 1 − muse_bench's AUC, so that PrivLeak ≫ 0 means "still remembers" (open-unlearning's
    # sign; muse_bench's has the opposite one).
    members = mia_scores(model, params, s.mia_forget, s.codec,
                         reference[0] if reference else None)
    others = mia_scores(model, params, s.mia_holdout, s.codec,
                        reference[1] if reference else None)
    for attack in members:
        key = "auc" if attack == "min_k" else f"auc_{attack}"
        out[key] = 1.0 - float(mt.mia_auc(members[attack], others[attack]))
    return out


def relearn(model: nn.Module, params: Mapping[str, Tensor], attack: Encoded, *, steps: int,
            lr: float) -> dict[str, Tensor]:
    """The relearning attack: ``steps`` full-batch AdamW steps on the attack QA (the NLL of
    their answers), from the unlearned parameters. Deterministic: no sampling."""
    p = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    opt = torch.optim.AdamW(p.values(), lr=lr, weight_decay=0.0)
    device = next(iter(params.values())).device
    ids, labels, attention = (torch.from_numpy(a).to(device) for a in (
        attack.input_ids, attack.labels, attack.attention))
    mask = torch.from_numpy(attack.mask).to(device) > 0
    for _ in range(steps):
        logits = forward(model, p, ids, attention).logits
        loss = nn.functional.cross_entropy(logits[mask], labels[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in p.items()}


def held_back_prob(model: nn.Module, params: Mapping[str, Tensor], s: Splits) -> float:
    assert s.held_back is not None
    return answer_prob(model, params, s.held_back)


def held_back_knowmem(model: nn.Module, params: Mapping[str, Tensor], s: Splits) -> float:
    assert s.held_back is not None
    return knowmem(model, params, s, s.held_back)


def verbmem(model: nn.Module, params: Mapping[str, Tensor], s: Splits) -> float:
    """MUSE's VerbMem: ROUGE-L F1 ×100 of the greedy continuations of the forget passages'
    openings against their rest."""
    assert s.verbmem is not None, "VerbMem needs the forget passages"
    gens = [s.codec.decode(g) for g in generate(model, params, s.verbmem.prompts,
                                                 s.verbmem_new_tokens, s.codec.eos)]
    return float(np.mean(mt.rouge_l_f1(s.verbmem.continuations, gens)) * 100)


def forget_prob(model: nn.Module, params: Mapping[str, Tensor], s: Splits) -> float:
    """TOFU's forget probability alone (no other split scored, nothing decoded)."""
    return answer_prob(model, params, s.forget)


def answer_prob(model: nn.Module, params: Mapping[str, Tensor], split: QASplit) -> float:
    """Mean length-normalised probability of ``split``'s answers."""
    (answers,) = score_prefixed(model, params, split.answer)
    return float(mt.probability(answers.normalized))


def knowmem(model: nn.Module, params: Mapping[str, Tensor], s: Splits, split: QASplit
            ) -> float:
    """MUSE's KnowMem of ``split``: ROUGE-L F1 ×100 of the greedy answers."""
    return float(np.mean(mt.rouge_l_f1(split.answers, _answers(model, params, s, split))) * 100)


def tofu_score(utility: float, target_utility: float, fq: float) -> float:
    """``u·(1 + q)/2`` (see the suite's ``score`` metric)."""
    u = float(np.clip(utility / target_utility, 0.0, 1.0)) if target_utility > 0 else 0.0
    q = float(np.clip((np.log10(max(fq, 1e-300)) - np.log10(FQ_FLOOR))
                      / (np.log10(FQ_GOAL) - np.log10(FQ_FLOOR)), 0.0, 1.0))
    return u * (1 + q) / 2


def muse_score(m: Mapping[str, float], target: Mapping[str, float],
               retain: Mapping[str, float]) -> float:
    """``u·(1 + q)/2`` with u = KnowMem on retain relative to the target, q = the mean
    share of the way from the target to the retain model on VerbMem and KnowMem (forget)."""
    shares = []
    for key in ("verbmem_forget", "knowmem_forget"):
        gap = target[key] - retain[key]
        shares.append(float(np.clip((target[key] - m[key]) / gap, 0, 1)) if gap > 0 else 0.0)
    u = (float(np.clip(m["knowmem_retain"] / target["knowmem_retain"], 0, 1))
         if target["knowmem_retain"] > 0 else 0.0)
    return u * (1 + float(np.mean(shares))) / 2
