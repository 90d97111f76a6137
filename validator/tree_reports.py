"""`aggregate` reports (docs/PROTOCOL.md §12, §13.9): a validator that signed a wrong partial sum
for a node of the aggregation tree it serves is reported with its own signed claim, and voters
decide by recomputing the node.

The report names the accused, the node's position in the tree (bottom level first) as its
`segment`, the claimed hash as its `evidence_hash` and the accused's claim signature as its
`challenge_sig`. Every voter rebuilds the round's tree from chain data and confirms only if the
signature is the accused's node key's claim of that hash and the claim is the accused's own fault
(`TreeAggregation.faulty`): for one of the node's two drawn servers, neither the node's right sum
nor the sum of its children as their servers agreed on them, so a colluding pair below cannot frame
the honest servers above it that summed its agreed wrong node; for anyone else (a dissent, which
claims to have recomputed the node), not the right sum. Anything else is
rejected (the reporter's bond burns); a reporter files only what it would confirm. Reports are filed in the round's aggregate phase, from its audit deadline for
`result_duration` seconds, and never hold up its result: the slash changes no payout of it.
"""

from __future__ import annotations

from typing import Any

from protocol.chain.client import Vote
from protocol.core.errors import SignatureError
from protocol.core.settlement.fraud import FraudKind
from protocol.core.wire.partial_claim import verify_partial
from validator.tree_aggregation import TreeAggregation


async def file_wrong_partials(node: Any, tree: TreeAggregation, r: int) -> None:
    """File one `aggregate` report per server caught in round `r` (one report per accused and
    reporter a round; a second wrong node of the same server adds nothing)."""
    filed: set[str] = set()
    t = tree.trees.get(r)
    for wrong in list(tree.wrong.values()):
        if wrong.round != r or wrong.validator in filed or t is None or not await tree.faulty(
                t, wrong.node, wrong.announced, server=wrong.validator in t.servers[wrong.node]):
            continue
        filed.add(wrong.validator)
        accused = next(v for v in (await node.port(node.history.inputs, r)).validators if v.lower() == wrong.validator)
        await node._file(r, accused, FraudKind.AGGREGATE, wrong.position, wrong.announced, wrong.claim_sig)


async def judge_aggregate(tree: TreeAggregation, rep: dict, sig: bytes) -> tuple[Vote, str]:
    """A voter's verdict on an `aggregate` report: confirm only a signed wrong claim of a node the
    accused serves."""
    r, accused, claimed = rep["round"], rep["miner"].lower(), bytes(rep["evidence_hash"])
    t = await tree.tree_for(r)
    if t is None:
        return Vote.REJECT, "the round was summed flat"
    key = t.at(rep["segment"])
    if key is None:
        return Vote.REJECT, f"the tree has no node {rep['segment']}"
    node_key = tree.ctx.node_key_of(rep["miner"])
    try:
        if node_key is None:
            raise SignatureError("the accused has no node key")
        verify_partial(node_key, sig, *tree.deployment(), r, key[0], key[1], claimed)
    except SignatureError as exc:
        return Vote.REJECT, f"not the accused's claim: {exc}"
    if await tree.faulty(t, key, claimed, server=accused in t.servers[key]):
        return Vote.CONFIRM, "the node recomputes to another sum, nor is it its agreed children's"
    return Vote.REJECT, "the claim is right, or the sum of what its children's servers agreed on"
