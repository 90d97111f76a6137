"""Trust rows for pipeline stages (docs/PROTOCOL.md §16.5, §16.6; issue 32).

A pipeline of S stages earns what one miner earns, R; each stage's share is R/S here (equal work),
and a stage miner holds the minimum miner stake. Each stage is checked like a miner: every one of
the V validators of its class challenges q of its n segments, replays them exactly, and checks
that each received hash it committed is signed by its sender.
- **A stage computes wrongly on 1 of n segments** (lazy, or a wrong tensor it sends): caught when
  a validator challenges that segment, p = 1 − (C(n−1, q)/C(n, q))^V; saving (R/S)/n; loses its
  slash S_s = stake · slash_bps + R/S.
- **Two colluding adjacent stages**: the sender sends an activation it did not compute and the
  receiver trains on it consistently. The receiver replays exactly (it computed on what it was
  signed), so only the sender's replay catches it, with the same p; the sender loses S_s and the
  receiver its share of the dropped pipeline, R/S; the pair saves the sender's (R/S)/n.
- **A stage lies about what it received** (commits, for one slot of one segment, a hash its
  sender never signed): caught whenever that segment is challenged, since it cannot show the
  sender's signature, p as above; saving (R/S)/n at most (the value of not waiting for, or of
  swapping, one tensor).
- **A stage sends other tensors than it commits as sent** (it trains and commits honestly, so its
  own replay is exact, and feeds its neighbour another tensor, which the neighbour trains on and
  replays exactly): its neighbour's served segment holds its signature of the other tensor, so it
  is named whenever that segment is challenged (`received_signatures.contradicted_sends`), p as
  above; saving (R/S)/n at most (what it gains is the neighbour's training on its tensor).
- **A stage withholds what it received**: its sender serves the tensors instead (both keep
  them until the round settles); nothing is hidden, nothing gained. Blocked.
- **A stage equivocates** (signs two tensors for one slot): the stage link keeps the first and
  refuses the second (`SlotFilled`), so the receiver trains on one tensor whatever the sender
  does; the pair of signatures is kept as evidence. Nothing gained. Blocked.
- **A stage falls silent mid-round**: its pipeline commits the steps every stage finished and is
  paid for them; the silent stage commits nothing and loses its share. Blocked (−R/S at most,
  counted as 0 gain).

p_detect_measured runs the four detectable attacks through the real code on a 3-stage Llama of
n = 10 one-step segments: the attacked round is recorded (`stage_record.PipelineRecorder`), each
segment is checked once by `stage_replay.replay_stage_segment` (and `misreported_slots` for the
lie, `contradicted_sends` for the fork), and each trial draws V validators' challenges with `proof.challenge.make_challenge`; a trial
counts when one of them challenges a segment whose check fails.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from benchmarks.trust import Params, Row, blocked, confirmed, p_replay, saving

STAGES = 3
N_SEGMENTS = 10  # of the measured round: one step each
LAZY = "lazy stage, 1/10 segments"
COLLUDE = "two colluding adjacent stages (the sender's wrong activation, 1/10 segments)"
LIE = "stage lies about what it received (one slot, 1/10 segments)"
FORK = "stage sends other tensors than it commits as sent (one step, 1/10 segments)"


def stage_slash(p: Params) -> Fraction:
    return Fraction(p.miner_stake * p.slash_bps, 10_000) + p.reward / STAGES


def stage_rows(p: Params) -> list[Row]:
    det = p_replay(p.n_segments, 1, p.q, p.validators) * confirmed(p.validators, 0, p.validators)
    share, slash = p.reward / STAGES, stage_slash(p)
    gain = share / p.n_segments
    pair = Row(COLLUDE, "16.5 sender's replay", "coalition", det, slash + share, gain,
               gain - det * (slash + share), "gain - p*(S_s + R/S)")
    return [
        saving(LAZY, "16.5 stage replay", det, gain, slash),
        pair,
        saving(LIE, "16.6 sender's signature", det, gain, slash),
        saving(FORK, "16.6 neighbour's signatures", det, gain, slash),
        blocked("stage withholds what it received (its sender serves it)", "16.6 rule 5", Fraction(0),
                "0, not negative: nothing is hidden, so nothing is gained"),
        blocked("stage equivocates (two signed tensors for one slot)", "16.4 link keeps the first", Fraction(0),
                "0, not negative: the receiver trains on one tensor; the pair of signatures is kept as evidence"),
        blocked("stage falls silent mid-round", "16.4 steps every stage finished", share,
                None),
    ]


def measure_stages(p: Params, trials: int) -> dict[str, float]:
    """The share of `trials` rounds in which one of p.validators validators challenges a segment
    whose real check fails, per detectable attack."""
    from protocol.core.crypto.hashing import blake3_hash, u64
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.proof.challenge import make_challenge

    failing = _failing_segments()
    cfg = _cfg()
    out = {}
    for attack, (stage, bad) in failing.items():
        caught = 0
        for i in range(trials):
            block = blake3_hash("trust-stage-block", u64(i))
            for j in range(p.validators):
                ident = NodeIdentity(blake3_hash("trust-stage-validator", u64(i), u64(j)))
                if set(make_challenge(ident, 1, bytes([stage + 1]) * 20, block, cfg).segments) & bad:
                    caught += 1
                    break
        out[attack] = caught / trials * confirmed(p.validators, 0, p.validators)
    return out


def _cfg() -> Any:
    from protocol.core.train.compute_config import ComputeConfig

    return ComputeConfig(inner_steps=N_SEGMENTS, checkpoint_every=1, min_inner_steps=N_SEGMENTS)


def _failing_segments() -> dict[str, tuple[int, set[int]]]:
    """attack -> (the stage at fault, the segments whose real check fails)."""
    from protocol.core.pipeline.stage_replay import StageReplayStatus

    lazy = _round(lambda t, mods, rec: _perturb(mods[1]) if t == 4 else None)
    collude = _round(lambda t, mods, rec: mods[1].register_forward_hook(_shift(rec, 8)) if t == 1 else None)
    honest = _round(lambda t, mods, rec: None)

    def failing(records: list[Any], stage: int) -> set[int]:
        return {j for j in range(N_SEGMENTS) if _replay(records[stage], j) is not StageReplayStatus.EXACT}

    assert all(not failing(honest, s) for s in range(STAGES)), "an honest stage failed its replay"
    assert not failing(collude, 2), "the receiver of the colluding pair failed its replay"
    return {LAZY: (1, failing(lazy, 1)), COLLUDE: (1, failing(collude, 1)), LIE: (2, _lied(honest, 2, segment=6)),
            FORK: (1, _forked(honest, 1, segment=7))}


def _round(before_step: Any) -> list[Any]:
    from protocol.core.pipeline.gpipe import fresh_state
    from protocol.core.pipeline.stage_record import PipelineRecorder

    mods = _modules()
    recorder = PipelineRecorder(mods, [fresh_state(m) for m in mods], _cfg(), 2, 1, 0)
    for t, (x, y) in enumerate(_batches(), start=1):
        before_step(t, mods, recorder)
        recorder.step(x, y)
    return recorder.records()


def _model() -> Any:
    from protocol.core.model.config import preset

    return dataclasses.replace(preset("llama-micro"), n_layer=STAGES)


def _modules() -> list[Any]:
    from protocol.core.model.gpt import init_params, load_params
    from protocol.core.pipeline.stage_module import StageModule, stage_params
    from protocol.core.pipeline.stage_split import split_model

    model = _model()
    split, params = split_model(model, STAGES), init_params(model, 0)
    mods = [StageModule(model, split, s) for s in range(STAGES)]
    for s, m in enumerate(mods):
        load_params(m, stage_params(params, split, s))
    return mods


def _batches() -> list[Any]:
    import torch

    model, gen = _model(), torch.Generator().manual_seed(0)
    shape = (4, model.block_size)
    return [(torch.randint(0, model.vocab_size, shape, generator=gen),
             torch.randint(0, model.vocab_size, shape, generator=gen)) for _ in range(N_SEGMENTS)]


def _perturb(module: Any) -> None:
    import torch

    with torch.no_grad():
        next(iter(module.parameters())).view(-1)[0] += 1e-6  # what a skipped computation leaves


def _shift(recorder: Any, step: int) -> Any:
    def hook(_module: Any, _args: Any, out: Any) -> Any:
        return out + 1e-3 if recorder.done == step else None
    return hook


def _replay(record: Any, j: int) -> Any:
    from protocol.core.pipeline.stage_replay import ServedSegment, StageTask, replay_stage_segment
    from protocol.core.pipeline.stage_split import split_model

    steps = record.segment(j)
    served = ServedSegment(record.starts[j], tuple(io.hashes for io in steps), tuple(io.received for io in steps))
    task = StageTask(_model(), split_model(_model(), STAGES), _cfg(), 2, record.seat)
    return replay_stage_segment(task, record.trace, j, served, _batches()[j:j + 1]).status


def _lied(records: list[Any], stage: int, segment: int) -> set[int]:
    """The segments in which `misreported_slots` names `stage`, which commits for one slot of
    `segment` a hash its sender never signed (the senders sign what they really sent)."""
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.pipeline.attribution import Domain
    from protocol.core.pipeline.boundary import Direction, Slot, sign_boundary
    from protocol.core.pipeline.received_signatures import StepSignatures, misreported_slots

    keys, domain = [NodeIdentity.generate() for _ in range(STAGES)], Domain(31337, bytes(20))
    record, found = records[stage], set()
    for j in range(N_SEGMENTS):
        io = record.segment(j)[0]
        step = j + 1

        def sign(sender: int, direction: Direction, hashes: Any, step: int = step) -> tuple[bytes, ...]:
            return tuple(sign_boundary(keys[sender], domain.chain_id, domain.contract,
                                       Slot(1, 0, sender, step, m, direction), h) for m, h in enumerate(hashes))
        sigs = StepSignatures(sign(stage - 1, Direction.FORWARD, io.hashes.received_inputs), ())
        hashes = io.hashes
        if j == segment:
            hashes = dataclasses.replace(hashes, received_inputs=(bytes(32), *hashes.received_inputs[1:]))
        neighbours = (keys[stage - 1].public_key, None)
        if misreported_slots(record.seat, step, [hashes], [sigs], neighbours, domain):
            found.add(j)
    return found


def _forked(records: list[Any], stage: int, segment: int) -> set[int]:
    """The segments in which `contradicted_sends` names `stage`, which committed what it computed
    but sent stage + 1 another activation (signed by it) in one slot of `segment`."""
    from protocol.core.crypto.signing import NodeIdentity
    from protocol.core.pipeline.attribution import Domain
    from protocol.core.pipeline.boundary import Direction, Slot, sign_boundary
    from protocol.core.pipeline.received_signatures import (
        NeighbourSegment,
        StepSignatures,
        contradicted_sends,
    )

    key, domain = NodeIdentity.generate(), Domain(31337, bytes(20))
    sender, receiver, found = records[stage], records[stage + 1], set()
    for j in range(N_SEGMENTS):
        own, got, step = sender.segment(j)[0].hashes, receiver.segment(j)[0].hashes, j + 1
        if j == segment:
            got = dataclasses.replace(got, received_inputs=(bytes(32), *got.received_inputs[1:]))
        sigs = StepSignatures(tuple(sign_boundary(key, domain.chain_id, domain.contract,
                                                  Slot(1, 0, stage, step, m, Direction.FORWARD), h)
                                    for m, h in enumerate(got.received_inputs)), ())
        above = NeighbourSegment([got], [sigs])
        if contradicted_sends(sender.seat, step, [own], key.public_key, (None, above), domain):
            found.add(j)
    return found
