"""Trust rows for the aggregation tree (docs/PROTOCOL.md §12.1, §13.9).

Each node of a round's tree has two servers drawn by stake from the validators that revealed (its
aggregator and its checker); a validator needing a node fetches it only when both signed the same
hash, else recomputes it and reports a server whose signed claim differs (`aggregate`, voted by
validators that recompute the node); every validator also audits `tree_audits` nodes it does not
serve, drawn by its own private randomness, and recomputes every node above one that differs.
- **A lone server signs a wrong partial sum.** Its co-server signs the right one, so every
  validator waiting for the node (the parent's two servers, everyone for the root) recomputes
  it: the wrong sum never enters θ_{r+1} and the signed claim is exact evidence. Blocked; it
  loses its slash S = stake · slash_bps (an `aggregate` report forfeits no dividend: it may
  resolve after the round's result).
- **A server withholds its partial sum.** The waiters recompute the node after their patience;
  silence is no evidence and aggregating is not paid yet, so it neither gains nor loses tokens.
- **A node's two servers collude** (a coalition of k of V validators at equal stakes holds both
  with P(capture) = k/V · (k − 1)/(V − 1)). The waiters see agreement and fetch the wrong sum; it
  is caught only when an honest validator audits that node: each of the V − k honest ones audits
  s = ⌈A · N / V⌉ nodes (A = `tree_audits`, N nodes) of the about N − 2N/V it does not serve, so
  with chance a = min(1, s / (N − 2N/V)), and p = 1 − (1 − a)^(V − k). A caught pair loses 2S; an uncaught one moves θ_{r+1} for
  a round, valued here at the round's whole emission E (everything the network pays for a round
  of training). Per node and round, expected profit = P(capture) · ((1 − p) · E − p · 2S).
- **A false `aggregate` report** is rejected by every voter that recomputes the node: its bond
  B = report_bond · (V − 1) burns.

Scales: the devnet of `veritrain devnet --miners 12 --validators 6 --fan-in 4` (12 leaves, N = 4
nodes) and a round at the contract bounds' scale, 16,384 leaves and 1,024 validators (N = 5,461).
"""

from __future__ import annotations

from fractions import Fraction

from benchmarks.trust import Params, Row, blocked, default_params
from protocol.config.run_config import ChainParams
from protocol.core.aggregation.tree import tree_nodes

SHARES = (Fraction(1, 10), Fraction(1, 5), Fraction(1, 3))
DEVNET = (6, 12, 4)  # validators, leaves, fan-in
BOUNDS = (1024, 16_384, 4)


def stake_slash(p: Params) -> Fraction:
    """S: what a confirmed `aggregate` report takes (stake only: no dividend is forfeited)."""
    return Fraction(p.validator_stake * p.slash_bps, 10_000)


def capture(validators: int, colluders: int) -> Fraction:
    """P(both servers of a node are colluders): the aggregator by stake, the checker the first
    draw of another validator (equal stakes)."""
    return Fraction(colluders, validators) * Fraction(max(colluders - 1, 0), validators - 1)


def caught(validators: int, colluders: int, nodes: int, audits: int) -> Fraction:
    """p: an honest validator audits the captured node (each picks ⌈A·N/V⌉ of the nodes it does
    not serve, about N − 2N/V of them; A = `audits`)."""
    others = max(Fraction(1), nodes - Fraction(2 * nodes, validators))
    chance = min(Fraction(1), -(-audits * nodes // validators) / others)
    # exact powers of large fractions grow thousands of digits: 1e-15 is precise enough
    return (1 - (1 - chance) ** (validators - colluders)).limit_denominator(10**15)


def collusion_row(p: Params, validators: int, leaves: int, fan_in: int, k: int, audits: int) -> Row:
    nodes = len(tree_nodes(leaves, fan_in))
    got, p_caught = capture(validators, k), caught(validators, k, nodes, audits)
    gain, slash = Fraction(p.emission), 2 * stake_slash(p)
    profit = got * ((1 - p_caught) * gain - p_caught * slash)
    need = next((s for s in range(audits, 65) if got * ((1 - caught(validators, k, nodes, s)) * gain
                                                         - caught(validators, k, nodes, s) * slash) < 0), None)
    return Row(f"aggregator and checker collude ({validators} validators, {leaves} leaves, fan-in {fan_in}, "
               f"coalition {k / validators:.0%})", "13.9 tree audits", "theft", p_caught, slash, gain, profit,
               "P(capture)*((1-p)*E - p*2S), p = 1-(1-s/(N-2N/V))^(V-k)",
               note=None if profit < 0 else f"not negative: tree_audits {need} makes it negative")


def aggregation_rows(p: Params | None = None, audits: int | None = None) -> list[Row]:
    p = p or default_params()
    s = ChainParams().tree_audits if audits is None else audits
    lone = blocked("lone aggregator signs a wrong partial sum", "13.9 two servers", stake_slash(p))
    withhold = Row("aggregator withholds its partial sum", "13.9 recomputed after patience", "saving",
                   Fraction(0), Fraction(0), Fraction(0), Fraction(0), "aggregating is unpaid: nothing to gain or lose",
                   note="waiters recompute the node; pay by nodes served is not built yet")
    false = blocked("false aggregate report", "12.3 voters recompute", Fraction(p.report_bond * (DEVNET[0] - 1)))
    pairs = [collusion_row(p, *DEVNET, 2, s)] + [collusion_row(p, *BOUNDS, round(a * BOUNDS[0]), s) for a in SHARES]
    return [lone, withhold, false, *pairs]
