"""Drawn auditors (protocol/core/proof/auditor_draw.py): about A auditors per validator, by stake,
whatever the number of validators; an auditor's work stays flat; A = 0 audits everyone; splitting
stake draws no more audits."""

from __future__ import annotations

import math

from protocol.core.proof.auditor_draw import audits, expected_auditors


def seeds(n: int) -> list[bytes]:
    return [i.to_bytes(8, "big") * 8 for i in range(n)]  # stand-ins for the auditors' 64-byte σ_a


def test_a_validator_gets_about_a_auditors_however_many_validators_there_are() -> None:
    for v in (8, 64, 512):
        weights = [100] * v
        counts = [sum(audits(seed, f"0x{k:040x}", 100, 100 * (v - 1), 4) for seed in seeds(v)) for k in range(60)]
        mean = sum(counts) / len(counts)
        assert abs(mean - expected_auditors(weights, 0, 4)) < 4 * math.sqrt(4 / len(counts)) + 0.3, (v, mean)


def test_an_auditors_work_stays_flat_as_validators_grow() -> None:
    for v in (64, 512):
        audited = sum(audits(seeds(1)[0], f"0x{k:040x}", 100, 100 * (v - 1), 4) for k in range(v))
        assert audited < 4 + 4 * math.sqrt(4) + 2  # about A, not v


def test_none_drawn_means_every_validator_audits_every_other() -> None:
    assert all(audits(seed, "0xab", 1, 10**30, 0) for seed in seeds(20))
    assert expected_auditors([5, 5, 5], 1, 0) == 2.0


def test_stake_not_accounts_sets_the_odds_of_auditing() -> None:
    # one auditor of weight 200 against the same stake as two of weight 100: the same expected audits
    whole = sum(audits(seed, f"0x{k:040x}", 200, 10_000, 4) for seed in seeds(30) for k in range(30))
    split = sum(audits(seed, f"0x{k:040x}", 100, 10_000, 4) for seed in seeds(60) for k in range(30))
    assert abs(whole - split) < 4 * math.sqrt(whole + split), (whole, split)
    assert not audits(seeds(1)[0], "0xab", 0, 100, 4)  # no stake, no audits
