"""Trust rows for absent validators (DESIGN §8.1 rule 4), measured through the real core: the
round's result (`compute_result`) and its certificate (`certifies`) with validators offline.

- one silent validator of the devnet's equal ones (never reveals nor signs): the others still
  reach the quorum and certify, every honest miner and validator is paid, and the silent one
  forfeits its dividend. Its profit is -D.
- a pair holding half of four equal stakes, a third validator offline, scoring a worthless
  miner at the maximum: the score needs half of the permitted stake, so it stays at the honest
  validator's 0 and the pair only loses agreement.
"""

from __future__ import annotations

from fractions import Fraction

from benchmarks.trust import Params, Row, blocked
from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.certificate import certifies
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs

SCORE_MAX, FAIR = 65535, 40000
TOKEN = 10**18


def _accounts(prefix: bytes, n: int) -> tuple[str, ...]:
    return tuple(checksum_address(keccak256(prefix + b"%d" % k)[:20]) for k in range(n))


def _round(p: Params, validators: int, scores: dict[int, list[int]]) -> tuple[RoundInputs, RoundResult]:
    """One round of `p.miners` miners and `validators` equal validators; `scores[j]` is validator
    j's reveal (absent when missing)."""
    miners, vals = _accounts(b"miner", p.miners), _accounts(b"validator", validators)
    reveals = {vals[j]: Reveal(tuple(s), 0, bytes(32)) for j, s in scores.items()}
    inputs = RoundInputs(1, miners, vals, (p.validator_stake,) * validators, reveals, frozenset(), {},
                         p.emission * TOKEN, p.miner_share_bps)
    return inputs, compute_result(inputs)


def silent_row(p: Params) -> Row:
    v = p.validators
    honest = [FAIR] * p.miners
    inputs, absent = _round(p, v, {j: honest for j in range(v - 1)})
    _, present = _round(p, v, {j: honest for j in range(v)})
    others = inputs.validators[:-1]
    rides_out = absent.quorum and certifies(inputs, others, inputs.validators) and all(x > 0 for x in absent.pay) \
        and all(c > 0 for c in absent.validator_credit[:-1])
    if rides_out != (v >= 3):  # README: three equal validators ride out one that never reveals, two do not
        raise AssertionError(f"{v} equal validators: riding out one silent validator is {rides_out}")
    if not rides_out:  # the round falls back: nobody is paid, the silent one included
        return blocked(f"one silent validator of {v} (never reveals nor signs)", "8.1 rule 4",
                       Fraction(present.validator_credit[-1], TOKEN), "the round falls back: 3 validators ride it out")
    loss = Fraction(present.validator_credit[-1] - absent.validator_credit[-1], TOKEN)
    # measured: the others reach the quorum and certify, every honest node is paid, and the
    # silent one forfeits its dividend (the row's loss)
    return blocked(f"one silent validator of {v} (never reveals nor signs)", "8.1 rule 4", loss)


def offline_pair_row(p: Params) -> Row:
    honest = [0] + [FAIR] * (p.miners - 1)  # miner 0 is worthless
    inflated = [SCORE_MAX] + [FAIR] * (p.miners - 1)
    _, attack = _round(p, 4, {0: inflated, 1: inflated, 2: honest})  # validator 3 offline
    _, fair = _round(p, 4, {0: honest, 1: honest, 2: honest})
    if attack.consensus[0] != 0:
        raise AssertionError("a pair holding half the stake raised a score with an honest validator offline")
    loss = Fraction(sum(fair.validator_credit[:2]) - sum(attack.validator_credit[:2]), 2 * TOKEN)
    return blocked("score inflation, pair of 4 holding 1/2 of permitted stake, one honest offline", "8.1 rule 4",
                   loss, None)


def absence_rows(p: Params) -> list[Row]:
    return [silent_row(p), offline_pair_row(p)]
