"""WGA (weighted gradient ascent): gradient ascent reweighted by each token's probability.

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(1/N) Σ_{counted tokens} w_t·(−log p_t)``,
``w_t = sg(p_t)^β``, ``p_t = π_θ(y_t|x, y_<t)``, ``sg`` = stop-gradient, N the number of
counted answer tokens in the whole forget batch (token-weighted over the flattened batch).
``NLL(D_r)`` is the Hugging Face causal-LM loss on the retain batch. Defaults β = 1,
γ = 1, α = 1 (``configs/trainer/WGA.yaml``).
Sources: Wang et al., "Rethinking LLM unlearning objectives: A gradient perspective and
go beyond" (ICLR 2025); reference: locuslab/open-unlearning ``src/trainer/unlearn/wga.py``
and ``src/trainer/utils.py`` (``compute_wga_loss``).

Search space: beta in [0.5, 2] (log; range ours around the paper's 1, which
open-unlearning's sweep keeps); alpha in [0.1, 10] (log), that sweep's {0.1, 1, 10}
(community/methods/WGA/run.sh). gamma is not tuned: under the suites' AdamW only alpha/gamma
matters, and alpha spans it.
"""


SEARCH_SPACE = {
    "beta": {"low": 0.5, "high": 2.0, "log": True},
    "alpha": {"low": 0.1, "high": 10.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, beta: float = 1.0, gamma: float = 1.0,
                    alpha: float = 1.0):
    """``gamma·mean_tok(sg(p)^beta·log p) + alpha·NLL(retain)``."""
    weight = forget.token_logprobs.detach().exp().pow(beta) * forget.mask
    forget_loss = (weight * forget.token_logprobs).sum() / forget.mask.sum().clamp(min=1)
    return gamma * forget_loss + alpha * _nll(retain)
