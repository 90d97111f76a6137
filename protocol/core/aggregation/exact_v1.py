"""The exact-v1 aggregation rule: the same bits on every device and torch build (PROTOCOL.md §13).

The rule is float32-v1's (`protocol.core.aggregation.state`): decompress, clip each update to
`clip_multiplier` x the lower median norm per step x its steps, sparse trimmed mean, outer step. Here every value is
float64 and every operation is a correctly rounded IEEE +, -, *, / or sqrt applied elementwise
in a fixed order, so the result does not depend on threads, ISA or device:
  - decompression is exact up to one division: (2q - 3) * scale / 3 or q * scale / 127;
  - a sum over N is a fixed pairwise tree (`pairwise_sum`), a sum over G adds rows in rank order;
  - nothing fuses: a*b + c is two ops (an FMA rounds once and would change the bits);
  - a division by a constant divides by a tensor: CUDA turns `x / python_scalar` into
    x * (1 / scalar), which rounds twice.
θ and the momentum buffer are rounded to float32 once, at the end. `aggregate_reference`
reproduces this in numpy, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from protocol.core.train.compress import Compressed, scatter_chunks, unpack_codes
from protocol.core.train.compute_config import ComputeConfig

F64 = torch.float64


def _div(a: Tensor, b: float) -> Tensor:
    """a / b, correctly rounded on every device (b broadcast as a tensor, never a scalar)."""
    return a / torch.tensor(b, dtype=F64, device=a.device).expand_as(a)


def exact_values(c: Compressed, device: torch.device | str = "cpu") -> Tensor:
    """The kept values (C, k) float64: the product code x scale is exact, the division rounds once."""
    q = unpack_codes(c).to(device=device, dtype=F64)  # (C, k) small integers, exact
    scale = c.scale.to(device=device, dtype=F64).unsqueeze(1)  # (C, 1), exact widening
    if c.header.bits == 2:
        return _div((q * 2.0 - 3.0) * scale, 3.0)  # levels -3, -1, 1, 3 thirds of the scale
    return _div(q * scale, 127.0)


def decode_exact(updates: Sequence[Compressed], device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """Dense float64 values (G, N) and selection masks (G, N) on `device`."""
    pairs = [scatter_chunks(c, exact_values(c, device)) for c in updates]
    return torch.stack([d for d, _ in pairs]), torch.stack([m for _, m in pairs])


def pairwise_sum(x: Tensor) -> Tensor:
    """Sum over the last dim by a fixed tree: zero-pad to a power of two, add neighbours."""
    width = 1 << max(x.shape[-1] - 1, 0).bit_length()
    x = torch.nn.functional.pad(x, (0, width - x.shape[-1]))  # (..., 2^m), zeros add exactly
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]  # (..., width / 2)
    return x[..., 0]


def row_norms(dense: Tensor) -> Tensor:
    """The L2 norm of each row of (G, N), float64 on dense's device: a fixed pairwise sum of
    squares, then a square root by Python's `math.sqrt` (IEEE, correctly rounded). torch's CPU
    sqrt is not: measured 1 ulp off on x86 (sqrt(2.1238343394349503e-4)), which moved a clip cap
    and the state's norm per step away from CUDA's and the numpy reference's."""
    sums = pairwise_sum(dense * dense).cpu().tolist()  # G floats
    return torch.tensor([math.sqrt(v) for v in sums], dtype=F64, device=dense.device)


