"""A validator that serves a wrong partial sum on every node of the aggregation tree it is drawn
for (devnet `--lazy-aggregators N`, tests): one coordinate's sum shifted by 2^36 (64 in the sum's
units: enough to move that coordinate of θ_{r+1}; one unit would vanish in its float32 rounding),
still a well-formed canonical blob, and the same lie from every lazy aggregator, so two of them
serving one node agree on it. Its node's other server announces the right hash, so whoever
needs the node recomputes it and keeps the signed announcement as evidence
(validator/tree_aggregation.py); it otherwise checks, reveals and signs like an honest validator.
"""

from __future__ import annotations

import json
from typing import Any

import safetensors.torch

NAME = "lazy-aggregator"
SHIFT = 1 << 36  # within int64 at any partial sum the run config admits (|sum| < 2^63 - 2^36)


def perturb_partial(blob: bytes) -> bytes:
    """The blob with its first selected coordinate's sum 2^36 up (run in the node's worker)."""
    tensors = safetensors.torch.load(blob)
    selected = (tensors["weights"] > 0).nonzero()
    at = int(selected[0, 0]) if selected.numel() else 0
    tensors["sums"][at] += SHIFT
    return safetensors.torch.save(tensors, metadata=_metadata(blob))


def _metadata(blob: bytes) -> dict[str, str]:
    """A safetensors blob's metadata map: `__metadata__` of its length-prefixed JSON header."""
    length = int.from_bytes(blob[:8], "little")
    return dict(json.loads(blob[8 : 8 + length]).get("__metadata__", {}))


def tamper_of(node: Any) -> Any:
    """The `tamper` hook of `node`'s tree: perturb each partial sum it serves, in its worker."""
    async def tamper(blob: bytes) -> bytes:
        return await node._work(perturb_partial, blob)  # type: ignore[no-any-return]
    return tamper
