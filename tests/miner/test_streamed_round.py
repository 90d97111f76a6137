"""The miner's streamed round is the honest round bit for bit, one checkpoint in memory at a time."""

from __future__ import annotations

import fixtures_training as ft
import pytest

from miner.checkpoint_files import store_checkpoint
from protocol.core.checkpoint.format import encode_checkpoint
from protocol.core.crypto.hashing import content_hash
from protocol.core.proof.submission import honest, honest_streamed
from protocol.core.proof.trace import carry_hash
from protocol.devnet import cheats as adv


@pytest.fixture(scope="module")
def inputs():  # type: ignore[no-untyped-def]
    ft.apply_test_profile()
    return ft.corpus(), ft.theta0()


@pytest.mark.parametrize("warm", [False, True])
def test_the_streamed_round_commits_what_the_honest_round_commits(inputs, tmp_path, warm) -> None:  # type: ignore[no-untyped-def]
    ds, theta = inputs
    t = ft.task(3)
    carry = adv.carry_of(honest(ft.task(3, round_=1), ds, theta, None)) if warm else None
    want = honest(t, ds, theta, carry)
    live: list[int] = []

    def sink(leaf, c, _leaves):  # type: ignore[no-untyped-def]
        live.append(leaf)
        return store_checkpoint(tmp_path, c, t.model)

    got = honest_streamed(t, ds, theta, carry, sink)
    assert got.root == want.root and got.trace == want.trace and got.blob == want.blob
    assert carry_hash(got.carry) == want.trace.carry_hash
    assert live == list(range(t.cfg.n_segments + 1))  # each leaf handed over once, in order
    for leaf, blob_hash in enumerate(got.stored):
        data = (tmp_path / blob_hash.hex()).read_bytes()
        assert data == encode_checkpoint(want.checkpoints[leaf], t.model)  # the bytes a peer is served
        assert content_hash(data) == blob_hash
    assert not list(tmp_path.glob(".partial-*"))


def test_a_failed_write_leaves_no_partial_file(inputs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ds, theta = inputs
    t = ft.task(4)
    ckpt = honest(t, ds, theta, None).checkpoints[0]
    bad = ckpt.__class__(ckpt.step, {**ckpt.params, "oops": object()}, ckpt.exp_avg, ckpt.exp_avg_sq,  # type: ignore[dict-item]
                         ckpt.rng, ckpt.ef, ckpt.warm)
    with pytest.raises(AttributeError):
        store_checkpoint(tmp_path, bad, t.model)
    assert not list(tmp_path.iterdir())


def test_a_round_is_under_final_names_only_once_committed(inputs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from miner.checkpoint_files import CheckpointWriter

    ds, theta = inputs
    t = ft.task(5)
    writer = CheckpointWriter(tmp_path, t.model)
    got = honest_streamed(t, ds, theta, None, writer)
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & {h.hex() for h in got.stored}  # all still temp files: nothing served yet
    writer.commit()
    assert {p.name for p in tmp_path.iterdir()} == {h.hex() for h in got.stored}
    aborted = CheckpointWriter(tmp_path / "b", t.model)
    (tmp_path / "b").mkdir()
    honest_streamed(t, ds, theta, None, aborted)
    aborted.abort()
    assert not list((tmp_path / "b").iterdir())
