"""Interval bound propagation (IBP) and CROWN for small ``nn.Sequential`` classifiers.

Certified L∞ robustness asks for lower bounds on the margins ``z_y(x') − z_j(x')`` over the box
``B(x) = {x' : ‖x' − x‖∞ ≤ ε} ∩ [x_min, x_max]``. A margin lower bound > 0 for every j ≠ y
proves that no x' in the box changes the prediction (README.md in this folder).

Supported layers: ``nn.Linear``, ``nn.Conv2d`` (zero padding), ``nn.BatchNorm1d/2d`` (eval mode:
running statistics, i.e. an affine map), ``nn.Flatten`` and ``nn.ReLU``, in an ``nn.Sequential``
(nested ones are flattened). Everything is functional: a function takes the model for its
*structure* only and a ``params`` mapping for ONE model in the naming of
``dict(model.named_parameters()) | dict(model.named_buffers())``; a missing key falls back to the
module's own tensor, as ``torch.func.functional_call`` does. No ``.item()``, no Python branching
on tensor values and no in-place ops, so every function runs under ``torch.func.vmap`` over
stacked members (params with a leading member dim) and is differentiable in the parameters
(IBP / CROWN-IBP training backpropagates through the bounds).

API: ``input_box``, ``interval_bounds`` (IBP, every layer), ``preactivation_bounds`` (ReLU
inputs by IBP or CROWN), ``spec_matrix``, ``ibp_margins``, ``crown_margins`` (CROWN-IBP or full
CROWN), ``worst_case_logits``, ``verified``, ``batch_statistics`` (train-mode BatchNorm).

Bounds are sound in exact arithmetic; in floating point they can be off by rounding (~1e-6
relative in float32), which matters only for margins within rounding of 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Params = Mapping[str, Tensor]
Box = tuple[Tensor, Tensor]
_AFFINE = (nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d)


# ----------------------------------------------------------------------------- input and spec

def input_box(x: Tensor, eps: float | Tensor, x_min: float | Tensor = 0.0,
              x_max: float | Tensor = 1.0) -> Box:
    """``(lower, upper)`` of the L∞ ball of radius ``eps`` around ``x`` clipped to the range.

    ``eps``, ``x_min`` and ``x_max`` are floats or per-channel tensors ``[C]`` (broadcast along
    dim 1 of ``x`` ``[B, C, ...]``). For normalised inputs ``(x − μ_c)/σ_c`` pass ``eps/σ`` and
    the normalised image of [0, 1]: ``x_min = −μ/σ``, ``x_max = (1 − μ)/σ``.
    """
    eps, lo, hi = (_per_channel(v, x) for v in (eps, x_min, x_max))
    return torch.maximum(x - eps, lo), torch.minimum(x + eps, hi)


def spec_matrix(targets: Tensor, num_classes: int, dtype: torch.dtype | None = None) -> Tensor:
    """``C [B, K, K]``, rows ``e_y − e_j``: ``C z`` are the margins ``z_y − z_j``; row y is 0."""
    classes = torch.arange(num_classes, device=targets.device)
    onehot = (targets.unsqueeze(-1) == classes).to(dtype or torch.get_default_dtype())
    return onehot.unsqueeze(-2) - torch.eye(num_classes, dtype=onehot.dtype, device=targets.device)


def worst_case_logits(margins: Tensor) -> Tensor:
    """``−margins``: logits in which every wrong class reaches its worst case relative to y.

    ``CE(worst_case_logits(m), y) = log(1 + Σ_{j≠y} exp(−m_j))`` is the robust loss of IBP and
    CROWN-IBP training (entry y is 0, so this equals padding a 0 in front and using label 0).
    """
    return -margins


def verified(margins: Tensor) -> Tensor:
    """``bool [B]``: every margin lower bound for j ≠ y is > 0.

    The bound at j = y is exactly 0 (its spec row is 0), so "all others > 0" is "K − 1 of the
    K entries are > 0"; no targets are needed.
    """
    return (margins > 0).sum(-1) == margins.shape[-1] - 1


# ----------------------------------------------------------------------------- IBP

def interval_bounds(model: nn.Module, params: Params, lower: Tensor, upper: Tensor) -> list[Box]:
    """Interval bounds ``(l, u)`` after every layer of ``model`` (the last pair bounds the logits).

    Affine layers map the centre and the radius: ``μ' = Wμ + b``, ``r' = |W| r`` (the image of a
    box under an affine map is exactly bounded by this per coordinate); ReLU is monotone, so
    ``[relu(l), relu(u)]``. Interactions between coordinates are lost, hence the looseness.
    """
    out, box = [], (lower, upper)
    for name, layer in _layers(model):
        box = _ibp_layer(layer, _weights(layer, name, params), box)
        out.append(box)
    return out


def ibp_margins(model: nn.Module, params: Params, x: Tensor, eps: float | Tensor,
                targets: Tensor, *, x_min: float | Tensor = 0.0,
                x_max: float | Tensor = 1.0) -> Tensor:
    """``[B, K]`` IBP lower bounds on ``z_y − z_j`` over the box (exactly 0 at j = y).

    The specification C is folded into the affine layers after the last ReLU ("elision",
    Gowal et al. 2018): the margin ``(C W) h + C b`` is bounded from the interval of h. This is
    tighter than subtracting logit intervals (``l_y − u_j``), which counts the shared term
    ``(W_y − W_j) h`` twice with opposite worst cases; it is never looser.
    """
    layers = _layers(model)
    lower, upper = input_box(x, eps, x_min, x_max)
    tail = _tail_start(layers)
    box = (lower, upper)
    for name, layer in layers[:tail]:
        box = _ibp_layer(layer, _weights(layer, name, params), box)
    if len(layers) - tail == 1 and isinstance(layers[tail][1], nn.Linear):
        return _linear_margins(_weights(layers[tail][1], layers[tail][0], params), box, targets)
    shapes = _shapes(layers[tail:], box[0])
    a, c = _backward(layers[tail:], params, _spec(targets, shapes, x), {}, shapes)
    return c + _concretize(a, *box)


def _linear_margins(w: Mapping, box: Box, targets: Tensor) -> Tensor:
    """IBP margins through one final Linear without building ``C W`` per input: the centre
    term is ``C (W μ + b)`` and the radius term gathers row y of ``r · |W_y − W_j|`` computed
    for all K² class pairs (two GEMMs instead of [B, K, n] temporaries)."""
    mid, rad = (box[1] + box[0]) / 2, (box[1] - box[0]) / 2
    z = F.linear(mid, w["weight"], w["bias"])
    k = z.shape[-1]
    pairs = (w["weight"].unsqueeze(1) - w["weight"].unsqueeze(0)).abs().reshape(k * k, -1)
    spread = F.linear(rad, pairs).reshape(-1, k, k)
    index = targets.reshape(-1, 1, 1).expand(-1, 1, k)
    return z.gather(-1, targets.unsqueeze(-1)) - z - spread.gather(1, index).squeeze(1)


# ----------------------------------------------------------------------------- CROWN

def preactivation_bounds(model: nn.Module, params: Params, lower: Tensor, upper: Tensor, *,
                         method: str = "ibp") -> list[Box]:
    """Bounds on the input of every ReLU, in order, by ``"ibp"`` or by ``"crown"``.

    With ``"crown"``, layer k's bounds come from a backward pass of the identity spec
    ``[I; −I]`` through the layers before it, relaxing earlier ReLUs with the bounds already
    found (layer by layer, as CROWN does). Memory: ``[B, 2n, *input shape]`` for a layer of n
    neurons (chunk the batch for convolutional layers); the first layer, an affine image of the
    box, is bounded exactly by IBP instead.
    """
    layers = _layers(model)
    relus = [i for i, (_, layer) in enumerate(layers) if isinstance(layer, nn.ReLU)]
    if method == "ibp":
        boxes = [(lower, upper), *interval_bounds(model, params, lower, upper)]
        return [boxes[i] for i in relus]
    if method != "crown":
        raise ValueError(f"method must be 'ibp' or 'crown', got {method!r}")
    shapes = _shapes(layers, lower)
    pre: dict[int, Box] = {}
    for i in relus:
        if sum(isinstance(layer, (nn.Linear, nn.Conv2d, nn.ReLU)) for _, layer in layers[:i]) < 2:
            # one Linear/Conv at most (BatchNorm and Flatten are diagonal/reshapes): IBP is exact
            box = (lower, upper)
            for name, layer in layers[:i]:
                box = _ibp_layer(layer, _weights(layer, name, params), box)
            pre[i] = box
            continue
        n = _numel(shapes[i])
        eye = torch.eye(n, dtype=lower.dtype, device=lower.device)
        spec = torch.cat([eye, -eye]).reshape(1, 2 * n, *shapes[i])  # same for every input
        a, c = _backward(layers[:i], params, spec, pre, shapes)
        bound = (c + _concretize(a, lower, upper)).reshape(len(lower), 2, *shapes[i])
        pre[i] = (bound[:, 0], -bound[:, 1])
    return [pre[i] for i in relus]


def crown_margins(model: nn.Module, params: Params, x: Tensor, eps: float | Tensor,
                  targets: Tensor, *, intermediate: str = "crown", x_min: float | Tensor = 0.0,
                  x_max: float | Tensor = 1.0) -> Tensor:
    """``[B, K]`` CROWN lower bounds on ``z_y − z_j`` over the box (exactly 0 at j = y).

    Backward linear relaxation (Zhang et al. 2018): starting from ``Λ = C``, each layer is
    substituted backwards. Affine layers are exact; a ReLU with pre-activation bounds [l, u] is
    replaced by a line that lies below it (for coefficients ≥ 0) or above it (< 0):
    stable neurons exactly (slope 1 or 0); unstable ones (l < 0 < u) by the upper chord through
    (l, 0) and (u, u), slope ``u/(u − l)``, intercept ``−lu/(u − l)``, and the lower line ``α z``
    with the adaptive ``α = 1 if u ≥ −l else 0`` (CROWN's default: the one of the two with the
    smaller area). The result ``Λ x' + c`` is a valid lower bound for every x' in the box, and
    its minimum over the box is exact: per coefficient take the lower corner if ≥ 0, else the
    upper.

    ``intermediate="crown"`` bounds every ReLU input by CROWN too (full CROWN: tighter, one
    backward pass per ReLU layer with 2·width rows); ``"ibp"`` takes them from IBP and runs
    CROWN only for the margins (CROWN-IBP, Zhang et al. 2020: about the cost of two IBP passes).
    Neither is guaranteed to beat IBP elementwise (a relaxed ReLU with slope 1 can lose what
    IBP's ``relu(l) = 0`` keeps), though on the random and trained MLPs of the tests it does;
    a verifier should take the per-sample best of IBP and CROWN.
    """
    lower, upper = input_box(x, eps, x_min, x_max)
    layers = _layers(model)
    relus = [i for i, (_, layer) in enumerate(layers) if isinstance(layer, nn.ReLU)]
    pre = dict(zip(relus, preactivation_bounds(model, params, lower, upper,
                                               method=intermediate), strict=True))
    shapes = _shapes(layers, lower)
    a, c = _backward(layers, params, _spec(targets, shapes, x), pre, shapes)
    return c + _concretize(a, lower, upper)


def batch_statistics(model: nn.Module, params: Params, x: Tensor) -> dict[str, Tensor]:
    """BatchNorm ``running_mean``/``running_var`` entries holding the statistics of batch ``x``.

    Training with BatchNorm in train mode (fast certified training) normalises with the clean
    batch's statistics; bounding that network is bounding the eval-mode network with these
    statistics: ``bounds(model, {**params, **batch_statistics(model, params, x)}, ...)``.
    """
    stats = {}
    for name, layer in _layers(model):
        w = _weights(layer, name, params)
        if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            dims = [d for d in range(x.dim()) if d != 1]
            w["mean"], w["var"] = x.mean(dims), x.var(dims, unbiased=False)
            stats[f"{name}.running_mean"], stats[f"{name}.running_var"] = w["mean"], w["var"]
        x = _ibp_layer(layer, w, (x, x))[0]
    return stats


# ----------------------------------------------------------------------------- internals

def _layers(model: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """``(parameter prefix, layer)`` of a (nested) Sequential, checked against the supported set."""
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"bounds need an nn.Sequential, got {type(model).__name__}")
    out = []
    for name, layer in model.named_children():
        full = f"{prefix}{name}"
        if isinstance(layer, nn.Sequential):
            out += _layers(layer, full + ".")
        elif isinstance(layer, nn.Conv2d) and (isinstance(layer.padding, str)
                                               or layer.padding_mode != "zeros"):
            raise NotImplementedError("Conv2d bounds need numeric zero padding")
        elif isinstance(layer, nn.Flatten) and layer.start_dim == 0:
            raise NotImplementedError("Flatten must keep the batch dimension")
        elif isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)) and layer.running_mean is None:
            raise NotImplementedError("BatchNorm bounds need running statistics")
        elif not isinstance(layer, (*_AFFINE, nn.Flatten, nn.ReLU)):
            raise NotImplementedError(f"no bounds for {type(layer).__name__}")
        out.append((full, layer))
    return out


def _weights(layer: nn.Module, name: str, params: Params) -> dict[str, Tensor | None]:
    """The tensors of one layer: ``weight``/``bias``, or a BatchNorm's mean/var/scale/shift."""
    def get(key):
        return params.get(f"{name}.{key}", getattr(layer, key, None))

    if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
        return {"weight": get("weight"), "bias": get("bias"), "mean": get("running_mean"),
                "var": get("running_var"), "eps": layer.eps}
    return {"weight": get("weight"), "bias": get("bias")}


def _bn_affine(w: Mapping, ndim: int) -> tuple[Tensor, Tensor]:
    """Eval-mode BatchNorm as ``scale·x + shift`` per channel, shaped to broadcast on [C, ...]."""
    scale = torch.rsqrt(w["var"] + w["eps"])
    if w["weight"] is not None:
        scale = scale * w["weight"]
    shift = -w["mean"] * scale
    if w["bias"] is not None:
        shift = shift + w["bias"]
    view = (-1, *[1] * (ndim - 2))
    return scale.reshape(view), shift.reshape(view)


def _ibp_layer(layer: nn.Module, w: Mapping, box: Box) -> Box:
    lower, upper = box
    if isinstance(layer, nn.ReLU):
        return lower.clamp(min=0), upper.clamp(min=0)
    if isinstance(layer, nn.Flatten):
        return layer(lower), layer(upper)
    mid, rad = (upper + lower) / 2, (upper - lower) / 2
    if isinstance(layer, nn.Linear):
        mid, rad = F.linear(mid, w["weight"], w["bias"]), F.linear(rad, w["weight"].abs())
    elif isinstance(layer, nn.Conv2d):
        conv = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation,
                    groups=layer.groups)
        mid = F.conv2d(mid, w["weight"], w["bias"], **conv)
        rad = F.conv2d(rad, w["weight"].abs(), None, **conv)
    else:
        scale, shift = _bn_affine(w, mid.dim())
        mid, rad = mid * scale + shift, rad * scale.abs()
    return mid - rad, mid + rad


