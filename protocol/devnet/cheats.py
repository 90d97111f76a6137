"""Cheating miners, for tests, the detection benchmark and the devnet's `--cheaters`.

Each adversary produces a `Submission` (what a miner commits and serves) from the same
inputs an honest miner has, wrapping the honest functions of the core. `MinerCheat` is
what the CLI and the devnet hand a miner node to make it cheat; a node started without
one never imports this module. Names a miner can be given: lazy, fabricate, wrong-data,
copy, stale, scale, sign-flip, nan, noise, withhold, withhold-challenger; small-batch, not-derived, wrong-base,
ef-inject and moment-inject are used by the tests and the detection benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from protocol.core.crypto.hashing import blake3_hash, seed_int
from protocol.core.errors import ConfigError
from protocol.core.model.gpt import Params, build_model, init_params, num_params
from protocol.core.proof.envelope import decode_envelope
from protocol.core.proof.submission import Submission, honest, submit
from protocol.core.proof.trace import carry_hash
from protocol.core.proof.work import MinerWork, build_work, derive_update
from protocol.core.train.compress import Compressed, decode_update, encode_update, expected_header
from protocol.core.train.data import Dataset, sample_distinct
from protocol.core.train.training import (
    Carry,
    RoundTask,
    TrainedRound,
    batch_fn,
    fresh_checkpoint,
    run_steps,
    task_pages,
    train_round,
    zero_carry,
)
from protocol.core.wire.blob_caps import BlobKind
from protocol.core.wire.messages import PartName

# ---------------------------------------------------------------------------------------
# proof cheats: caught by replay, derivation or unavailability


def faked_segments(task: RoundTask, fraction: float) -> list[int]:
    n = task.cfg.n_segments
    count = max(1, round(fraction * n))
    return sorted(sample_distinct(blake3_hash("lazy", task.seed), range(n), count))


def lazy(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
         fraction: float = 0.5) -> Submission:
    """Skips the steps of a fraction of segments, extrapolating their end checkpoints."""
    fake = set(faked_segments(task, fraction))
    model, batches = build_model(task.model), batch_fn(task, ds)
    ckpts, losses = [fresh_checkpoint(task, theta, carry)], list[float]()
    k = task.cfg.checkpoint_every
    for s in range(task.cfg.n_segments):
        start = ckpts[-1]
        if s in fake:
            prev = ckpts[-2] if len(ckpts) > 1 else start
            params = {n: 2 * start.params[n] - prev.params[n] for n in start.params}
            ckpts.append(replace(start, step=start.step + k, params=params, ef=None))
            losses += [losses[-1] if losses else 5.5] * k
        else:
            end, seg = run_steps(model, start, k, batches, task.cfg)
            ckpts.append(end)
            losses += seg
    return submit(task, build_work(task, TrainedRound(ckpts, losses), theta))


def fabricate(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
              leaf: int = 1) -> Submission:
    """Replaces checkpoint `leaf` by a random one and trains on from it."""
    trained = train_round(task, ds, theta, carry)
    ckpts = list(trained.checkpoints[:leaf])
    rand = init_params(task.model, seed_int(task.seed, 99) % 1000)
    ckpts.append(replace(trained.checkpoints[leaf], params=rand))
    model, k = build_model(task.model), task.cfg.checkpoint_every
    for _ in range(leaf, task.cfg.n_segments):
        ckpts.append(run_steps(model, ckpts[-1], k, batch_fn(task, ds), task.cfg)[0])
    return submit(task, build_work(task, TrainedRound(ckpts, trained.losses), theta))


def wrong_data(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None) -> Submission:
    """Trains on pages other than the assigned ones."""
    mine = set(task_pages(task, ds))
    other = [p for p in ds.train_pages if p not in mine][: len(mine)]
    batches = batch_fn(task, ds, pages=other)
    return submit(task, build_work(task, train_round(task, ds, theta, carry, batches), theta))


def small_batch(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None) -> Submission:
    """Trains with half the configured batch size."""
    batches = batch_fn(task, ds, batch_size=max(1, task.cfg.batch_size // 2))
    return submit(task, build_work(task, train_round(task, ds, theta, carry, batches), theta))


def wrong_base(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None) -> Submission:
    """Trains (honestly) from a model other than θ_r."""
    other = init_params(task.model, 12345)
    trained = train_round(task, ds, other, carry)
    return submit(task, build_work(task, trained, other))


def ef_inject(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
              payload: Tensor | None = None) -> Submission:
    """Puts an arbitrary error-feedback buffer at leaf 0 to smuggle in an update."""
    n = num_params(task.model)
    inject = payload if payload is not None else torch.full((n,), 0.05)
    base = carry if carry is not None else zero_carry(task.model)
    return honest(task, ds, theta, Carry(inject, base.second_moment))


def moment_inject(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
                  scale: float = 1e-6) -> Submission:
    """Starts from a second moment other than the committed one: a tiny one makes every
    AdamW step huge, a large one freezes training."""
    base = carry if carry is not None else zero_carry(task.model)
    fake = {k: torch.full_like(t, scale) for k, t in base.second_moment.items()}
    return honest(task, ds, theta, Carry(base.residual, fake))


class RefuseFirstAsker:
    """A checkpoint source that refuses each faked segment's checkpoints to the first peer
    that asks (the validator whose challenge picked that segment), every time that peer asks,
    and serves them to everyone else (the voters on its report). Rule 1 of docs/PROTOCOL.md is
    what makes this lose."""

    def __init__(self, inner: Any, hidden: Callable[[int], frozenset[int]]) -> None:
        self.inner, self.hidden = inner, hidden
        self._first: dict[tuple[int, bytes, int], bytes] = {}

    def get_checkpoint(self, round_: int, trace_root: bytes, index: int, part: PartName = "all",
                       asker: bytes = b"") -> Any:
        key = (round_, bytes(trace_root), index)
        if index in self.hidden(round_) and self._first.setdefault(key, asker) == asker:
            return None
        return self.inner.get_checkpoint(round_, trace_root, index, part, asker)


class RefuseFirstRequest:
    """An honest miner's checkpoint source that is slow once a round: it refuses the first
    checkpoint anyone asks for (one validator's check fails on it) and serves everything after.
    The report that validator files is void and the miner keeps its stake and its pay."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._rounds: set[int] = set()

    def get_checkpoint(self, round_: int, trace_root: bytes, index: int, part: PartName = "all",
                       asker: bytes = b"") -> Any:
        if round_ not in self._rounds:
            self._rounds.add(round_)
            return None
        return self.inner.get_checkpoint(round_, trace_root, index, part, asker)


def withhold(task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
             fraction: float = 0.5) -> Submission:
    """A lazy miner that refuses to serve both checkpoints around each segment it faked."""
    sub = lazy(task, ds, theta, carry, fraction)
    hidden = frozenset(leaf for s in faked_segments(task, fraction) for leaf in (s, s + 1))
    return replace(sub, withheld=hidden)


# ---------------------------------------------------------------------------------------
# update cheats: honest trace, committed blob not derived from it


def _edit_blob(task: RoundTask, blob: bytes, edit: Callable[[Compressed], Compressed]) -> bytes:
    want = expected_header(num_params(task.model), task.cfg.chunk, task.cfg.topk, task.cfg.bits)
    return encode_update(edit(decode_update(blob, want)))


def scale_blob(task: RoundTask, blob: bytes, factor: float = 100.0) -> bytes:
    return _edit_blob(task, blob, lambda c: replace(c, scale=c.scale * factor))


def sign_flip_blob(task: RoundTask, blob: bytes) -> bytes:
    def flip(c: Compressed) -> Compressed:
        if c.header.bits == 8:
            return replace(c, codes=-c.codes)
        return replace(c, codes=torch.bitwise_not(c.codes))  # 2-bit code q -> 3 - q, levels negate
    return _edit_blob(task, blob, flip)


def nan_blob(task: RoundTask, blob: bytes) -> bytes:
    def poison(c: Compressed) -> Compressed:
        scale = c.scale.clone()
        scale[0] = float("nan")
        return replace(c, scale=scale)
    return _edit_blob(task, blob, poison)


def noise_blob(task: RoundTask, blob: bytes, seed: int = 0) -> bytes:
    gen = torch.Generator().manual_seed(seed)

    def noise(c: Compressed) -> Compressed:
        codes = torch.randint(0, 256, c.codes.shape, generator=gen, dtype=torch.int64)
        return replace(c, codes=codes.to(c.codes.dtype))
    return _edit_blob(task, blob, noise)


def perturb_blob(task: RoundTask, blob: bytes, rel: float = 0.01) -> bytes:
    """A lightly perturbed copy: every scale nudged by `rel`."""
    return _edit_blob(task, blob, lambda c: replace(c, scale=c.scale * (1 + rel)))


def not_derived(task: RoundTask, work: MinerWork) -> bytes:
    """An update derived from the second-to-last checkpoint instead of the final one."""
    theta = work.checkpoints[0].params
    ef = work.checkpoints[0].ef
    assert ef is not None
    return derive_update(theta, work.checkpoints[-2].params, ef, task.cfg)[0]


def carry_of(sub: Submission) -> Carry:
    """What an honest miner carries into the next round (its hash is in the trace)."""
    assert sub.carry is not None and carry_hash(sub.carry) == sub.trace.carry_hash
    return sub.carry


# ---------------------------------------------------------------------------------------
# what a miner node is handed to cheat (devnet --cheaters, `veritrain miner --cheat`)

BLOB_EDITS: dict[str, Callable[[RoundTask, bytes], bytes]] = {
    "scale": scale_blob, "sign-flip": sign_flip_blob, "nan": nan_blob, "noise": noise_blob}
COPIES = ("copy", "stale")  # submit another miner's (copy) or one's own (stale) earlier update
SLOW = "serve-late"  # honest work, refuses its first checkpoint request of each round
CHEATS = ("lazy", "fabricate", "wrong-data", *COPIES, *BLOB_EDITS, "withhold", "withhold-challenger", SLOW)


@dataclass(frozen=True)
class MinerCheat:
    """A miner's dishonest behaviour, by name. It travels to the worker process (it pickles),
    and satisfies `miner.cheat.Cheat`."""

    name: str
    fraction: float | None = None  # share of segments a lazy/withhold cheater fakes (None = all)

    def __post_init__(self) -> None:
        if self.name not in CHEATS:
            raise ConfigError(f"unknown cheat {self.name!r}; choose from {', '.join(CHEATS)}")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise ConfigError("cheat fraction must be in (0, 1]")

    def checkpoint_source(self, node: Any) -> Any:
        """What the miner serves checkpoints from: its data dir, or for `withhold-challenger`
        one that refuses each faked segment's ends to the first asker."""
        if self.name == SLOW:
            return RefuseFirstRequest(node.data)
        if self.name != "withhold-challenger":
            return node.data
        fraction = self.fraction if self.fraction is not None else 1.0

        def hidden(r: int) -> frozenset[int]:
            task = RoundTask(node.setup.run_seed, r, bytes.fromhex(node.address[2:]), node.setup.model,
                             node.setup.compute)
            return frozenset(leaf for s in faked_segments(task, fraction) for leaf in (s, s + 1))

        return RefuseFirstAsker(node.data, hidden)

    async def foreign_update(self, node: Any, r: int) -> bytes | None:
        """What a copy/stale cheater submits: another miner's (or its own) earlier update,
        fetched by the miner node before training."""
        if self.name not in COPIES or r == 0:
            return None
        commits = await node.commits(r - 1)
        others = [m for m in commits if m != node.address] if self.name == "copy" else [node.address]
        for m in others:
            if m in commits and (blob := await node.fetch_blob(commits[m][0], BlobKind.UPDATE, first=m)) is not None:
                return decode_envelope(blob, node.caps.update).update
        return None

    def submit(self, task: RoundTask, ds: Dataset, theta: Params, carry: Carry | None,
               foreign_update: bytes | None) -> Submission:
        """The round's submission, computed in the worker in place of the honest one."""
        fraction = self.fraction if self.fraction is not None else 1.0
        if self.name == "lazy":
            return lazy(task, ds, theta, carry, fraction)
        if self.name == "withhold":
            return withhold(task, ds, theta, carry, fraction)
        if self.name == "withhold-challenger":  # fakes like `lazy`, withholds only when serving
            return lazy(task, ds, theta, carry, fraction)
        if self.name == "fabricate":
            return fabricate(task, ds, theta, carry)
        if self.name == "wrong-data":
            return wrong_data(task, ds, theta, carry)
        base = honest(task, ds, theta, carry)
        if self.name in BLOB_EDITS:
            return replace(base, blob=BLOB_EDITS[self.name](task, base.blob))
        return replace(base, blob=foreign_update or base.blob)  # copy, stale
