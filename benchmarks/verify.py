"""Validator cost and detection power at the defaults (H=30, k=3, q=1).

    python -m benchmarks verify [--quick] [--json PATH]

- cost_ratio: validator work per miner / the miner's training work. Validator work is the
  replay of q segments, the leaf-0 and derivation checks, and usefulness scoring; the
  held-out loss of θ_r, shared by every miner, is counted once per round (target <= 0.5).
- replay_ratio: the replay and checks alone (target <= 0.15). The replay hashes the full state
  after every inner step for the replay witness, and the witness itself is computed, both
  inside the timed check.
- audit_ratio: proof-of-replay audits (docs/PROTOCOL.md §15) per miner, over the miner's
  training work:
      audit_ratio = A * t_audit / (n_miners * t_train),  A = (V - 1) * min(audit_sample, n_miners)
  A is the audit replays one validator makes per round (`witness.audit_picks` over V - 1 other
  validators, each of which checked every miner), t_audit the cost of one audit replay: the q
  challenged segments replayed from their served start checkpoints (decoded and hash-checked;
  exact mode needs no end leaf), inner hashes and the recomputed witness. Defaults: V = 3
  validators, audit_sample = 1 (ChainParams), n_miners = 4 (the devnet default), so A = 2
  (target <= 0.10). audit_replay_ratio = t_audit / t_train (>= q*k/H = 0.10) is one audit
  replay, so audit_ratio = A * audit_replay_ratio / n_miners: it meets 0.10 once
  n_miners >= 10 * A * audit_replay_ratio (A stays 4 for n_miners >= 2). The table also gives
  audit_ratio at 8 miners.
- detection: rate at which one q=1 validator catches a lazy miner that faked a fraction f of
  its 10 segments, from real replays, next to the exact hypergeometric value.
- false_positive_rate: honest miners flagged by full checks (target exactly 0).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.overhead import corpus_slice
from protocol.config.run_config import ChainParams
from protocol.core.crypto.hashing import blake3_hash, u64
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.observe import observe_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import (
    LanguageModel,
    Params,
    build_model,
    init_params,
    num_params,
    preset,
)
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.derivation import verify_update_derivation
from protocol.core.proof.replay import ReplayStatus, replay_segment
from protocol.core.proof.submission import honest, submit
from protocol.core.proof.trace import Trace, zero_carry_hash
from protocol.core.proof.verdict import judge, verify_submission
from protocol.core.proof.witness import audit_picks, audit_segments, replay_witness, witness_for
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.data import Dataset, heldout_batches
from protocol.core.train.training import RoundTask, train_round
from protocol.devnet import cheats as adv
from protocol.devnet.network import DevnetOptions
from protocol.node.profile_setup import apply_profile
from validator.scoring import GauntletUsefulness, mean_loss, own_batches

FRACTIONS = (0.1, 0.25, 0.5, 1.0)
AUDIT_VALIDATORS = DevnetOptions().validators  # V: validators per round (the devnet default, 3)
AUDIT_SAMPLE = ChainParams().audit_sample  # miners per other validator an auditor replays
AUDIT_MINERS = DevnetOptions().miners  # miners per round (the devnet default, 4), each checked by every validator
VALIDATOR = b"\x11" * 20  # the benchmark validator's address (its node key is \x11 * 32)


def _task(model_name: str, i: int, cfg: ComputeConfig) -> RoundTask:
    return RoundTask(b"bench", 1, bytes([i + 1]) * 20, preset(model_name), cfg)


def miner_costs(t: RoundTask, ds: Dataset, theta: Params, profile: ReplayProfile,
                heldout: list, held_before: float) -> dict[str, float]:  # type: ignore[type-arg]
    start = time.perf_counter()
    trained = train_round(t, ds, theta, None)
    train_s = time.perf_counter() - start
    from protocol.core.proof.work import build_work

    sub = submit(t, build_work(t, trained, theta))
    ch = make_challenge(NodeIdentity(b"\x11" * 32), 1, t.miner, b"\x22" * 32, t.cfg)
    blobs = {i: sub.fetch(i, t) for i in {0, t.cfg.n_segments, *ch.segments,
                                          *(s + 1 for s in ch.segments)}}
    carry0 = zero_carry_hash(t.model)
    start = time.perf_counter()
    d = verify_update_derivation(t, sub.trace, theta, carry0, blobs[0], blobs[t.cfg.n_segments],
                                 sub.blob)
    model = build_model(t.model)
    replays = [replay_segment(t, ds, sub.trace, s, blobs[s], blobs[s + 1], profile, model=model)
               for s in ch.segments]
    witness = witness_for(VALIDATOR, ch.signature, 1, t.miner, replays)
    check_s = time.perf_counter() - start
    assert not d.failures and all(r.status is ReplayStatus.MATCH for r in replays)
    audit_s = audit_cost(t, ds, sub.trace, blobs, ch.signature, witness, profile, model)
    start = time.perf_counter()
    from protocol.core.train.compress import decode_update, decompress, expected_header

    want = expected_header(num_params(t.model), t.cfg.chunk, t.cfg.topk, t.cfg.bits)
    delta = decompress(decode_update(sub.blob, want))
    own = own_batches(ds, t, ch.seed, t.cfg.score_batches)
    GauntletUsefulness().evaluate(model, theta, delta, own, heldout, held_before)
    score_s = time.perf_counter() - start
    return {"train_s": train_s, "check_s": check_s, "score_s": score_s, "audit_s": audit_s}


def audit_cost(t: RoundTask, ds: Dataset, trace: Trace, start_blobs: dict[int, bytes | None],
               sig: bytes, witness: bytes, profile: ReplayProfile, model: LanguageModel) -> float:
    """Seconds for another validator to audit this witness: the segments σ picked, replayed
    from their served (decoded, hash-checked) start checkpoints, and the witness recomputed.
    In exact mode the committed end hash decides the replay, so the end leaf is not needed."""
    start = time.perf_counter()
    segments = audit_segments(sig, t.cfg)
    rs = [replay_segment(t, ds, trace, s, start_blobs[s], None, profile, model=model)
          for s in segments]
    again = replay_witness(VALIDATOR, sig, 1, t.miner, segments,
                           [h for r in rs for h in r.inner_hashes])
    audit_s = time.perf_counter() - start
    assert again == witness
    assert all(r.actual_hash == r.expected_hash and r.losses_match for r in rs)
    return audit_s


def audits_per_validator(validators: int, sample: int, n_miners: int) -> int:
    """A: the audit replays one validator makes per round, from `audit_picks` itself."""
    names = [f"0x{i:040x}" for i in range(1, validators + 1)]
    miners = [f"0x{0xA0 + i:040x}" for i in range(n_miners)]
    return len(audit_picks(b"\x00" * 64, dict.fromkeys(names, miners), names[0], sample))


def cost_figures(model_name: str, n_miners: int, ds: Dataset,
                 profile: ReplayProfile) -> dict[str, object]:
    cfg = ComputeConfig()
    mcfg = preset(model_name)
    theta = init_params(mcfg, 0)
    start = time.perf_counter()
    heldout = heldout_batches(ds, b"validator", cfg.score_batches, cfg.batch_size, mcfg.block_size)
    held_before = mean_loss(build_model(mcfg), theta, heldout)
    shared_s = time.perf_counter() - start
    rows = [miner_costs(_task(model_name, i, cfg), ds, theta, profile, heldout, held_before)
            for i in range(n_miners)]
    cost = [(r["check_s"] + r["score_s"] + shared_s / n_miners) / r["train_s"] for r in rows]
    replay = [r["check_s"] / r["train_s"] for r in rows]
    audits = audits_per_validator(AUDIT_VALIDATORS, AUDIT_SAMPLE, AUDIT_MINERS)
    per_replay = statistics.median(r["audit_s"] / r["train_s"] for r in rows)
    audits8 = audits_per_validator(AUDIT_VALIDATORS, AUDIT_SAMPLE, 8)
    return {"cost_ratio": statistics.median(cost), "replay_ratio": statistics.median(replay),
            "audit_ratio": audits * per_replay / AUDIT_MINERS, "audit_replay_ratio": per_replay,
            "audit_ratio_8_miners": audits8 * per_replay / 8, "audits_per_validator": audits,
            "rows": rows, "shared_heldout_s": shared_s}


def hypergeometric(n: int, m: int, q: int) -> float:
    """P(at least one of q distinct challenged segments among m faked out of n)."""
    return 1 - math.comb(n - m, q) / math.comb(n, q)


def detection(ds: Dataset, profile: ReplayProfile, trials: int) -> list[dict[str, float]]:
    cfg = ComputeConfig()  # 10 segments, q = 1
    theta = init_params(preset("micro"), 0)
    model = build_model(preset("micro"))
    out = []
    for j, f in enumerate(FRACTIONS):
        t = _task("micro", 50 + j, cfg)
        sub = adv.lazy(t, ds, theta, None, f)
        m = len(adv.faked_segments(t, f))
        caught = 0
        for i in range(trials):
            ident = NodeIdentity(blake3_hash("bench-validator", u64(i)))
            ch = make_challenge(ident, 1, t.miner, blake3_hash("B", u64(i)), cfg)
            rs = [replay_segment(t, ds, sub.trace, s, sub.fetch(s, t), sub.fetch(s + 1, t),
                                 profile, model=model) for s in ch.segments]
            caught += any(r.status is ReplayStatus.MISMATCH for r in rs)
        out.append({"f": f, "faked": m, "trials": trials, "measured": caught / trials,
                    "exact": hypergeometric(cfg.n_segments, m, cfg.segments_per_validator)})
    return out


def false_positives(ds: Dataset, profile: ReplayProfile, miners: int, validators: int) -> float:
    cfg = ComputeConfig(batch_size=4)
    theta = init_params(preset("micro"), 0)
    flagged = total = 0
    carry0 = zero_carry_hash(preset("micro"))
    for i in range(miners):
        t = _task("micro", 100 + i, cfg)
        sub = honest(t, ds, theta, None)
        for v in range(validators):
            ch = make_challenge(NodeIdentity(bytes([v + 1]) * 32), 1, t.miner, b"\x33" * 32, cfg)
            res = verify_submission(t, ds, theta, carry0, sub.root, sub.trace, sub.blob,
                                    lambda leaf, s=sub, tt=t: s.fetch(leaf, tt), ch.segments,
                                    profile)
            flagged += judge(res).kind is not None
            total += 1
    return flagged / total


def measure(quick: bool) -> dict[str, object]:
    profile = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    apply_profile(profile)
    ds = corpus_slice(600_000)
    model_name = "micro" if quick else "tiny"
    costs = cost_figures(model_name, 2 if quick else 3, ds, profile)
    det = detection(ds, profile, 12 if quick else 50)
    fpr = false_positives(ds, profile, 2 if quick else 10, 5)
    return {
        "figures": {"cost_ratio": costs["cost_ratio"], "replay_ratio": costs["replay_ratio"],
                    "audit_ratio": costs["audit_ratio"],
                    "audit_replay_ratio": costs["audit_replay_ratio"],
                    "audit_ratio_8_miners": costs["audit_ratio_8_miners"],
                    "detection": {str(d["f"]): d["measured"] for d in det},
                    "false_positive_rate": fpr},
        "detection_cells": det, "costs": costs,
        "config": {"preset": model_name, "inner_steps": 30, "checkpoint_every": 3, "q": 1,
                   "threads": profile.threads, "validators": AUDIT_VALIDATORS,
                   "audit_sample": AUDIT_SAMPLE, "miners": AUDIT_MINERS,
                   "audits_per_validator": costs["audits_per_validator"]},
        "targets": {"cost_ratio": 0.5, "replay_ratio": 0.15, "audit_ratio": 0.10,
                    "false_positive_rate": 0.0},
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks verify")
    ap.add_argument("--quick", action="store_true", help="micro preset, fewer trials")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    result = measure(args.quick)
    fig = result["figures"]
    table = Table(title="validator cost and detection (H=30, k=3, q=1)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("target / exact", justify="right")
    table.add_row("cost_ratio", f"{fig['cost_ratio']:.3f}", "<= 0.5")  # type: ignore[index]
    table.add_row("replay_ratio", f"{fig['replay_ratio']:.3f}", "<= 0.15")  # type: ignore[index]
    cfg = result["config"]
    table.add_row(f"audit_ratio ({cfg['audits_per_validator']} audits/validator/round, "  # type: ignore[index]
                  f"{cfg['miners']} miners)", f"{fig['audit_ratio']:.3f}", "<= 0.10")  # type: ignore[index]
    table.add_row("audit_ratio (8 miners)", f"{fig['audit_ratio_8_miners']:.3f}", "<= 0.10")  # type: ignore[index]
    table.add_row("audit_replay_ratio (one audit replay)",
                  f"{fig['audit_replay_ratio']:.3f}", ">= q*k/H = 0.10")  # type: ignore[index]
    for d in result["detection_cells"]:  # type: ignore[attr-defined]
        table.add_row(f"detection f={d['f']} ({d['faked']} seg, {d['trials']} trials)",
                      f"{d['measured']:.2f}", f"{d['exact']:.2f}")
    table.add_row("false_positive_rate", f"{fig['false_positive_rate']:.3f}", "0")  # type: ignore[index]
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0
