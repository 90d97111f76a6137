"""A validator that checks honestly but reveals a wrong score for every miner it checked: one
unit above what it computed (one below at the top of the scale), the smallest lie there is.
Score audits catch it (validator/score_audits.py: a revealed score is recomputed bit for bit);
the devnet runs it with `--lying-validators N` to show that a wrong number loses stake."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.core.proof.commitment import Commit
from protocol.core.settlement.score_vector import SCORE_MAX
from validator.checks import MinerCheck, check_all, fetch_submissions


@dataclass(frozen=True)
class LyingValidator:
    """Satisfies `validator.cheat.ValidatorCheat`."""

    name: str = "lying-validator"

    async def checks(self, node: Any, r: int, commits: dict[str, Commit],
                     seed_block: bytes) -> list[MinerCheck]:
        modes = await node.classes.modes(r, commits, seed_block)
        assigned = {m: c for m, c in commits.items() if modes[m].checks}
        submissions = await fetch_submissions(node, r, assigned)
        return await check_all(node, r, commits, seed_block, await node.state_for(r), submissions, modes)

    def revealed(self, scores: dict[str, int]) -> dict[str, int]:
        """Every score it computed for a miner it checked, one unit off."""
        return {m: s - 1 if s == SCORE_MAX else s + 1 for m, s in scores.items()}
