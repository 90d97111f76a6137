"""Trust economics: for every attack the protocol claims to stop, what it pays to try.

    python -m benchmarks trust [--quick] [--json PATH] [--validators V] [--miners M]

Parameters are the defaults: `RunConfig()` (emission 1000/round, miner share 70%, stakes 100 and
200, slash 50%, reporter share 20%, bond 10), the default preset's `ComputeConfig` (n = H/k = 10
segments, q = 1 per validator), `ChainParams.audit_sample` (1) and the devnet's default counts (`DevnetOptions`: 4 miners,
3 validators). Validators
have equal stake; a cheater holds the minimum stake (the smallest slash).

Columns, per round:
- p_detect: exact probability (fractions) that the cheat ends in a confirmed report. Each
  validator samples q of n segments independently, so a miner faking f of them escapes one
  validator with C(n-f, q)/C(n, q) and all c checkers with that to the power c. Derivation,
  binding and data checks run on every check (p = 1). Audits (rule 3): each other honest validator
  replays `audit_sample` of the M miners an audited validator checked; one that skipped u of them
  escapes one auditor with C(M-u, a)/C(M, a). A report counts only if it is confirmed under
  PROTOCOL.md §12 (more than half of the voting weight confirms, someone besides the reporter
  confirming, more than half of the weight that may vote voting); a colluder votes reject, and
  the accused of a `lazy_validator` report may not vote. So one dishonest validator among 3
  blocks nothing, and among 2 it blocks every report against its partner (nobody has a majority).
  For rules 5-9, p_detect = 1 means the rule blocks the attack outright.
- p_detect_measured: the same attack run through the real code (cheats.py submissions,
  `make_challenge`, `verify_submission`, `judge`, and for withholding the voter's re-check of the
  reported segment) on the micro preset, with the devnet's validator count; for tolerance-mode
  spoofing the same checks in tolerance mode (`benchmarks.trust_tolerance`); null where the rule
  lives in contracts or nodes (audits, consensus, eligibility, admission, embargo); where a
  blocked row's loss can be run through the real result function or contracts, the loss is
  what is measured (`trust_absence`, `trust_classes`, `trust_reports`).
- slash: tokens lost when caught: stake * slash_bps + the round's forfeited reward (R = miner
  pool / M for a miner, D = validator pool / V for a validator); for rules 5-9 the dividend lost.
- gain: tokens gained per round if uncaught, against honest behaviour. Assumption: compute is
  valued at the reward it earns (an honest miner's training costs R, a validator's checks cost
  D), the most it can be worth to a rational participant. So a lazy miner faking f of n segments
  gains f/n * R; skipping or reusing all training (copy, stale, wrong data) gains R; a blob edit
  saves nothing but could win at most the rest of the miner pool; a validator skipping u of its M
  miners gains u/M * D.
- expected_profit, per row type:
  - saving (compute not spent is kept even when caught): gain - p * slash. This is stricter than
    (1-p) * gain - p * slash, which would forget the compute already saved.
  - theft (the gain comes only with an accepted update): (1-p) * gain - p * slash.
  - coalition (a cheating miner and a colluding validator): gain - p_m * S_m - p_v * S_v.
  - blocked (rules 5-9): -loss, the dividend the attempt costs, or 0 when it costs only gas.
  - capacity-scaled work: overclaimed steps (commit H, train H/2) is a saving of R/2 caught by
    every validator's trace-length check (p = 1 with honest validators); one machine as three
    identities (sybil) has nothing to detect: its gain is measured for every split of H = 30
    (n >= 2 identities of s steps, s = 3 .. 15), the pay of the identities minus that of one 30-step
    update, beside two fast or four slow honest miners (`measure_splits`).
  - hardware classes (`class_rows`, measured in `benchmarks.trust_classes`): a class's only
    validator, at `min_class_stake` with untrained identities in its class (the fief) and below
    it with one lazy miner, and registering a class nobody else runs; and a miner claiming a class
    nobody holds to be checked within δ: it keeps f/n*R of compute but loses (1-d)*R to the
    tolerance discount d, and all of d*R when a majority of validators catches it (p measured
    by `benchmarks.trust_tolerance`: the lazy trace's tolerance checks, at least half of the
    validators finding it).
  - reports and leaf demands (`report_rows`, measured in `benchmarks.trust_reports` on the real
    contracts, deployed by `protocol.chain.deploy` on the embedded chain with the devnet's
    validator count): a false report is voted false by the other validators and resolved, and
    its loss is its filer's balance change (the bond, report_bond per other voter, burned), set
    against the R/n of re-checking each voter spends; a report voided because the voters got the
    checkpoint only on a retry costs the accused's stake `late_serve_fee` (measured) and returns
    the filer's bond; leaves of an honest posted root demanded and answered cost the demander
    `challenge_bond` each (its balance change), and the 9th demand of a round is refused.

Rows that are not negative say so in `note`. What would fix them:
- decoy report and witness bought from a cheating miner at 2 validators (`--validators 2`): the
  colluder's reject ties the honest confirm, and no report is confirmed without a strict
  majority. From 3 validators (the devnet's default, and the advice of README.md and docs/OPERATORS.md §3) they are negative.
- witness bought from an honest miner: positive (the validator outsources replay work worth up to
  D/M to the party who already did it) and harmless: the witness and score are exactly an honest
  replay's. No parameter should change this.
- late sybils, squatting, unadmitted peers, copying before the close: 0, blocked outright at the
  cost of gas only (not counted in tokens). Nothing to fix.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

SCORE_MAX = 65535  # the most a validator gives (validator/scoring.py absolute_score)


@dataclass(frozen=True)
class Params:
    n_segments: int
    q: int
    miners: int
    validators: int
    emission: int
    miner_share_bps: int
    miner_stake: int
    validator_stake: int
    slash_bps: int
    reporter_share_bps: int
    report_bond: int
    audit_sample: int
    tolerance_discount: Fraction = Fraction(1, 2)  # a tolerance-checked miner's pay factor
    late_serve_fee: int = 0  # burned from an accused whose checkpoint voters got only on a retry
    challenge_bond: int = 0  # a result challenge's (and a leaf demand's) bond

    @property
    def miner_pool(self) -> Fraction:
        return Fraction(self.emission * self.miner_share_bps, 10_000)

    @property
    def validator_pool(self) -> Fraction:
        return self.emission - self.miner_pool

    @property
    def reward(self) -> Fraction:  # R: one miner's reward when all miners are equal
        return self.miner_pool / self.miners

    @property
    def dividend(self) -> Fraction:  # D: one validator's dividend at equal stake
        return self.validator_pool / self.validators

    @property
    def miner_slash(self) -> Fraction:  # S_m
        return Fraction(self.miner_stake * self.slash_bps, 10_000) + self.reward

    @property
    def validator_slash(self) -> Fraction:  # S_v
        return Fraction(self.validator_stake * self.slash_bps, 10_000) + self.dividend


def default_params(validators: int | None = None, miners: int | None = None) -> Params:
    from protocol.config.run_config import RunConfig
    from protocol.config.run_setup import resolve
    from protocol.devnet.network import DevnetOptions

    config = RunConfig()
    chain, cfg, devnet = config.chain, resolve(config).compute, DevnetOptions()
    return Params(
        n_segments=cfg.n_segments, q=cfg.segments_per_validator,
        miners=miners or devnet.miners, validators=validators or devnet.validators,
        emission=chain.emission_per_round, miner_share_bps=chain.miner_share_bps,
        miner_stake=chain.min_miner_stake, validator_stake=chain.min_validator_stake,
        slash_bps=chain.slash_bps, reporter_share_bps=chain.reporter_share_bps,
        report_bond=chain.report_bond, late_serve_fee=chain.late_serve_fee, challenge_bond=chain.challenge_bond,
        audit_sample=chain.audit_sample, tolerance_discount=Fraction(cfg.tolerance_discount).limit_denominator(1000))


# ---------------------------------------------------------------------------------------
# exact probabilities


def escape_one(n: int, f: int, q: int) -> Fraction:
    """A miner faking f of n segments escapes one validator sampling q of them."""
    return Fraction(math.comb(n - f, q), math.comb(n, q))


def p_replay(n: int, f: int, q: int, checkers: int) -> Fraction:
    """At least one of `checkers` independent validators samples a faked segment."""
    return 1 - escape_one(n, f, q) ** checkers


def audit_miss(m: int, skipped: int, sample: int) -> Fraction:
    """One auditor replaying `sample` of m witnesses misses all `skipped` wrong ones."""
    a = min(sample, m)
    return Fraction(math.comb(m - skipped, a), math.comb(m, a))


def confirmed(confirm: int, reject: int, permitted: int) -> bool:
    """PROTOCOL.md §12 resolution with equal weights: more than half of the weight that may
    vote voted, more than half of the voting weight confirms, and someone besides the reporter
    (one of `confirm`) confirmed. The accused of a `lazy_validator` report does not vote."""
    voting = confirm + reject
    if voting * 2 <= permitted:
        return False
    return confirm * 2 > voting and confirm >= 2


# ---------------------------------------------------------------------------------------
# rows


@dataclass
class Row:
    attack: str
    rule: str
    kind: str  # saving, theft, coalition, blocked
    p_detect: Fraction
    slash: Fraction
    gain: Fraction
    expected_profit: Fraction
    formula: str
    p_detect_measured: float | None = None
    trials: int | None = None
    note: str | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("p_detect", "slash", "gain", "expected_profit"):
            d[k], d[k + "_exact"] = float(d[k]), str(d[k])
        return d


def saving(attack: str, rule: str, p: Fraction, gain: Fraction, slash: Fraction) -> Row:
    return Row(attack, rule, "saving", p, slash, gain, gain - p * slash, "gain - p*slash")


def theft(attack: str, rule: str, p: Fraction, gain: Fraction, slash: Fraction) -> Row:
    return Row(attack, rule, "theft", p, slash, gain, (1 - p) * gain - p * slash,
               "(1-p)*gain - p*slash")


def blocked(attack: str, rule: str, loss: Fraction, note: str | None = None) -> Row:
    return Row(attack, rule, "blocked", Fraction(1), loss, Fraction(0), -loss, "-loss", note=note)


# (attack, cheat name, segments whose check fails (None: every check fails), gain in R, kind).
# fabricate keeps the honest run's losses, so every segment's replay mismatches (a forger that
# fixed them is the lazy 1/10 row); withhold hides both endpoints of its faked (interior)
# segment, so the two neighbouring segments cannot be checked either.
MINER_CHEATS: tuple[tuple[str, str, int | None, Fraction, str], ...] = (
    ("lazy, 1/10 segments", "lazy", 1, Fraction(1, 10), "saving"),
    ("lazy, 5/10 segments", "lazy", 5, Fraction(1, 2), "saving"),
    ("lazy, all segments", "lazy", 10, Fraction(1), "saving"),
    ("fabricate (forged leaf 1)", "fabricate", 10, Fraction(1, 10), "saving"),
    ("wrong-data", "wrong-data", 10, Fraction(1), "saving"),
    ("copy (peer's update)", "copy", None, Fraction(1), "saving"),
    ("stale (own old update)", "stale", None, Fraction(1), "saving"),
    ("scale blob", "scale", None, Fraction(-1), "theft"),
    ("sign-flip blob", "sign-flip", None, Fraction(-1), "theft"),
    ("nan blob", "nan", None, Fraction(-1), "theft"),
    ("noise blob", "noise", None, Fraction(-1), "theft"),
    ("withhold, 1/10 segments", "withhold", 3, Fraction(1, 10), "saving"),
    ("withhold, all segments", "withhold", 10, Fraction(1), "saving"),
    ("withhold from challenger only (lazy 1/10)", "withhold-challenger", 1, Fraction(1, 10),
     "saving"),
)
SPOOF = "tolerance-mode spoofing (claims a class nobody holds, lazy 1/10)"
BLOCKED_NOTE = "0, not negative: blocked outright; the attempt costs only gas (not counted)"
QUORUM_NOTE = ("not negative at {v} validators: one dishonest validator holds >= 1/3 of the "
               "voting weight, so no report it votes against is confirmed; negative from 4")


def miner_rows(p: Params) -> list[Row]:
    """Every miner cheat in cheats.CHEATS against V honest validators."""
    n, all_honest = p.n_segments, confirmed(p.validators, 0, p.validators)
    rows = []
    for attack, _name, f, gain_r, kind in MINER_CHEATS:
        det = Fraction(1) if f is None or f == n else p_replay(n, f, p.q, p.validators)
        det *= all_honest
        gain = p.miner_pool - p.reward if gain_r < 0 else gain_r * p.reward
        make = saving if kind == "saving" else theft
        rows.append(make(attack, "8.1 rule 1" if "withhold" in attack else "replay/derivation",
                         det, gain, p.miner_slash))
    return rows


def coalition_rows(p: Params) -> list[Row]:
    """A lazy miner (1/10) with one colluding validator; lazy validators; bought witnesses."""
    n, v, m, a = p.n_segments, p.validators, p.miners, p.audit_sample
    h = 1 - escape_one(n, 1, p.q)  # one validator's challenge hits the faked segment
    lazy_gain = p.reward / n
    quorum = confirmed(v - 1, 1, v)  # the honest validators confirm, the dishonest one rejects
    lazy_quorum = confirmed(v - 1, 0, v - 1)  # against a validator: the accused does not vote
    p_m = (1 - (1 - h) ** (v - 1)) * quorum
    rows = [Row("decoy report by a colluding validator", "8.1 rule 2", "coalition", p_m,
                p.miner_slash, lazy_gain, lazy_gain - p_m * p.miner_slash,
                "gain - p*S_m (honest validators still report; an unavailable decoy the voters "
                "fetch at once is rejected, so its bond burns)")]
    for attack, skipped in (("never-replaying validator", m), ("half-replaying validator", m // 2),
                            ("validator skipping one miner", 1)):
        det = (1 - audit_miss(m, skipped, a) ** (v - 1)) * lazy_quorum
        gain = p.dividend * Fraction(skipped, m)
        rows.append(saving(attack, "8.1 rule 3", det, gain, p.validator_slash))
    rows.append(Row("witness bought from an honest miner", "8.1 rule 3", "saving", Fraction(0),
                    Fraction(0), p.dividend / m, p.dividend / m, "gain - p*slash",
                    note="positive but harmless: witness and score equal an honest replay's; "
                         "the validator outsources work worth <= D/M to the miner who did it"))
    audited = 1 - audit_miss(m, 1, a) ** (v - 1)  # the bought witness is audited
    p_v = h * audited * lazy_quorum
    p_mb = (1 - (1 - h) ** (v - 1) * (1 - h * audited)) * quorum
    gain = lazy_gain + p.dividend / m
    rows.append(Row("witness bought from a cheating miner (lazy 1/10)", "8.1 rule 3", "coalition",
                    p_mb, p.miner_slash + p.validator_slash, gain,
                    gain - p_mb * p.miner_slash - p_v * p.validator_slash,
                    "gain - p_m*S_m - p_v*S_v, p_v = h*audited (the audit replays the segment)"))
    for r in rows:
        if r.expected_profit >= 0 and r.note is None:
            r.note = QUORUM_NOTE.format(v=v)
    return rows


def dividend_loss(p: Params, w_coalition: Fraction, w_honest: Fraction) -> Fraction:
    """What a coalition that scores a worthless miner SCORE_MAX (consensus 0, the other M-1 at
    SCORE_MAX) loses: its agreement drops to (M-1)/M and the pool is split by weight*agreement."""
    agree = Fraction(p.miners - 1, p.miners)
    honest_share = w_coalition / (w_coalition + w_honest)
    return p.validator_pool * (honest_share - w_coalition * agree / (w_coalition * agree + w_honest))


def rule_rows(p: Params) -> list[Row]:
    """Rules 5-9: attacks a rule blocks outright (p_detect = 1)."""
    half = Fraction(p.validators // 2)
    s = Fraction(p.validator_stake)
    rows = [
        # a score needs the support of more than half of the permitted stake, revealed or not
        # (docs/PROTOCOL.md §11.2): half of it never raises one, whoever else is offline
        blocked("score inflation, coalition <= 1/2 of permitted stake", "8.1 rule 5",
                dividend_loss(p, half, p.validators - half)),
        # coalition at the minimum stake, just under 1/3 of permitted (200 of 601), beside the
        # fewest honest reveals that meet the 2/3 quorum (201)
        blocked("score inflation, coalition < 1/3 of permitted stake", "8.1 rule 5",
                dividend_loss(p, s, s + 1)),
        blocked("late sybil miners closing the commit phase", "8.1 rule 6", Fraction(0),
                BLOCKED_NOTE),
        blocked("validator-set squatting", "8.1 rule 7", Fraction(0), BLOCKED_NOTE),
        blocked("unadmitted peers (no stake)", "8.1 rule 8", Fraction(0), BLOCKED_NOTE),
        blocked("copying a peer's bytes before the close", "8.1 rule 9", Fraction(0),
                BLOCKED_NOTE + "; after the close it is the 'copy' row"),
    ]
    return rows


def capacity_rows(p: Params) -> list[Row]:
    """Capacity-scaled work: a miner that commits more steps than it trained. Every validator
    checks the trace's length against the committed count, so it is caught like `wrong-data`."""
    det = Fraction(int(confirmed(p.validators, 0, p.validators)))
    return [saving("overclaimed steps (commits H, trains H/2)", "capacity: trace length", det,
                   p.reward / 2, p.miner_slash)]


