"""TOFU / MUSE metrics (suites/unlearning/metrics.py): known answers worked by hand, and
cross-checks against independent re-implementations written here (KS statistic from the
empirical CDFs, AUC by counting pairs, ROUGE-L from an LCS table, Min-K by sorting,
open-unlearning's extraction-strength loop, muse_bench's roc_curve + auc)."""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np
import pytest
from sklearn.metrics import auc, roc_auc_score, roc_curve

from suites.unlearning import metrics as m


@pytest.fixture(autouse=True)
def _no_warnings():
    """Every metric keeps its warnings to itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ------------------------------------------------------------------------ probabilities


def test_normalized_probability_by_hand():
    got = m.normalized_probability(np.array([-2.0, -0.3, 0.0]), np.array([4, 1, 7]))
    assert got == pytest.approx([math.exp(-0.5), math.exp(-0.3), 1.0])


@pytest.mark.parametrize("logprob_sum, length, message", [
    ([-1.0, 2.0], [1, 1], "not losses"),
    ([-1.0, -2.0], [1, 0], "positive"),
    ([-1.0, -2.0], [1, 2, 3], "same shape"),
    ([], [], "non-empty"),
])
def test_normalized_probability_rejects(logprob_sum, length, message):
    with pytest.raises(ValueError, match=message):
        m.normalized_probability(logprob_sum, length)


def test_probability_is_the_mean():
    assert m.probability([0.2, 0.5, 0.8]) == pytest.approx(0.5)
    assert math.isnan(m.probability([0.2, math.nan]))


@pytest.mark.parametrize("p, message", [
    ([-0.5, -1.2], "not log-probabilities"),  # log-probabilities passed by mistake
    ([0.5, 1.5], "in \\[0, 1\\]"),
    ([[0.5]], "1-D"),
    ([], "non-empty"),
])
def test_probability_rejects(p, message):
    with pytest.raises(ValueError, match=message):
        m.probability(p)


def test_probability_with_options_by_hand():
    p_true = np.array([0.5, 0.2, 0.6])
    p_false = np.array([[0.25, 0.25], [0.1, 0.7], [0.0, 0.0]])
    expected = (0.5 / 1.0 + 0.2 / 1.0 + 0.6 / 0.6) / 3
    assert m.probability_with_options(p_true, p_false) == pytest.approx(expected)
    # all options at probability 0 (underflow): that item counts 0, as the reference's +1e-10
    assert m.probability_with_options([0.0, 0.5], [[0.0], [0.5]]) == pytest.approx(0.25)


@pytest.mark.parametrize("p_true, p_false, message", [
    ([0.5, 0.2], [[0.1, 0.1]], "N = len\\(p_true\\) = 2"),
    ([0.5], [0.1], "2-D"),
    ([0.5], [[-0.1]], "p_false must be probabilities"),
])
def test_probability_with_options_rejects(p_true, p_false, message):
    with pytest.raises(ValueError, match=message):
        m.probability_with_options(p_true, p_false)


# ------------------------------------------------------------------------------ truth ratio


def test_truth_ratios_by_hand():
    p_perturbed = np.array([[0.2, 0.05], [0.3, 0.3]])
    p_base = np.array([0.4, 0.1])
    expected = [math.exp((math.log(0.2) + math.log(0.05)) / 2) / 0.4,  # sqrt(0.01)/0.4 = 0.25
                math.exp((math.log(0.3) + math.log(0.3)) / 2) / 0.1]  # 3
    r = m.truth_ratios(p_perturbed, p_base)
    assert r == pytest.approx(expected) and r == pytest.approx([0.25, 3.0])
    assert m.truth_ratio_forget(r) == pytest.approx((0.25 + 1 / 3) / 2)
    assert m.truth_ratio_true_better(r) == pytest.approx((0.75 + 0.0) / 2)


def test_truth_ratios_match_tofus_loss_formula():
    # locuslab/tofu: curr_stat_1 = exp(mean avg_perturb_loss - avg_paraphrased_loss) = 1/R
    gen = np.random.default_rng(0)
    pert_loss, para_loss = gen.uniform(0.1, 4, (20, 5)), gen.uniform(0.1, 4, 20)
    stat_1 = np.exp(pert_loss.mean(axis=1) - para_loss)
    r = m.truth_ratios(np.exp(-pert_loss), np.exp(-para_loss))
    assert r == pytest.approx(1 / stat_1)
    assert m.truth_ratio_forget(r) == pytest.approx(np.mean(np.minimum(stat_1, 1 / stat_1)))
    assert m.truth_ratio_true_better(r) == pytest.approx(np.mean(np.maximum(0, 1 - 1 / stat_1)))


def _collapsed(seed: int, low: float, high: float, n: int = 40):
    """Per-token losses of a collapsed model (``low``–``high`` nats a token on the
    paraphrased answer, a little less on the perturbed ones): its probabilities."""
    gen = np.random.default_rng(seed)
    para = gen.uniform(low, high, n)
    pert = np.maximum(para[:, None] + gen.uniform(-3.0, -0.5, (n, 5)), 0.01)
    return np.exp(-pert), np.exp(-para)


def test_the_two_truth_ratio_conventions_agree_on_a_sane_model_not_on_a_collapsed_one():
    """open-unlearning divides by ``P(paraphrased) + 1e-10`` (its memorization.py): the
    same numbers while that probability is far above 1e-10, orders of magnitude apart once
    a model collapses to 25–40 nats a token (the suite's headline keeps TOFU's form)."""
    sane_pert, sane_base = _collapsed(0, 0.1, 2.0)
    tofu = m.truth_ratios(sane_pert, sane_base)
    ou = m.truth_ratios(sane_pert, sane_base, convention="open-unlearning")
    assert ou == pytest.approx(tofu, rel=1e-8)
    pert, base = _collapsed(1, 28.0, 40.0)
    tofu = m.truth_ratios(pert, base)
    ou = m.truth_ratios(pert, base, convention="open-unlearning")
    # each by its own formula, written out here
    geo = np.exp(np.log(pert).mean(axis=1))
    assert tofu == pytest.approx(geo / base, rel=1e-9)
    assert ou == pytest.approx(geo / (base + 1e-10), rel=1e-9)
    assert np.all(tofu > 1) and np.all(ou < tofu / 10)  # R ≈ e^{1.75} against a capped one
    forget = {c: m.truth_ratio_forget(r, convention=c)
              for c, r in (("tofu", tofu), ("open-unlearning", ou))}
    assert forget["tofu"] == pytest.approx(np.mean(1 / tofu))
    assert forget["open-unlearning"] == pytest.approx(np.mean(np.minimum(ou, 1 / (ou + 1e-10))))
    assert forget["tofu"] > 10 * forget["open-unlearning"]
    # forget quality against a retain model whose false answers are as likely (R ≈ e^1.75):
    # TOFU's form finds the two alike, open-unlearning's entirely apart
    retain = np.random.default_rng(2).lognormal(1.75, 0.7, 40)
    fq_tofu, fq_ou = m.forget_quality(tofu, retain)[0], m.forget_quality(ou, retain)[0]
    assert fq_tofu > 1e10 * fq_ou
    with pytest.raises(ValueError, match="convention must be one of tofu, open-unlearning"):
        m.truth_ratios(pert, base, convention="ou")


def test_truth_ratios_do_not_underflow():
    # the product 1e-600 underflows to 0; the geometric mean in log space does not
    p_perturbed = np.full((1, 3), 1e-200)
    assert m.truth_ratios(p_perturbed, [1e-200]) == pytest.approx([1.0])
    assert m.truth_ratios(p_perturbed, [1e-210]) == pytest.approx([1e10])


def test_truth_ratio_extremes():
    # a base answer of probability 0 (R = inf) and a perturbed one of probability 0 (R = 0)
    r = m.truth_ratios([[0.5], [0.0]], [0.0, 0.5])
    assert r.tolist() == [math.inf, 0.0]
    assert m.truth_ratio_forget(r) == 0.0
    assert m.truth_ratio_true_better(r) == pytest.approx(0.5)
    assert m.truth_ratio_forget([1.0, 1.0]) == 1.0
    assert math.isnan(m.truth_ratio_forget([1.0, math.nan]))
    assert math.isnan(m.truth_ratio_true_better([1.0, math.nan]))


@pytest.mark.parametrize("p_perturbed, p_base, message", [
    ([0.2, 0.3], [0.5, 0.5], "p_perturbed must be a non-empty 2-D"),
    ([[0.2], [0.3]], [0.5], "N = len\\(p_base\\) = 1"),
    (np.zeros((2, 0)), [0.5, 0.5], "non-empty 2-D"),
    ([[0.2]], [-0.5], "p_base must be probabilities"),
])
def test_truth_ratios_reject(p_perturbed, p_base, message):
    with pytest.raises(ValueError, match=message):
        m.truth_ratios(p_perturbed, p_base)


@pytest.mark.parametrize("aggregate", [m.truth_ratio_forget, m.truth_ratio_true_better])
def test_truth_ratio_aggregates_reject(aggregate):
    with pytest.raises(ValueError, match=">= 0"):
        aggregate([0.5, -1.0])
    with pytest.raises(ValueError, match="1-D"):
        aggregate([[0.5]])


# ---------------------------------------------------------------------- forget quality


def _ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """sup_x |F_a(x) - F_b(x)|, the empirical CDFs evaluated at every pooled point."""
    return max(abs(np.mean(a <= x) - np.mean(b <= x)) for x in np.concatenate([a, b]))


def test_forget_quality_p_value_by_hand():
    # fully separated samples of 3 and 3: D = 1, and 2 of the C(6,3) = 20 equally likely
    # arrangements reach it (all a below b, or all above): p = 2/20
    p, d = m.forget_quality([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert d == 1.0 and p == pytest.approx(2 / math.comb(6, 3))


def test_forget_quality_identical_samples():
    r = np.array([0.3, 0.7, 0.9, 1.4])
    assert m.forget_quality(r, r.copy()) == (1.0, 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forget_quality_statistic_matches_brute_force(seed):
    gen = np.random.default_rng(seed)
    a = gen.lognormal(0, 1, 40)
    b = np.round(gen.lognormal(0.3, 1, 25), 1)  # ties within b
    p, d = m.forget_quality(a, b)
    assert d == pytest.approx(_ks_statistic(a, b))
    assert 0 < p <= 1
    # tofu runs the test on 1/R: a decreasing map leaves KS unchanged
    assert m.forget_quality(1 / a, 1 / b) == pytest.approx((p, d))


def test_exact_p_value_counts_arrangements():
    # an independent check of the exact two-sided KS p-value for 2 vs 3 samples, by
    # enumerating all C(5,2) placements of the first sample among the pooled ranks
    a, b = np.array([0.1, 0.4]), np.array([0.2, 0.3, 0.5])
    d_obs = _ks_statistic(a, b)
    pooled = np.arange(5.0)
    hits = 0
    for idx in combinations(range(5), 2):
        rest = np.setdiff1d(pooled, pooled[list(idx)])
        hits += _ks_statistic(pooled[list(idx)], rest) >= d_obs - 1e-12
    assert m.forget_quality(a, b) == pytest.approx((hits / math.comb(5, 2), d_obs))


def test_forget_quality_nan_propagates_and_rejects_bad_shapes():
    assert all(math.isnan(v) for v in m.forget_quality([0.5, math.nan], [0.5, 0.6]))
    with pytest.raises(ValueError, match="r_retain must be a non-empty 1-D"):
        m.forget_quality([0.5], [])
    with pytest.raises(ValueError, match="r_unlearned must be a non-empty 1-D"):
        m.forget_quality([[0.5]], [0.5])


# ------------------------------------------------------------------------- model utility


def test_model_utility_by_hand():
    assert m.model_utility([1.0, 0.5, 0.25]) == pytest.approx(3 / (1 + 2 + 4))
    nine = [0.5] * 8 + [0.1]
    assert m.model_utility(nine) == pytest.approx(9 / (8 * 2 + 10))


def test_model_utility_zero_nan_negative_empty():
    assert m.model_utility([0.9, 0.0, 0.8]) == 0.0
    assert math.isnan(m.model_utility([0.9, math.nan, 0.8]))
    with pytest.raises(ValueError, match=">= 0"):
        m.model_utility([0.9, -0.1])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        m.model_utility([])


# ----------------------------------------------------------------------------------- ROUGE


def _lcs(x: list[str], y: list[str]) -> int:
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i, xi in enumerate(x):
        for j, yj in enumerate(y):
            table[i + 1][j + 1] = table[i][j] + 1 if xi == yj else max(table[i][j + 1],
                                                                         table[i + 1][j])
    return table[-1][-1]


def _random_texts(seed: int, n: int) -> list[str]:
    # lowercase alphanumeric words of 2-3 characters: no stemming applies to them
    vocab = ["ab", "cd", "ef", "x1", "y2", "zz", "abc", "q9", "mn"]
    gen = np.random.default_rng(seed)
    return [" ".join(gen.choice(vocab, gen.integers(1, 12))) for _ in range(n)]


def test_rouge_l_matches_an_lcs_table():
    gts, gens = _random_texts(0, 30), _random_texts(1, 30)
    recall, f1 = [], []
    for gt, gen in zip(gts, gens, strict=True):
        lcs = _lcs(gt.split(), gen.split())
        r, p = lcs / len(gt.split()), lcs / len(gen.split())
        recall.append(r)
        f1.append(0.0 if lcs == 0 else 2 * p * r / (p + r))
    assert m.rouge_l_recall(gts, gens) == pytest.approx(recall)
    assert m.rouge_l_f1(gts, gens) == pytest.approx(f1)
    assert m.rouge_l_f1(gts, gens, use_stemmer=True) == pytest.approx(f1)
    assert m.mean_rouge_l_f1_percent(gts, gens) == pytest.approx(100 * np.mean(f1))


def test_rouge_l_by_hand_and_stemming():
    # gt "the cat sat on the mat" (6 tokens), gen "the cat on a mat": LCS "the cat on mat" = 4
    assert m.rouge_l_recall(["The cat sat on the mat."], ["the cat on a mat"]) == \
        pytest.approx([4 / 6])
    # TOFU stems ("cats" -> "cat"); MUSE does not
    assert m.rouge_l_recall(["the cats"], ["the cat"]) == pytest.approx([1.0])
    assert m.rouge_l_recall(["the cats"], ["the cat"], use_stemmer=False) == pytest.approx([0.5])
    assert m.rouge_l_f1(["the cats"], ["the cat"]) == pytest.approx([0.5])
    assert m.rouge_l_recall([""], ["anything"]).tolist() == [0.0]


def test_rouge_scorer_is_built_once():
    assert m._scorer(True) is m._scorer(True) and m._scorer(False) is not m._scorer(True)


@pytest.mark.parametrize("gts, gens, message", [
    (["a b", "c"], ["a b"], "equal length"),
    ([], [], "non-empty"),
    ("a b", "a b", "not a single string"),
])
def test_rouge_rejects(gts, gens, message):
    for fn in (m.rouge_l_recall, m.rouge_l_f1, m.mean_rouge_l_f1_percent):
        with pytest.raises(ValueError, match=message):
            fn(gts, gens)


# -------------------------------------------------------------------------- memorisation

TARGET = np.array([5, 6, 7, 8])


@pytest.mark.parametrize("predicted, expected", [
    ([5, 6, 7, 8], 1.0),    # all correct: k* = 0
    ([0, 6, 7, 8], 0.75),   # k* = 1
    ([5, 0, 7, 8], 0.5),    # the prefix before the last error does not count: k* = 2
    ([0, 0, 0, 8], 0.25),   # k* = 3
    ([5, 6, 7, 0], 0.25),   # last token wrong: open-unlearning's loop stops at k = T-1
    ([0, 0, 0, 0], 0.25),
])
def test_extraction_strength_by_hand(predicted, expected):
    assert m.extraction_strength(np.array(predicted), TARGET) == pytest.approx(expected)


def test_extraction_strength_with_the_empty_suffix():
    assert m.extraction_strength(np.array([5, 6, 7, 0]), TARGET, allow_empty_suffix=True) == 0
    assert m.extraction_strength(np.array([0, 0, 0, 8]), TARGET,
                                 allow_empty_suffix=True) == pytest.approx(0.25)
    assert m.extraction_strength(np.array([3]), np.array([3])) == 1.0
    assert m.extraction_strength(np.array([2]), np.array([3])) == 1.0  # k* = T-1 = 0
    assert m.extraction_strength(np.array([2]), np.array([3]), allow_empty_suffix=True) == 0


def _reference_es(preds: np.ndarray, labels: np.ndarray) -> float:
    """open-unlearning memorization.py's loop, restated."""
    for k in range(len(labels)):
        if np.array_equal(preds[k:], labels[k:]):
            break
    return 1 - k / len(labels)


