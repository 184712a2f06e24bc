"""IdkNLL (TOFU's "idk"): fine-tune on "I don't know" answers to the forget questions.

``L = NLL(B_idk ∪ B_r)``: the Hugging Face causal-LM loss of ONE batch concatenating the
forget questions relabelled with an "I don't know"-style answer and the retain batch,
i.e. ``−(Σ_{idk tokens} log π_θ + Σ_{retain tokens} log π_θ) / (#idk tokens + #retain
tokens)``, a token-weighted mean over both (not the mean of the two batch means). The
original forget answers are not used. No hyperparameters (no weights in the reference).
Sources: Maini et al., "TOFU: A task of fictitious unlearning for LLMs" (COLM 2024);
reference: locuslab/tofu ``dataloader.py`` (``CustomTrainerForgetting.compute_loss``,
``loss_type == "idk"``: ``torch.cat`` of the idk and retain inputs, then
``outputs.loss``); open-unlearning's ``data/idk.jsonl`` answers.
"""


def unlearning_loss(forget, retain, *, idk):
    """Mean NLL over the counted tokens of the idk batch and the retain batch together."""
    total = idk.token_logprobs.sum() + retain.token_logprobs.sum()
    count = idk.mask.sum() + retain.mask.sum()
    return -total / count.clamp(min=1)
