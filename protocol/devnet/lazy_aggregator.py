"""A validator that serves a wrong partial sum on every node of the aggregation tree it is drawn
for (devnet `--lazy-aggregators N`, tests): the cheapest lie, one coordinate's sum one unit off,
still a well-formed canonical blob. Its node's other server announces the right hash, so whoever
needs the node recomputes it and keeps the signed announcement as evidence
(validator/tree_aggregation.py); it otherwise checks, reveals and signs like an honest validator.
"""

from __future__ import annotations

import json
from typing import Any

import safetensors.torch

NAME = "lazy-aggregator"


def perturb_partial(blob: bytes) -> bytes:
    """The blob with its first selected coordinate's sum one unit up (run in the node's worker)."""
    tensors = safetensors.torch.load(blob)
    selected = (tensors["weights"] > 0).nonzero()
    at = int(selected[0, 0]) if selected.numel() else 0
    tensors["sums"][at] += 1
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