def test_extraction_strength_matches_the_reference_loop():
    gen = np.random.default_rng(0)
    for _ in range(300):
        size = int(gen.integers(1, 9))
        target = gen.integers(0, 3, size)
        predicted = np.where(gen.random(size) < 0.7, target, gen.integers(0, 3, size))
        assert m.extraction_strength(predicted, target) == pytest.approx(
            _reference_es(predicted, target))


def test_exact_memorization_by_hand():
    assert m.exact_memorization(np.array([5, 0, 7, 0]), TARGET) == 0.5
    assert m.exact_memorization(TARGET, TARGET) == 1.0


@pytest.mark.parametrize("fn", [m.exact_memorization, m.extraction_strength])
@pytest.mark.parametrize("predicted, target, message", [
    ([1, 2], [1, 2, 3], "equal length"),
    ([], [], "non-empty"),
    ([[1, 2]], [[1, 2]], "1-D"),
    ([0.1, 0.2], [1, 2], "integer token ids"),
])
def test_token_metrics_reject(fn, predicted, target, message):
    with pytest.raises(ValueError, match=message):
        fn(np.array(predicted), np.array(target))


# ------------------------------------------------------------------------------ MIA, MUSE


def test_min_k_by_sorting():
    lp = np.array([-0.1, -2.0, -0.5, -3.0, -0.2])
    assert m.min_k_score(lp) == pytest.approx(2.5)  # int(5 * 0.4) = 2 lowest: -3, -2
    assert m.min_k_score(lp, k=1.0) == pytest.approx(-np.mean(lp))
    # floor, not ceil: int(7 * 0.4) = int(2.8) = 2
    lp7 = np.array([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -5.0])
    assert m.min_k_score(lp7) == pytest.approx((5.0 + 0.6) / 2)
    # at least one token: int(2 * 0.4) = 0 -> 1
    assert m.min_k_score([-1.0, -2.0]) == pytest.approx(2.0)
    gen = np.random.default_rng(0)
    for size in range(1, 40):
        lp = gen.normal(-2, 1, size)
        count = max(1, int(size * 0.2))
        assert m.min_k_score(lp, k=0.2) == pytest.approx(-np.mean(sorted(lp)[:count]))


