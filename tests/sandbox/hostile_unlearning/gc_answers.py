"""An unlearning_loss that walks its process's heap for what only the judge holds: the
retain model's parameters (float tensors of the embedding's shape) and the evaluation
answers (strings or token arrays of the perturbed and paraphrased answers).

Expected: with the guard, walking the heap is refused and ends the server
(``killed``/``violation``); without it (kernel layers only), the loss server was sent one
member's batches and nothing else, so it finds no parameter-shaped tensor and no answer
text, and unlearns like gradient ascent (``ok``).
"""

import gc

import torch

params = sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor)
             and o.ndim == 2 and o.shape[1] == 64 and o.shape[0] > 500)
texts = sum(1 for o in gc.get_objects() if isinstance(o, str)  # a rendered answer, not the
            and " was born in the city of " in o and "{" not in o)  # template of the code
print(f"heap walked: parameter_like={params} answer_texts={texts}", flush=True)


def unlearning_loss(forget, retain):
    return forget.seq_logprobs.mean()
