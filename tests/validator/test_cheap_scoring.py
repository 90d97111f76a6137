"""Cheaper scoring keeps its ranking: with `score_batches` = 4 (half of the 8 it was), every
named useless update scores below every honest miner, for several validators' seeds.

The useless updates pass the proof here (`proof_ok`): they stand for a cheater whose faked work
no check happened to land on, so usefulness alone must rank it low. They are a zero update (a
lazy miner that faked every segment), random codes, the honest update's sign flipped, scaled
down 100 times (a free rider's token effort), and honest training from the wrong base model.
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import ft

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.proof.submission import honest
from protocol.core.train.compute_config import ComputeConfig
from protocol.devnet import cheats as adv
from validator.scoring import RoundEntry, usefulness_of

CHEAT = 40


def _useless(ds, theta) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    t = ft.task(CHEAT)
    base = honest(t, ds, theta, None).blob
    return {"zero (lazy, every segment faked)": adv.lazy(t, ds, theta, None, 1.0).blob,
            "noise": adv.noise_blob(t, base), "sign-flip": adv.sign_flip_blob(t, base),
            "scaled 1/100": adv.scale_blob(t, base, 0.01), "wrong base": adv.wrong_base(t, ds, theta, None).blob}


def test_the_default_is_four_batches_per_estimate() -> None:
    assert ComputeConfig().score_batches == 4 and ft.task(0).cfg.score_batches == 4


@pytest.mark.parametrize("seed", [b"v0", b"v1", b"v2"])
def test_every_useless_update_scores_below_every_honest_miner(honest_runs, ds, theta, seed) -> None:  # type: ignore[no-untyped-def]
    entries = [RoundEntry(ft.task(i), i, s.blob, True) for i, s in enumerate(honest_runs)]
    useless = _useless(ds, theta)
    cheat = ft.task(CHEAT)
    names = {}
    for j, (name, blob) in enumerate(useless.items()):
        miner = bytes([200 + j]) * 20
        names[miner] = name
        entries.append(RoundEntry(dataclasses.replace(cheat, miner=miner), 100 + j, blob, True))
    values = {m: u.value for m, u in usefulness_of(entries, ds, theta, blake3_hash("validator-seed", seed)).items()}
    lowest_honest = min(values[ft.task(i).miner] for i in range(len(honest_runs)))
    assert lowest_honest > 0
    ranked_above = {names[m]: v for m, v in values.items() if m in names and v >= lowest_honest}
    assert not ranked_above, (ranked_above, lowest_honest)
    # and by a wide margin, so batch noise cannot reorder them
    assert max(values[m] for m in names) < lowest_honest / 4
