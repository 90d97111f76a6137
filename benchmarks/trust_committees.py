"""Trust rows for check committees and score audits (docs/PROTOCOL.md §10.8, §15.3, §15.4a).

- **A captured committee.** A coalition holding share α of the validator stake takes a majority
  of a miner's committee of c seats with exactly P(Bin(c, α) > c/2) (`committee_odds.p_majority`;
  `benchmarks.committees` checks it against the real draw). It then sets the consensus of a
  colluding miner that trained honestly but uselessly (score 0) to the top of the scale, which
  would pay G = P_m · MAX / (MAX + (n − 1) · MAX/2) that round, the other miners at half scale.
  Its seats are known only after the commits, so it lies only in rounds it captured. Every
  validator holding one of the miner's 2c drawn seats (committee and backups) checks it and
  reveals the exact score, and compares it with the other counted scores (the cross-check): the
  lie is reported unless all 2c drawn seats are the coalition's, P(Bin(2c, α) = 2c) = α^(2c).
  Even then each lying member is drawn for audit by each honest other validator with chance
  d = min(1, A/(V − 1)), which samples `audit_sample` of its M claims (M = n · (1 − (1 − 1/V)^(2c))
  at equal stakes; one member lies, the smallest majority). A confirmed report forfeits the liar,
  whose scores are then void (§11.2): the lie pays only when uncaught. So, per round,
  expected profit = P(capture) · ((1 − p) · G − p · S_v), p = 1 − P(escape | capture).
- **A captured committee zeroes an honest miner** (deflation): the miner's pay R goes to the
  other miners, a share α of it to the coalition's if it holds that share of them. A zero claims
  a failed check, and a failed check is reported, so a counted zero without its validator's
  report is audited like any number (validator/score_audits.py): the honest seat-holders'
  cross-check and the drawn auditors catch it as the inflated lie above, p alike. Or the
  coalition files a false report to back its zeros (one bond B = report_bond · (V − 1); the
  others join it for free), which every honest holder of the class rejects (the check holds,
  the checkpoint is served at the first try): its bond burns. Per round,
  expected profit = P(capture) · max((1 − p) · αR − p · S_v, αR − B).
- **A validator that skips its assigned miners** (scores and fakes witnesses for all of them):
  every claim it makes is wrong, so any honest auditor drawn catches it: p = 1 − (1 − d)^(V − 1);
  it saves D, its checks' worth: D − p · S_v.

Parameters are the trust table's (`benchmarks.trust.Params`) at the committee network of
`veritrain devnet --miners 12 --validators 6 --committee 3 --cheaters lazy` (13 miners commit)
unless counts are given (with fewer
validators than seats a committee is every validator, and committees are not what they test),
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


def escape_given_capture(share: Fraction, size: int, p: Params, auditors: int) -> Fraction:
    """P(a captured committee's lie escapes): all 2c drawn seats are the coalition's (no honest
    cross-check), and no honest auditor drawn samples the lying claim."""
    d = auditor_chance(p.validators, auditors)
    sampled = min(Fraction(1), d * p.audit_sample / claims_of_a_member(p, size))
    unaudited = (1 - sampled) ** honest_others(p, share)
    all_seats = share ** (DRAWN_PER_SEAT * size)
    return all_seats / Fraction(p_majority(share, size)) * unaudited


def captured_row(p: Params, share: Fraction, size: int, auditors: int) -> Row:
    caught = 1 - escape_given_capture(share, size, p, auditors)
    capture = Fraction(p_majority(share, size))
    gain = inflated_pay(p)
    profit = capture * ((1 - caught) * gain - caught * p.validator_slash)
    return Row(f"committee captured (c = {size}, coalition {float(share):.0%}): inflated score", "10.8 committees",
               "theft", caught, p.validator_slash, gain, profit,
               "P(capture)*((1-p)*G - p*S_v), 1-p = alpha^(2c)/P(capture) * (1-d*a/M)^h",
               note=None if profit < 0 else "not negative: raise audit_sample or auditors")


COMMITTEE_MINERS, COMMITTEE_VALIDATORS = 13, 6  # 12 honest and one lazy commit


def deflation_row(p: Params, share: Fraction, size: int, auditors: int) -> Row:
    capture = Fraction(p_majority(share, size))
    gain = share * p.reward
    caught = 1 - escape_given_capture(share, size, p, auditors)
    unreported = (1 - caught) * gain - caught * p.validator_slash
    bond = Fraction(p.report_bond * (p.validators - 1))
    profit = capture * max(unreported, gain - bond)
    return Row(f"committee captured (c = {size}, coalition {float(share):.0%}): zeroes an honest miner",
               "15.4a score audits", "theft", caught, p.validator_slash, gain, profit,
               "P(capture)*max((1-p)*alpha*R - p*S_v, alpha*R - B), B = report_bond*(V-1)",
               note=None if profit < 0 else "not negative: raise report_bond, audit_sample or auditors")


def skipper_row(p: Params, auditors: int) -> Row:
    d = auditor_chance(p.validators, auditors)
    caught = 1 - (1 - d) ** (p.validators - 1)
    return saving("validator skips its assigned miners (committees)", "15.3 drawn auditors", caught,
                  p.dividend, p.validator_slash)


def committee_rows(p: Params, auditors: int | None = None) -> list[Row]:
    a = ChainParams().auditors if auditors is None else auditors
    return ([captured_row(p, share, size, a) for size in SIZES for share in SHARES] + [skipper_row(p, a)]
            + [deflation_row(p, share, size, a) for size in SIZES for share in SHARES])