def p_majority_catches(p: Params, faked: int) -> Fraction:
    """A tolerance-checked miner faking `faked` segments scores 0 when the validators that catch
    it hold at least half the stake (equal stakes): then no score above 0 has a strict majority."""
    h = 1 - escape_one(p.n_segments, faked, p.q)
    v = p.validators
    return sum((Fraction(math.comb(v, k)) * h ** k * (1 - h) ** (v - k) for k in range(v + 1) if 2 * (v - k) <= v),
               Fraction(0))


def class_rows(p: Params) -> list[Row]:
    """Hardware classes (docs/PROTOCOL.md §10.5): a class's miners are decided by the validators holding
    it when they hold `min_class_stake` and 2/3 of the stake, else by every validator in tolerance
    mode, with the score discounted and no stake slashed (a replay within δ is no exact evidence).
    The coalition rows are measured (`benchmarks.trust_classes`); spoofing is priced here and its
    detection measured in `run` (`benchmarks.trust_tolerance`)."""
    from benchmarks.trust_classes import class_rows as measured  # it imports this module

    d = p.tolerance_discount
    r = p.reward
    faked = 1
    p_zero = p_majority_catches(p, faked)
    gain = Fraction(faked, p.n_segments) * r - (1 - d) * r
    spoof = Row(SPOOF, "8.3 tolerance discount", "saving", p_zero, d * r, gain, gain - p_zero * d * r,
                "f/n*R - (1-d)*R - p*d*R: the discount outweighs what δ lets it skip; p = a majority catches it")
    return measured(p) + [spoof]