def test_min_k_nan_and_rejects():
    assert math.isnan(m.min_k_score([-1.0, math.nan, -2.0]))
    with pytest.raises(ValueError, match="k must be in"):
        m.min_k_score([-1.0], k=0.0)
    with pytest.raises(ValueError, match="k must be in"):
        m.min_k_score([-1.0], k=1.5)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        m.min_k_score([])


def _pair_auc(member: np.ndarray, nonmember: np.ndarray) -> float:
    """Mann-Whitney: the share of (member, nonmember) pairs with the member scored higher."""
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in member for b in nonmember)
    return wins / (len(member) * len(nonmember))


@pytest.mark.parametrize("seed", [0, 1])
def test_mia_auc_counts_pairs_and_matches_muse_bench(seed):
    gen = np.random.default_rng(seed)
    member = np.round(gen.normal(1.0, 1, 30), 1)  # rounded: ties within and across
    nonmember = np.round(gen.normal(1.5, 1, 20), 1)
    got = m.mia_auc(member, nonmember)
    assert got == pytest.approx(_pair_auc(member, nonmember))
    # muse_bench metrics/privleak.py: forget labelled 0, holdout 1, roc_curve(y, -ppl), auc
    ppl = np.concatenate([member, nonmember])
    y = np.array([0] * len(member) + [1] * len(nonmember))
    fpr, tpr, _ = roc_curve(y, -ppl)
    assert got == pytest.approx(auc(fpr, tpr))
    # open-unlearning mia/utils.py: the same labels, roc_auc_score(labels, scores) = 1 - ours
    assert roc_auc_score(y, ppl) == pytest.approx(1 - got)


