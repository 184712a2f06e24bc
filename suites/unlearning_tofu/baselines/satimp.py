"""SatImp: gradient ascent reweighted by saturation and importance of each token.

``L = γ·L_f + α·NLL(D_r)``, ``L_f = −(1/N) Σ_{counted tokens} w_t·(−log p_t)``,
``w_t = sg(p_t)^{β1}·sg(1 − p_t)^{β2}``, ``p_t = π_θ(y_t|x, y_<t)``, ``sg`` = stop-gradient
(the weights are detached), N the number of counted answer tokens in the whole forget
batch (a token-weighted mean over the flattened batch). ``NLL(D_r)`` is the Hugging Face
causal-LM loss on the retain batch. Defaults β1 = 5, β2 = 1, **γ = 0.1, α = 1**: those of
``configs/trainer/SatImp.yaml``, which override the class defaults (γ = 1, α = 0.1).
Sources: Yang et al., "Exploring criteria of loss reweighting to enhance LLM unlearning"
(ICML 2025); reference: locuslab/open-unlearning ``src/trainer/unlearn/satimp.py`` and
``src/trainer/utils.py`` (``compute_satimp_loss``).

Search space: beta1 in [5, 6], open-unlearning's SatImp sweep {5, 6}
(community/methods/SatImp/run.sh); beta2 in [0.5, 2] (log; ours, the sweep keeps 1); alpha
in [0.01, 1] (log), the sweep's {0.01, 0.1, 1} with gamma = 0.1. gamma is not tuned: under
the suites' AdamW only alpha/gamma matters, and alpha spans it.
"""


SEARCH_SPACE = {
    "beta1": {"low": 5.0, "high": 6.0},
    "beta2": {"low": 0.5, "high": 2.0, "log": True},
    "alpha": {"low": 0.01, "high": 1.0, "log": True},
    "gamma": {"fixed": "the forget term's weight: under AdamW only its ratio to the retain weight "
                       "matters, and that ratio is tuned"},
}


def _nll(batch):
    return -batch.token_logprobs.sum() / batch.mask.sum().clamp(min=1)


def unlearning_loss(forget, retain, *, beta1: float = 5.0, beta2: float = 1.0,
                    gamma: float = 0.1, alpha: float = 1.0):
    """``gamma·mean_tok(sg(p)^beta1·sg(1 − p)^beta2·log p) + alpha·NLL(retain)``."""
    p = forget.token_logprobs.detach().exp()
    weight = p.pow(beta1) * (1 - p).clamp(min=0).pow(beta2) * forget.mask
    forget_loss = (weight * forget.token_logprobs).sum() / forget.mask.sum().clamp(min=1)
    return gamma * forget_loss + alpha * _nll(retain)