def split_rows(gains: dict[int, tuple[int, Fraction]]) -> list[Row]:
    """One machine registered as n identities of s steps each, for every s: nothing to detect;
    each gain is measured (`measure_splits`), the worst over the honest mixes beside it."""
    return [Row(f"one machine as {n} identities of {s} steps (of 30)", "capacity: absolute score = steps x capped quality",
                "sybil", Fraction(0), Fraction(0), gain, gain,
                "gain measured: pay of the identities - pay of the whole, beside fast or slow honest miners")
            for s, (n, gain) in sorted(gains.items())]


def report_rows(p: Params) -> tuple[list[Row], dict[str, Any]]:
    """Reports (docs/PROTOCOL.md §12.5) and leaf demands (§11.9), measured through the real
    contracts (`benchmarks.trust_reports`): the rows, and what the chain showed."""
    from benchmarks.trust_reports import measure, report_rows  # it imports this module

    m = measure(p.validators)
    return report_rows(p, m), m.as_json()


def exact_rows(p: Params) -> list[Row]:
    """The rows computed without a chain (the report rows are measured on one in `run`)."""
    return miner_rows(p) + coalition_rows(p) + rule_rows(p) + capacity_rows(p) + class_rows(p)


def measure_spoofing(p: Params, trials: int) -> float:
    from benchmarks.trust_tolerance import measure_spoofing as measured  # it imports this module

    return measured(p, trials)