def test_mia_auc_orientation():
    # the model remembers the forget set: its Min-K scores (-log-probs) are all lower
    assert m.mia_auc([0.1, 0.2, 0.3], [1.0, 2.0]) == 0.0
    assert m.mia_auc([1.0, 2.0], [0.1, 0.2, 0.3]) == 1.0
    assert m.mia_auc([1.0, 1.0], [1.0]) == 0.5
    # infinite scores (a token of probability 0) are ordered, not rejected
    assert m.mia_auc([math.inf, 0.5], [1.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(m.mia_auc([math.nan, 0.5], [1.0]))
    with pytest.raises(ValueError, match="nonmember_scores must be a non-empty 1-D"):
        m.mia_auc([0.5], [])


def test_privleak_by_hand():
    assert m.privleak(0.3, 0.4772) == pytest.approx((0.3 - 0.4772) / 0.4772 * 100)
    assert m.privleak(m.MUSE_AUC_RETRAIN["news"], m.MUSE_AUC_RETRAIN["news"]) == 0.0
    assert m.MUSE_AUC_RETRAIN == pytest.approx({"news": 0.4772, "books": 0.5393})
    # open-unlearning privacy.py: ((1 - A_u) - (1 - A_r)) / (1 - A_r) on its AUCs A = 1 - ours
    a_u, a_r = 0.9, 0.45
    assert m.privleak(1 - a_u, 1 - a_r) == pytest.approx(((1 - a_u) - (1 - a_r)) / (1 - a_r)
                                                         * 100)
    assert math.isnan(m.privleak(math.nan, 0.5))
    with pytest.raises(ValueError, match="auc_retrain"):
        m.privleak(0.5, 0.0)
    with pytest.raises(ValueError, match="auc_unlearned"):
        m.privleak(1.5, 0.5)


