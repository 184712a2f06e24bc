"""Gradient ascent (GA): maximise the forget set's language-modelling loss.

``L = −NLL(D_f)``, with ``NLL`` the Hugging Face causal-LM loss: the mean of
``−log π_θ(y_t | x, y_<t)`` over every counted (answer and end) token of the batch,
token-weighted across sequences. No hyperparameters (no retain term, no weight).
Sources: Jang et al., "Knowledge unlearning for mitigating privacy risks in language
models" (ACL 2023); Maini et al., TOFU (COLM 2024); reference: locuslab/open-unlearning
``src/trainer/unlearn/grad_ascent.py`` (``loss = -outputs.loss``),
``configs/trainer/GradAscent.yaml``.
"""


def unlearning_loss(forget, retain):
    """``Σ_{b,t} log π_θ(y_bt) / #tokens`` on the forget batch: minus its mean NLL."""
    return forget.token_logprobs.sum() / forget.mask.sum().clamp(min=1)
