"""Trust rows for hardware classes (DESIGN §8.1 rule 2), measured through the real core: the
round's result (`compute_result`) with class sets, at the run's equal validator stakes.

A class is decided by its holders only when they hold the class minimum and 2/3 of the round's
stake; else every validator checks its miners in tolerance mode (discounted by d). Work is
priced at its pay: a lazy miner saves what it would have been paid honestly.

- the fief: one validator at `min_class_stake` (half of the stake beside two at the minimum)
  registers a class nobody else runs and puts no-training identities in it, scoring them at the
  maximum. The class is
  everyone's; the honest validators find nothing trained (score 0), so the identities earn 0 and
  the holder loses agreement on their columns.
- a lazy miner of a class whose only holder is below `min_class_stake`: the same, one identity.
- registering a class nobody else runs, honestly: the class's honest miner is checked in
  tolerance mode either way, so the registration changes no payment (gain 0).
"""

from __future__ import annotations

from fractions import Fraction

from benchmarks.trust import Params, Row, blocked
from benchmarks.trust_absence import FAIR, SCORE_MAX, TOKEN, _accounts
from protocol.core.settlement.class_checks import column_deciders
from protocol.core.settlement.result import RoundResult, compute_result
from protocol.core.settlement.result_inputs import Reveal, RoundInputs

COMMON, RARE = 1, 2  # class sets: every honest node runs COMMON; RARE is the holder's
IDENTITIES = 3  # the fief's no-training identities


def _round(p: Params, stakes: tuple[int, ...], masks: tuple[int, ...], miner_masks: tuple[int, ...],
           scores: list[list[int]]) -> tuple[RoundInputs, RoundResult]:
    """One round: validator j stakes `stakes[j]` units of the validator stake, runs `masks[j]` and
    reveals `scores[j]`; miner i runs `miner_masks[i]`. The class minimum is the run's (twice the
    validator minimum, so one validator at twice the stake meets it)."""
    miners, vals = _accounts(b"class miner", len(miner_masks)), _accounts(b"class validator", len(stakes))
    reveals = {v: Reveal(tuple(s), 0, bytes(32)) for v, s in zip(vals, scores, strict=True)}
    inputs = RoundInputs(1, miners, vals, tuple(s * p.validator_stake for s in stakes), reveals, frozenset(), {},
                         p.emission * TOKEN, p.miner_share_bps, miner_classes=miner_masks,
                         validator_classes=masks, min_class_weight=2 * p.validator_stake)
    return inputs, compute_result(inputs)


def _honest_scores(inputs: RoundInputs, truth: list[int], tolerance_discount: Fraction) -> list[list[int]]:
    """What each honest validator reveals: `truth` for the columns it decides, discounted where the
    column is in tolerance mode (everyone decides), 0 for columns others decide."""
    out: list[list[int]] = [[] for _ in inputs.validators]
    for i, score in enumerate(truth):
        holders = [bool(m & inputs.miner_classes[i]) for m in inputs.validator_classes]
        deciders = column_deciders(inputs.weights, holders, inputs.min_class_weight)
        tolerance = all(deciders)
        for j, decides in enumerate(deciders):
            out[j].append(int(score * tolerance_discount) if tolerance else score if decides else 0)
    return out


def _coalition_tokens(res: RoundResult, miners: list[int], validator: int) -> Fraction:
    return Fraction(sum(res.pay[i] for i in miners) + res.validator_credit[validator], TOKEN)


def lazy_holder_row(p: Params, stakes: tuple[int, ...], lazy: int, attack: str) -> Row:
    """Validator 0 alone runs RARE and `lazy` miners of RARE train nothing; it scores them at the
    maximum. The baseline: the same miners train honestly and validator 0 is honest."""
    masks = (RARE | COMMON,) + (COMMON,) * (len(stakes) - 1)
    miner_masks = (RARE,) * lazy + (COMMON,) * p.miners
    truth = [FAIR] * (lazy + p.miners)
    shape, _ = _round(p, stakes, masks, miner_masks, [truth] * len(stakes))
    honest_scores = _honest_scores(shape, truth, p.tolerance_discount)
    _, honest = _round(p, stakes, masks, miner_masks, honest_scores)
    caught = _honest_scores(shape, [0] * lazy + [FAIR] * p.miners, p.tolerance_discount)
    caught[0] = [SCORE_MAX] * lazy + caught[0][lazy:]
    _, attacked = _round(p, stakes, masks, miner_masks, caught)
    if any(attacked.consensus[:lazy]):
        raise AssertionError(f"{attack}: the holder decided its class alone")
    identities = list(range(lazy))
    saved = Fraction(sum(honest.pay[:lazy]), TOKEN)  # work is priced at its pay
    loss = _coalition_tokens(honest, identities, 0) - _coalition_tokens(attacked, identities, 0)
    return Row(attack, "8.1 rule 2", "coalition", Fraction(1), loss, saved, saved - loss,
               "saved - loss: the class is everyone's (holders < 2/3 of the stake), tolerance checks score "
               "the untrained identities 0 (measured: compute_result with class sets)")


def registration_row(p: Params) -> Row:
    """Validator 0 registers RARE, which no other validator runs, beside one honest RARE miner:
    its pay and the validator's credit are the same as when nobody registers RARE."""
    stakes = (1,) * p.validators
    miner_masks = (RARE,) + (COMMON,) * (p.miners - 1)
    truth = [FAIR] * p.miners
    tokens = []
    for holder_mask in (RARE | COMMON, COMMON):
        masks = (holder_mask,) + (COMMON,) * (p.validators - 1)
        shape, _ = _round(p, stakes, masks, miner_masks, [truth] * p.validators)
        _, res = _round(p, stakes, masks, miner_masks, _honest_scores(shape, truth, p.tolerance_discount))
        tokens.append(_coalition_tokens(res, [], 0))
    gain = tokens[0] - tokens[1]
    if gain > 0:
        raise AssertionError("registering a class nobody else runs gains its registrant dividends")
    return blocked("registering a class nobody else runs (honest miners in it)", "8.1 rule 2", -gain,
                   "measured: the class is checked by everyone in tolerance mode with or without the registration")


def class_rows(p: Params) -> list[Row]:
    # the holder at the class minimum (2 units) and under 2/3 of the stake: a holder of 2/3 decides
    # by design (it could certify anything), so beside one other validator that one holds as much
    other = 2 if p.validators == 2 else 1
    at_minimum = tuple(2 if j == 0 else other for j in range(p.validators))
    return [
        lazy_holder_row(p, at_minimum, IDENTITIES,
                        f"rare-class fief: its only holder (at min_class_stake) + {IDENTITIES} untrained identities"),
        lazy_holder_row(p, (1,) * p.validators, 1, "lazy miner + its class's only holder (below min_class_stake)"),
        registration_row(p),
    ]