def _shapes(layers: list, x: Tensor) -> list[tuple[int, ...]]:
    """Per-sample input shape of every layer, then the output shape (meta tensors: no compute)."""
    shapes = [tuple(x.shape[1:])]
    probe = torch.empty(1, *shapes[0], device="meta")
    for _, layer in layers:
        if isinstance(layer, nn.Linear):
            probe = probe.new_empty(1, layer.out_features)
        elif isinstance(layer, nn.Flatten):
            probe = layer(probe)
        elif isinstance(layer, nn.Conv2d):
            weight = torch.empty(layer.weight.shape, device="meta")
            probe = F.conv2d(probe, weight, None, layer.stride, layer.padding, layer.dilation,
                             layer.groups)
        shapes.append(tuple(probe.shape[1:]))
    return shapes


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _tail_start(layers: list) -> int:
    """Index of the first layer after the last ReLU (0 if there is none)."""
    relus = [i for i, (_, layer) in enumerate(layers) if isinstance(layer, nn.ReLU)]
    return relus[-1] + 1 if relus else 0


def _spec(targets: Tensor, shapes: list, like: Tensor) -> Tensor:
    """The margin spec for a network whose output has ``shapes[-1]`` (K logits)."""
    return spec_matrix(targets, _numel(shapes[-1]), like.dtype).to(like.device)


