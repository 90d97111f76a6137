"""One preset, one role, in a fresh process: what `benchmarks scale` measures.

    python -m benchmarks.scale_roles PRESET ROLE TRIALS DIR

Roles:
- `time`: bare loop and miner round alternated TRIALS times (paired ratios), then one
  validator check and usefulness score of the last miner round, TRIALS times;
- `mem-bare`, `mem-miner`, `mem-validator`: the same work once, with peak resident memory
  measured from just before it starts (Linux `clear_refs` resets the high-water mark), so
  the figure is the work's own memory, not the interpreter's, torch's or the corpus's.

The miner round is the node's own worker function (`miner.work.produce`: training with a
checkpoint every k steps, hashing, compression, the envelope, the checkpoints written to the
blob folder); the check is `validator.work.check_miner` on the parts of the leaves a check
fetches (`validator.checks.needed_leaves`: leaf 0's `ef`, the last leaf's parameters, the
challenged segment's start whole and its end's digest list). Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.overhead import bare_round
from miner.work import MinerJob, MinerOutput, produce
from protocol.config.run_setup import Setup, TrainingSpec
from protocol.config.run_state import load_dataset
from protocol.core.aggregation.state import encoded_state, genesis_state
from protocol.core.checkpoint.part_bytes import CheckpointPart
from protocol.core.crypto.signing import NodeIdentity
from protocol.core.hardware.observe import observe_profile
from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import build_model, num_params
from protocol.core.proof.challenge import make_challenge
from protocol.core.train.data import heldout_batches
from protocol.core.train.training import RoundTask, batch_fn
from protocol.node.checkpoint_part_files import part_view
from protocol.node.profile_setup import apply_profile
from validator.checks import needed_leaves
from validator.scoring import GauntletUsefulness, mean_loss, own_batches
from validator.work import CheckJob, check_miner

RUN_SEED = b"bench-scale"
MINER = "0x" + "01" * 20
SCORED_MINERS = 4  # the held-out loss of θ_r is shared by a round's miners (devnet default: 4)


@dataclass(frozen=True)
class Bench:
    spec: TrainingSpec
    setup: Setup
    state_blob: bytes
    state_hash: bytes
    blob_dir: Path


def bench(preset_name: str, blob_dir: Path) -> Bench:
    profile = ReplayProfile(threads=1, cpu_capability=observe_profile().cpu_capability)
    apply_profile(profile)
    spec = TrainingSpec(preset=preset_name, profile=profile, classes=[profile])
    setup = Setup(spec, RUN_SEED)
    blob, state_hash = encoded_state(genesis_state(setup.model, setup.compute, 0), setup.model)
    load_dataset(spec.dataset)  # cached for the process: not part of any figure
    blob_dir.mkdir(parents=True, exist_ok=True)
    return Bench(spec, setup, blob, bytes(state_hash), blob_dir)


def miner_round(b: Bench) -> MinerOutput:
    job = MinerJob(b.spec, RUN_SEED, 1, MINER, b.state_blob, b.state_hash, None, 1, "0x" + "00" * 20,
                   blob_dir=str(b.blob_dir))
    return produce(job)


def bare(b: Bench) -> float:
    task = RoundTask(RUN_SEED, 1, bytes.fromhex(MINER[2:]), b.setup.model, b.setup.compute)
    theta = genesis_state(b.setup.model, b.setup.compute, 0).params
    return bare_round(build_model(b.setup.model), theta, batch_fn(task, load_dataset(b.spec.dataset)),
                      b.setup.compute)


def _stored_part(src: Path, part: CheckpointPart) -> Path:
    """What a validator's node stores of `src` when it fetches `part`: the bytes the miner's
    data dir serves (`part_view`), streamed to a file beside it."""
    view = part_view(src, part)
    assert view is not None, f"{src.name} holds no {part.value} part"
    if isinstance(view, Path):
        return view
    dst = src.with_name(f"{src.name}.{part.value}")
    with src.open("rb") as f, dst.open("wb") as out:
        out.write(view.head)
        for offset, length in view.ranges:
            f.seek(offset)
            out.write(f.read(length))
    return dst


def check_job(b: Bench, out: MinerOutput) -> CheckJob:
    cfg = b.setup.compute
    ch = make_challenge(NodeIdentity(b"\x11" * 32), 1, bytes.fromhex(MINER[2:]), b"\x22" * 32, cfg)
    wanted = needed_leaves(ch.segments, cfg.n_segments + 1)
    # paths, as a validator's worker is handed what its node stored: each read when checked
    leaves: dict[int, bytes | Path | None] = {
        leaf: _stored_part(b.blob_dir / out.checkpoints[leaf].hex(), part)  # type: ignore[union-attr]
        for leaf, part in wanted.items()}
    return CheckJob(b.spec, RUN_SEED, 1, MINER, b.state_blob, b.state_hash, out.envelope, out.trace_root,
                    None, leaves, ch.segments, 1 << 40)


def score_seconds(b: Bench, out: MinerOutput) -> float:
    """One miner's usefulness (three loss estimates) plus its share of the round's shared one."""
    from protocol.core.proof.envelope import decode_envelope
    from validator.scoring import decode_for_scoring

    model, cfg = b.setup.model, b.setup.compute
    ds = load_dataset(b.spec.dataset)
    theta = genesis_state(model, cfg, 0).params
    net = build_model(model)
    start = time.perf_counter()
    heldout = heldout_batches(ds, b"validator", cfg.score_batches, cfg.batch_size, model.block_size)
    before = mean_loss(net, theta, heldout)
    shared = time.perf_counter() - start
    start = time.perf_counter()
    task = RoundTask(RUN_SEED, 1, bytes.fromhex(MINER[2:]), model, cfg)
    update = decode_for_scoring(task.miner, 0, decode_envelope(out.envelope, 1 << 40).update, model, cfg)
    assert update is not None
    own = own_batches(ds, task, b"validator", cfg.score_batches)
    GauntletUsefulness(cfg.outer_lr, cfg.own_margin, cfg.own_soft_factor).evaluate(
        net, theta, update.dense, own, heldout, before)
    return time.perf_counter() - start + shared / SCORED_MINERS


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def time_role(b: Bench, trials: int) -> dict[str, object]:
    bare(b)  # warm-up: allocator, kernels, the dataset's pages
    miner_round(b)
    bare_s, miner_s = [], []
    out = None
    for _ in range(trials):
        bare_s.append(bare(b))
        seconds, out = _timed(miner_round, b)
        miner_s.append(seconds)
    assert out is not None
    save_output(b.blob_dir, out)
    job = check_job(b, out)
    check_s, score_s = [], []
    for _ in range(trials):
        seconds, outcome = _timed(check_miner, job)
        assert outcome.kind is None, outcome  # an honest round checks clean
        check_s.append(seconds)
        score_s.append(score_seconds(b, out))
    train = statistics.median(miner_s)
    return {
        "params": num_params(b.setup.model),
        "bare_s": bare_s, "miner_s": miner_s, "check_s": check_s, "score_s": score_s,
        "overhead_ratio": statistics.median(m / x for m, x in zip(miner_s, bare_s, strict=True)),
        "cost_ratio": (statistics.median(check_s) + statistics.median(score_s)) / train,
        "bytes_per_check": len(job.envelope) + sum(v.stat().st_size for v in job.leaves.values()
                                                   if isinstance(v, Path)),
    }


def save_output(folder: Path, out: MinerOutput) -> None:
    fields = {"envelope": out.envelope.hex(), "trace_root": out.trace_root.hex(),
              "checkpoints": [None if h is None else h.hex() for h in out.checkpoints],
              "carry": out.carry.hex(), "steps": out.steps}
    (folder / "miner_output.json").write_text(json.dumps(fields))


def load_output(folder: Path) -> MinerOutput:
    f = json.loads((folder / "miner_output.json").read_text())
    return MinerOutput(bytes.fromhex(f["envelope"]), bytes.fromhex(f["trace_root"]),
                       [None if h is None else bytes.fromhex(h) for h in f["checkpoints"]], [], [],
                       bytes.fromhex(f["carry"]), f["steps"], 0.0)


def _resident_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_bytes_of(fn, *args) -> int:  # type: ignore[no-untyped-def]
    """Peak resident memory `fn(*args)` adds over what the process holds when it starts."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to the current RSS
    base = _resident_kib("VmRSS")
    fn(*args)
    return (_resident_kib("VmHWM") - base) * 1024


def mem_role(b: Bench, role: str) -> dict[str, object]:
    if role == "mem-bare":
        return {"peak_bytes": peak_bytes_of(bare, b)}
    if role == "mem-miner":
        return {"peak_bytes": peak_bytes_of(miner_round, b)}
    out = load_output(b.blob_dir)  # the `time` role's last miner round, read from disk
    job = check_job(b, out)
    return {"peak_bytes": peak_bytes_of(lambda: (check_miner(job), score_seconds(b, out)))}


def main(argv: list[str]) -> int:
    preset_name, role, trials, folder = argv[0], argv[1], int(argv[2]), Path(argv[3])
    b = bench(preset_name, folder)
    result = time_role(b, trials) if role == "time" else mem_role(b, role)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
