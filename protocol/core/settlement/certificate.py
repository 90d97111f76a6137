"""Whether a set of result signers makes a certificate the Results contract accepts
(docs/PROTOCOL.md §11.4).

With the round's quorum (at least 2/3 of the permitted stake revealed) the signers that revealed
must hold more than 2/3 of the revealed stake: an absent validator cannot stop a round, and one
that never revealed cannot make up a certificate. Without it, the signers must hold more than
2/3 of the permitted stake.
"""

from __future__ import annotations

from collections.abc import Collection

from protocol.core.settlement.result import has_quorum
from protocol.core.settlement.result_inputs import RoundInputs


def certifies(inputs: RoundInputs, signers: Collection[str]) -> bool:
    """Whether signatures of `signers` (validators whose keys the round's aggregate holds) suffice."""
    weights = dict(zip(inputs.validators, inputs.weights, strict=True))
    total = sum(weights.values())
    revealed = sum(w for v, w in weights.items() if v in inputs.reveals)
    if has_quorum(revealed, total):
        return 3 * sum(weights[v] for v in signers if v in inputs.reveals) > 2 * revealed
    return 3 * sum(weights[v] for v in signers if v in weights) > 2 * total
