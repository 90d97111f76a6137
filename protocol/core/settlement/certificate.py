"""Whether a set of result signers makes a certificate the Results contract accepts
(docs/PROTOCOL.md §11.8).

When the validators that revealed and whose keys the round's aggregate holds (only they can
sign) hold at least 2/3 of the permitted stake, the signers among them must hold more than 2/3
of their stake: an absent validator cannot stop a round, and one that never revealed cannot
make up a certificate. Otherwise the signers must hold more than 2/3 of the permitted stake.
"""

from __future__ import annotations

from collections.abc import Collection

from protocol.core.settlement.result_inputs import RoundInputs


def certifies(inputs: RoundInputs, signers: Collection[str], keyed: Collection[str]) -> bool:
    """Whether signatures of `signers` suffice; `keyed`: the validators whose keys the round's
    aggregate holds (a signer outside it cannot have signed)."""
    weights = dict(zip(inputs.validators, inputs.weights, strict=True))
    total = sum(weights.values())
    able = {v for v in keyed if v in weights}
    revealed = sum(weights[v] for v in able if v in inputs.reveals)
    signed = {v for v in signers if v in able}
    if revealed > 0 and 3 * revealed >= 2 * total:
        return 3 * sum(weights[v] for v in signed if v in inputs.reveals) > 2 * revealed
    return 3 * sum(weights[v] for v in signed) > 2 * total