def _concretize(a: Tensor, lower: Tensor, upper: Tensor) -> Tensor:
    """``min_{lower ≤ x ≤ upper} a·x`` per row, attained at the lower corner where a ≥ 0 and the
    upper one where a < 0: ``a·mid − |a|·rad`` with the box's centre and radius."""
    mid, rad = ((upper + lower) / 2).flatten(1), ((upper - lower) / 2).flatten(1)
    a = a.flatten(2).expand(len(mid), -1, -1)
    return torch.einsum("bkn,bn->bk", a, mid) - torch.einsum("bkn,bn->bk", a.abs(), rad)


def _relu_relaxation(lower: Tensor, upper: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(lower slope, upper slope, upper intercept)`` of the adaptive CROWN ReLU relaxation."""
    active, unstable = lower >= 0, (lower < 0) & (upper > 0)
    width = torch.where(unstable, upper - lower, torch.ones_like(upper))  # no 0/0 in gradients
    chord = upper / width
    zero, one = torch.zeros_like(upper), torch.ones_like(upper)
    up_slope = torch.where(unstable, chord, torch.where(active, one, zero))
    up_icpt = torch.where(unstable, -lower * chord, zero)
    low_slope = torch.where(unstable, (upper >= -lower).to(upper.dtype), up_slope)
    return low_slope, up_slope, up_icpt


FUSE_RELU_LINEAR = True  # off: the two-step substitution (bench/bounds.py and a test compare)


def _backward(layers: list, params: Params, a: Tensor, pre: Mapping[int, Box],
              shapes: list) -> tuple[Tensor, Tensor]:
    """Substitute ``a · out`` ([B, K, *out shape]) back through ``layers`` to ``a' · in + c``.

    ``pre[i]`` are the input bounds of the ReLU at index i. ``a`` may have a batch of 1 (an
    input-independent spec): it stays so through affine layers, so their cost is paid once.
    Conv2d is transposed with ``conv_transpose2d`` (``output_padding`` recovers input sizes
    that strided convolutions round away), so ``a`` stays dense but no unfolded matrix is built.
    """
    c = a.new_zeros(a.shape[:2])
    i = len(layers) - 1
    while i >= 0:
        name, layer = layers[i]
        w = _weights(layer, name, params)
        if FUSE_RELU_LINEAR and isinstance(layer, nn.ReLU) and len(a) == 1 and i > 0 \
                and isinstance(layers[i - 1][1], nn.Linear):
            a, c = _relu_linear(a, c, pre[i], _weights(layers[i - 1][1], layers[i - 1][0], params))
            i -= 2
            continue
        if isinstance(layer, nn.ReLU):
            low_slope, up_slope, up_icpt = _relu_relaxation(*pre[i])
            a = a.expand(len(up_icpt), *a.shape[1:])  # a batch of 1 up to the first ReLU
            pos, neg = a.clamp(min=0), a.clamp(max=0)
            c = c + torch.einsum("bkn,bn->bk", neg.flatten(2), up_icpt.flatten(1))
            a = pos * low_slope.unsqueeze(1) + neg * up_slope.unsqueeze(1)
        elif isinstance(layer, nn.Flatten):
            a = a.reshape(*a.shape[:2], *shapes[i])
        elif isinstance(layer, nn.Linear):
            if w["bias"] is not None:
                c = c + a @ w["bias"]
            a = a @ w["weight"]
        elif isinstance(layer, nn.Conv2d):
            if w["bias"] is not None:
                c = c + torch.einsum("bkchw,c->bk", a, w["bias"])
            b, k, *out = a.shape
            size = shapes[i][1:]
            extra = [size[d] - ((out[d + 1] - 1) * layer.stride[d] - 2 * layer.padding[d]
                                + layer.dilation[d] * (layer.kernel_size[d] - 1) + 1)
                     for d in range(2)]
            a = F.conv_transpose2d(a.reshape(b * k, *out), w["weight"], None, layer.stride,
                                   layer.padding, tuple(extra), layer.groups, layer.dilation)
            a = a.reshape(b, k, *a.shape[1:])
        else:
            scale, shift = _bn_affine(w, a.dim() - 1)
            c = c + (a * shift).flatten(2).sum(-1)
            a = a * scale
        i -= 1
    return a, c


def _relu_linear(a: Tensor, c: Tensor, box: Box, w: Mapping) -> tuple[Tensor, Tensor]:
    """A ReLU and the Linear before it, substituted at once for an input-independent ``a``
    ([1, K, n]): ``(a⁺ diag(low) + a⁻ diag(up)) W = [a⁺ a⁻] · [low ⊙ W; up ⊙ W]``.

    The per-input rows scale W ([B, n, m]) rather than ``a`` ([B, K, n]), so the [B, K, n]
    coefficients of the two-step path are never built: for intermediate bounds (K = 2n rows)
    that tensor is the pass's largest and its elementwise work the bulk of its time.
    """
    low_slope, up_slope, up_icpt = (t.flatten(1) for t in _relu_relaxation(*box))
    a = a.flatten(2)[0]
    stacked = torch.cat([a.clamp(min=0), a.clamp(max=0)], dim=1)  # [K, 2n]
    slopes = torch.cat([low_slope, up_slope], dim=1)  # [B, 2n]
    c = c + up_icpt @ a.clamp(max=0).T
    if w["bias"] is not None:
        c = c + (slopes * w["bias"].repeat(2)) @ stacked.T
    # one [B·m, 2n] × [2n, K] GEMM: a broadcast [K, 2n] @ [B, 2n, m] would copy a per input
    weight_t = w["weight"].T.repeat(1, 2)  # [m, 2n]
    scaled_t = slopes.unsqueeze(1) * weight_t.unsqueeze(0)  # [B, m, 2n]
    out = (scaled_t.flatten(0, 1) @ stacked.T).reshape(len(slopes), -1, len(stacked))
    return out.transpose(1, 2), c


def _per_channel(value: float | Tensor, x: Tensor) -> Tensor:
    value = torch.as_tensor(value, dtype=x.dtype, device=x.device)
    if value.dim() == 1 and x.dim() > 2:
        value = value.reshape(-1, *[1] * (x.dim() - 2))
    return value
