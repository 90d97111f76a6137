"""A validator that never replays: it scores every served miner as if its check passed and
reveals witnesses it made up. Audits catch it (validator/audits.py); the devnet runs it with
`--lazy-validators N` to show that not checking loses stake."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.core.crypto.hashing import blake3_hash
from protocol.core.proof.challenge import make_challenge
from protocol.core.proof.commitment import Commit
from validator.checks import MinerCheck, fetch_submission
from validator.stage_checks import fetch_stage_submission
from validator.work import CheckOutcome


@dataclass(frozen=True)
class LazyValidator:
    """Satisfies `validator.cheat.ValidatorCheat`."""

    name: str = "lazy-validator"

    async def checks(self, node: Any, r: int, commits: dict[str, Commit],
                     seed_block: bytes) -> list[MinerCheck]:
        out = []
        steps = node.setup.compute.checkpoint_every
        for miner, commit in sorted(commits.items()):
            challenge = make_challenge(node.keys.identity, r, bytes.fromhex(miner[2:]), seed_block,
                                       node.challenge_compute(commit))
            fetch = fetch_stage_submission if node.setup.spec.stages else fetch_submission
            envelope, _ = await fetch(node, r, miner, commit)  # needed to score; no checkpoints
            guessed = tuple(bytes(blake3_hash("guessed-state", challenge.signature, bytes([i]))) for i in range(steps))
            outcome = CheckOutcome(miner, None, None, None, "not checked", None, None, (guessed,))
            out.append(MinerCheck(miner, commit.column, envelope, outcome, challenge, commit.steps))
        return out

    def revealed(self, scores: dict[str, int]) -> dict[str, int]:
        return scores  # it lies about its checks, not about the scores they would give