def committee_rows(validators: int | None, miners: int | None) -> list[Row]:
    """The committee rows, at the committee devnet's counts unless counts are given."""
    from benchmarks.trust_committees import COMMITTEE_MINERS, COMMITTEE_VALIDATORS
    from benchmarks.trust_committees import committee_rows as rows  # it imports this module

    return rows(default_params(validators or COMMITTEE_VALIDATORS, miners or COMMITTEE_MINERS))


def aggregation_rows(p: Params) -> list[Row]:
    from benchmarks.trust_aggregation import aggregation_rows as rows  # it imports this module

    return rows(p)


def stage_rows(p: Params) -> list[Row]:
    from benchmarks.trust_stages import stage_rows as rows  # it imports this module

    return rows(p)


def measure_stages(p: Params, trials: int) -> dict[str, float]:
    from benchmarks.trust_stages import measure_stages as measured  # it imports this module

    return measured(p, trials)


def absence_rows(p: Params) -> list[Row]:
    from benchmarks.trust_absence import absence_rows as measured  # it imports this module

    return measured(p)


def measure_splits(p: Params) -> dict[int, tuple[int, Fraction]]:
    """s -> (n, gain): the pay a machine gains by splitting H = 30 into n = H // s >= 2 identities
    of s steps, for every allowed s, against staying one miner at H, beside two fast honest
    miners and beside four slow ones (the minimum steps); the larger of the two gains. Real
    micro training, scored by `validator.scoring.score_round` (absolute scores, so each update is
    scored once and the shares follow), times the miner pool."""
    from benchmarks.overhead import corpus_slice
    from protocol.core.crypto.hashing import blake3_hash
    from protocol.core.hardware.observe import observe_profile
    from protocol.core.hardware.replay_profile import ReplayProfile
    from protocol.core.model.gpt import init_params, preset
    from protocol.core.proof.submission import honest
    from protocol.core.train.compute_config import ComputeConfig
    from protocol.core.train.training import RoundTask
    from protocol.node.profile_setup import apply_profile
    from validator.scoring import RoundEntry, score_round

    apply_profile(ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability))
    ds, theta, full = corpus_slice(600_000), init_params(preset("micro"), 0), ComputeConfig()
    seed = blake3_hash("validator-seed", b"trust-split")

    def entry(i: int, steps: int) -> RoundEntry:
        t = RoundTask(b"trust", 1, i.to_bytes(20, "big"), preset("micro"), full.with_steps(steps))
        return RoundEntry(t, i, honest(t, ds, theta, None).blob, True)

    whole, fast, slow = 1, [2, 3], [4, 5, 6, 7]
    entries = [entry(whole, full.inner_steps), *[entry(i, full.inner_steps) for i in fast],
               *[entry(i, full.min_steps) for i in slow]]
    splits: dict[int, list[int]] = {}
    for s in (s for s in full.allowed_steps() if full.inner_steps // s >= 2):  # two identities or more
        splits[s] = list(range(100 * s, 100 * s + full.inner_steps // s))
        entries += [entry(i, s) for i in splits[s]]
    score = {int.from_bytes(m, "big"): v.score for m, v in score_round(entries, ds, theta, seed).items()}

    def share(mine: list[int], beside: list[int]) -> Fraction:
        return Fraction(sum(score[i] for i in mine), max(1, sum(score[i] for i in mine + beside)))

    return {s: (len(ids), max((share(ids, mix) - share([whole], mix)) * p.miner_pool for mix in (fast, slow)))
            for s, ids in splits.items()}


# ---------------------------------------------------------------------------------------
# measured: the miner cheats through the real checks


def _submissions(ds: Any, theta: Any, cfg: Any) -> dict[str, tuple[Any, Any, Any]]:
    """(task, challenger's submission, voter's submission) per cheat row."""
    from protocol.core.model.gpt import preset
    from protocol.core.proof.submission import honest
    from protocol.core.train.training import RoundTask
    from protocol.devnet import cheats as adv

    def task(i: int, r: int = 1) -> RoundTask:
        return RoundTask(b"trust", r, bytes([i + 1]) * 20, preset("micro"), cfg)

    out: dict[str, tuple[Any, Any, Any]] = {}
    base_t = task(0)
    base = honest(base_t, ds, theta, None)
    peer = honest(task(1), ds, theta, None)
    old = honest(task(0, r=0), ds, theta, None)
    for i, (attack, name, f, _g, _k) in enumerate(MINER_CHEATS, start=2):
        t = task(i)
        f = f or cfg.n_segments
        frac = 0.1 if name.startswith("withhold") and f < cfg.n_segments else f / cfg.n_segments
        if name == "lazy":
            sub = adv.lazy(t, ds, theta, None, frac)
        elif name == "fabricate":
            sub = adv.fabricate(t, ds, theta, None)
        elif name == "wrong-data":
            sub = adv.wrong_data(t, ds, theta, None)
        elif name in ("withhold", "withhold-challenger"):
            sub = adv.withhold(t, ds, theta, None, frac)
            assert frac == 1 or 0 < min(adv.faked_segments(t, frac)) < cfg.n_segments - 1
        else:
            t = base_t
            blob = {"copy": peer.blob, "stale": old.blob}.get(name)
            sub = replace(base, blob=blob or adv.BLOB_EDITS[name](t, base.blob))
        # the voter fetches both endpoints from the miner or any peer (rule 1): a miner that
        # withholds from the challenger only serves the voter everything
        voter = replace(sub, withheld=frozenset()) if name == "withhold-challenger" else sub
        out[attack] = (t, sub, voter)
    return out


def measure(p: Params, trials: int) -> dict[str, float]:
    """Share of `trials` rounds in which one of p.validators honest validators' reports would be
    confirmed: its own check finds fraud, and a voter's re-check of the reported segment does."""
    from benchmarks.overhead import corpus_slice
    from protocol.core.crypto.hashing import blake3_hash, u64
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.hardware.observe import observe_profile
    from protocol.core.hardware.replay_profile import ReplayProfile
    from protocol.core.model.gpt import build_model, init_params, preset
    from protocol.core.proof.challenge import make_challenge
    from protocol.core.proof.trace import zero_carry_hash
    from protocol.core.proof.verdict import judge, verify_submission
    from protocol.core.train.compute_config import ComputeConfig
    from protocol.node.profile_setup import apply_profile

    profile = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    apply_profile(profile)
    ds, cfg = corpus_slice(600_000), ComputeConfig(segments_per_validator=p.q)
    assert cfg.n_segments == p.n_segments
    theta, model = init_params(preset("micro"), 0), build_model(preset("micro"))
    carry0 = zero_carry_hash(preset("micro"))

    def finds(t: Any, sub: Any, segments: tuple[int, ...]) -> bool:
        v = verify_submission(t, ds, theta, carry0, sub.root, sub.trace, sub.blob,
                              lambda leaf: sub.fetch(leaf, t), segments, profile, model=model)
        return judge(v).kind is not None

    out = {}
    for attack, (t, sub, voter) in _submissions(ds, theta, cfg).items():
        caught = 0
        for i in range(trials):
            block = blake3_hash("trust-block", u64(i))
            for j in range(p.validators):
                ident = NodeIdentity(blake3_hash("trust-validator", u64(i), u64(j)))
                seg = make_challenge(ident, 1, t.miner, block, cfg).segments
                if finds(t, sub, seg) and (voter is sub or finds(t, voter, seg)):
                    caught += 1
                    break
        out[attack] = caught / trials
    return out



def measure_audits(p: Params, trials: int) -> dict[str, float]:
    """Share of `trials` rounds in which the v-1 honest auditors' samples (`witness.audit_picks`,
    seeded by each auditor's real `make_audit_seed` signature) hit at least one of the claims a
    lazy validator made up, times the report rule (the accused does not vote). A picked made-up
    claim always fails its audit: its witness is not the replay's (`replay_witness` binds every
    inner state), which `tests/core/test_witness.py` and the devnet's lazy validator show."""
    from protocol.core.crypto.hashing import blake3_hash, u64
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.proof.witness import audit_picks, make_audit_seed

    v, m = p.validators, p.miners
    lazy = "0x" + "ee" * 20
    miners = ["0x" + bytes([i + 1]).hex() * 20 for i in range(m)]
    quorum = confirmed(v - 1, 0, v - 1)
    out = {}
    for attack, skipped in (("never-replaying validator", m), ("half-replaying validator", m // 2),
                            ("validator skipping one miner", 1)):
        fake = set(miners[:skipped])
        caught = 0
        for i in range(trials):
            block = blake3_hash("trust-audit-block", u64(i))
            for j in range(v - 1):
                auditor = NodeIdentity(blake3_hash("trust-auditor", u64(i), u64(j)))
                name = "0x" + bytes([0xA0 + j]).hex() * 20
                picks = audit_picks(make_audit_seed(auditor, 1, block), {lazy: miners}, name, p.audit_sample)
                if any(miner in fake for _, miner in picks):
                    caught += 1
                    break
        out[attack] = caught / trials * quorum
    return out


def run(quick: bool, validators: int | None = None, miners: int | None = None,
        trials: int | None = None) -> dict[str, Any]:
    p = default_params(validators, miners)
    trials = trials or (3 if quick else 100)
    reports, on_chain = report_rows(p)
    rows = (exact_rows(p) + reports + split_rows(measure_splits(p)) + absence_rows(p) + committee_rows(validators, miners)
            + aggregation_rows(p) + stage_rows(p))
    for rates, n in ((measure(p, trials), trials), (measure_audits(p, trials * 10), trials * 10),
                     ({SPOOF: measure_spoofing(p, trials * 100)}, trials * 100),  # verdicts cached per challenge
                     (measure_stages(p, trials * 10), trials * 10)):  # each segment checked once
        for attack, rate in rates.items():
            row = next(r for r in rows if r.attack == attack)
            row.p_detect_measured, row.trials = rate, n
    fixes = {}
    by_validators = {x.attack for x in exact_rows(p)}  # the rows a validator count can fix
    for r in rows:
        if r.note and r.note.startswith("not negative") and r.attack in by_validators:
            fixes[r.attack] = next((v for v in range(2, 33) if next(
                x for x in exact_rows(replace(p, validators=v)) if x.attack == r.attack
            ).expected_profit < 0), None)
    return {
        "figures": {"rows": [r.as_json() for r in rows]},
        "params": {**asdict(p), "tolerance_discount": float(p.tolerance_discount), "miner_pool": float(p.miner_pool),
                   "validator_pool": float(p.validator_pool), "reward_R": float(p.reward),
                   "dividend_D": float(p.dividend), "miner_slash_S_m": float(p.miner_slash),
                   "validator_slash_S_v": float(p.validator_slash), "trials": trials,
                   "measured_preset": "micro"},
        "validators_needed": fixes,
        "reports": on_chain,
    }


def _fmt(x: float | None, digits: int) -> str:
    return "null" if x is None else f"{x:.{digits}f}"


def print_table(result: dict[str, Any]) -> None:
    prm = result["params"]
    table = Table(title=f"trust economics ({prm['miners']} miners, {prm['validators']} validators, "
                        f"n={prm['n_segments']}, q={prm['q']}, audit_sample={prm['audit_sample']})")
    for col in ("attack", "p_detect", "p_detect_measured", "slash", "gain", "expected_profit"):
        table.add_column(col, justify="left" if col == "attack" else "right")
    for r in result["figures"]["rows"]:
        table.add_row(r["attack"] + (" *" if r["note"] else ""), _fmt(r["p_detect"], 3),
                      _fmt(r["p_detect_measured"], 3), _fmt(r["slash"], 1), _fmt(r["gain"], 1),
                      _fmt(r["expected_profit"], 1))
    Console().print(table)
    for r in result["figures"]["rows"]:
        if r["note"]:
            Console().print(f"* {r['attack']}: {r['note']}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks trust")
    ap.add_argument("--quick", action="store_true", help="fewer measured trials")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--validators", type=int, default=None, help="default: the devnet's")
    ap.add_argument("--miners", type=int, default=None, help="default: the devnet's")
    args = ap.parse_args(argv)
    result = run(args.quick, args.validators, args.miners)
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0