def lower_median(x: Tensor) -> Tensor:
    """The lower median of a (G,) vector: sorted[(G - 1) // 2] (a 0-dim tensor)."""
    return torch.sort(x).values[(x.shape[0] - 1) // 2]


def clip_exact(dense: Tensor, multiplier: float, weights: Sequence[int] | None = None) -> Tensor:
    """Scale rows of (G, N) down to multiplier x the lower median norm per weight x their weight
    (`relative_weights` of the steps trained; None: 1), so a long update is never clipped for
    being long. Equal weights give the unweighted rule's bits (x / 1 and x * 1 are exact)."""
    norms = row_norms(dense)  # (G,)
    w = _row_weights(weights, dense)  # (G,)
    cap = lower_median(norms / w) * multiplier * w  # (G,)
    over = norms > cap  # (G,), norm > cap >= 0, so the division below never sees 0
    scale = torch.where(over, cap / torch.where(over, norms, torch.ones_like(norms)), torch.ones_like(norms))
    return dense * scale.unsqueeze(1)  # (G, N)


def step_norm_exact(dense: Tensor, steps: Sequence[int]) -> float:
    """The lower median of the rows' norms per inner step: the reference the next round's
    over-norm test compares each update's norm per step with (carried in the global state)."""
    norms = row_norms(dense)  # (G,)
    return float(lower_median(norms / torch.tensor(list(steps), dtype=F64, device=dense.device)))


def _row_weights(weights: Sequence[int] | None, like: Tensor) -> Tensor:
    w = relative_weights(weights) if weights else [1] * like.shape[0]
    return torch.tensor(w, dtype=F64, device=like.device)  # (G,) exact small integers


def relative_weights(steps: Sequence[int]) -> list[int]:
    """Each update's aggregation weight: the steps it trained over the gcd of all of them, so
    equal work gives weight 1 and the unweighted rule's bits."""
    g = math.gcd(*steps)
    return [s // g for s in steps]


def trimmed_mean_exact(dense: Tensor, mask: Tensor, trim_fraction: float,
                       weights: Sequence[int] | None = None) -> Tensor:
    """Per-coordinate trimmed mean of (G, N) over the selecting rows, each kept value times its
    row's weight (`relative_weights` of the steps trained; None: 1), summed in rank order and
    divided by the kept weight. Trimming counts rows, whatever their weight."""
    filled = torch.where(mask, dense, torch.full_like(dense, float("inf")))  # (G, N)
    ordered, order = torch.sort(filled, dim=0, stable=True)  # unselected (inf) sink to the end
    row_w = _row_weights(weights, dense)[order]  # (G, N): the weight of the row at each rank, exact small integers
    count = mask.sum(dim=0)  # (N,) int64
    trim = torch.floor(count.to(F64) * trim_fraction).long()  # (N,)
    total = torch.zeros_like(dense[0])  # (N,)
    kept = torch.zeros_like(dense[0])  # (N,)
    for r in range(dense.shape[0]):  # one row at a time: a fixed order of additions
        keep = (trim <= r) & (r < count - trim)  # (N,)
        total = total + torch.where(keep, ordered[r] * row_w[r], torch.zeros_like(total))
        kept = kept + torch.where(keep, row_w[r], torch.zeros_like(kept))
    return total / kept.clamp_min(1.0)  # (N,)


def outer_step_exact(theta: Tensor, momentum: Tensor | None, delta: Tensor,
                     cfg: ComputeConfig) -> tuple[Tensor, Tensor | None]:
    """`aggregate.outer_step` on float64 (N,) vectors, each product and sum a separate op."""
    step = delta
    if cfg.outer_momentum > 0:
        prev = momentum if momentum is not None else torch.zeros_like(delta)
        momentum = prev * cfg.outer_momentum + delta  # u ← μu + Δ̄
        step = delta + momentum * cfg.outer_momentum if cfg.nesterov else momentum
    return theta - step * cfg.outer_lr, momentum


def exact_next(theta: Tensor, momentum: Tensor | None, updates: Sequence[Compressed],
               cfg: ComputeConfig, device: torch.device | str = "cpu",
               weights: Sequence[int] | None = None) -> tuple[Tensor, Tensor | None]:
    """The next flat θ (N,) and momentum (N,) float32 on CPU, from validated updates (G >= 1);
    `weights`: the inner steps each trained (None: equal)."""
    return next_from_decoded(theta, momentum, *decode_exact(updates, device), cfg, weights)


def next_from_decoded(theta: Tensor, momentum: Tensor | None, dense: Tensor, mask: Tensor, cfg: ComputeConfig,
                      weights: Sequence[int] | None = None) -> tuple[Tensor, Tensor | None]:
    """`exact_next` from `decode_exact`'s (G, N) values and masks, on their device (a caller that
    also needs the rows' norms decodes once)."""
    device = dense.device
    clipped = clip_exact(dense, cfg.clip_multiplier, weights)  # (G, N)
    delta = trimmed_mean_exact(clipped, mask, cfg.trim_fraction, weights)  # (N,)
    mom = momentum.to(device=device, dtype=F64) if momentum is not None else None
    theta64, mom = outer_step_exact(theta.to(device=device, dtype=F64), mom, delta, cfg)
    out_mom = mom.to(torch.float32).cpu() if mom is not None else None
    return theta64.to(torch.float32).cpu(), out_mom
