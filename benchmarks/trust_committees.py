"""Trust rows for check committees and score audits (docs/PROTOCOL.md §10.8, §15.3, §15.4a).

- **A captured committee.** A coalition holding share α of the validator stake takes a majority
  of a miner's committee of c seats with exactly P(Bin(c, α) > c/2) (`committee_odds.p_majority`;
  `benchmarks.committees` checks it against the real draw, `measured` here). It then sets the
  consensus of a colluding miner that trained honestly but uselessly (score 0) to the top of the
  scale, which pays G = P_m · MAX / (MAX + (n − 1) · MAX/2) that round, against the other miners at
  half scale. The coalition learns its seats from the seed only after the commits, so it lies
  only in rounds it captured, and its smallest majority is one validator holding most seats, so
  one member lies. That member's lying score is one of the M claims it reveals (M = the miners it
  holds a drawn seat of, n · (1 − (1 − 1/V)^(2c)) at equal stakes); each honest other validator is
  drawn as its auditor with chance d = min(1, A/(V − 1)) and samples `audit_sample` of the M, so
  it is caught with p = 1 − (1 − d · a/M)^h, h the honest others. Expected profit per round =
  P(capture) · (G − p · S_v): negative whenever G < p · S_v.
- **A validator that skips its assigned miners** (scores and fakes witnesses for all of them):
  every claim it makes is wrong, so any honest auditor drawn catches it: p = 1 − (1 − d)^h; it
  saves D, its checks' worth: D − p · S_v.

Parameters are the trust table's (`benchmarks.trust.Params`, the devnet's counts unless given),
with `chain.auditors` A and the committee sizes c = 3, 5, 7 at α = 10, 20, 33 %.
"""

from __future__ import annotations

import math
from fractions import Fraction

from benchmarks.trust import SCORE_MAX, Params, Row, saving
from protocol.config.run_config import ChainParams
from protocol.core.settlement.committee_odds import p_majority
from protocol.core.settlement.committees import DRAWN_PER_SEAT

SHARES = (Fraction(1, 10), Fraction(1, 5), Fraction(1, 3))
SIZES = (3, 5, 7)


def auditor_chance(validators: int, auditors: int) -> Fraction:
    """d: the chance one other validator (equal stakes) is drawn to audit a given one."""
    return Fraction(1) if auditors == 0 else min(Fraction(1), Fraction(auditors, validators - 1))


def claims_of_a_member(p: Params, size: int) -> Fraction:
    """M: the miners a validator holds a drawn seat of, at equal stakes (at least 1)."""
    return max(Fraction(1), p.miners * (1 - Fraction(p.validators - 1, p.validators) ** (DRAWN_PER_SEAT * size)))


def honest_others(p: Params, share: Fraction) -> int:
    return p.validators - max(1, math.ceil(share * p.validators))


def inflated_pay(p: Params) -> Fraction:
    """G: a colluding miner's pay at the top of the scale, the others at half of it."""
    return p.miner_pool * SCORE_MAX / (SCORE_MAX + (p.miners - 1) * Fraction(SCORE_MAX, 2))


def captured_row(p: Params, share: Fraction, size: int, auditors: int) -> Row:
    d = auditor_chance(p.validators, auditors)
    catch = d * Fraction(min(p.audit_sample, 1)) / claims_of_a_member(p, size) if p.audit_sample else Fraction(0)
    caught = 1 - (1 - min(Fraction(1), catch * p.audit_sample)) ** honest_others(p, share)
    capture = Fraction(p_majority(share, size))
    gain = inflated_pay(p)
    profit = capture * (gain - caught * p.validator_slash)
    return Row(f"committee captured (c = {size}, coalition {float(share):.0%}): inflated score", "10.8 committees",
               "coalition", caught, p.validator_slash, capture * gain, profit,
               "P(capture)*(G - p*S_v), p = 1-(1-d*a/M)^h",
               note=None if profit < 0 else "not negative: raise audit_sample or auditors")


def skipper_row(p: Params, auditors: int) -> Row:
    d = auditor_chance(p.validators, auditors)
    caught = 1 - (1 - d) ** (p.validators - 1)
    return saving("validator skips its assigned miners (committees)", "15.3 drawn auditors", caught,
                  p.dividend, p.validator_slash)


def committee_rows(p: Params, auditors: int | None = None) -> list[Row]:
    a = ChainParams().auditors if auditors is None else auditors
    return [captured_row(p, share, size, a) for size in SIZES for share in SHARES] + [skipper_row(p, a)]
