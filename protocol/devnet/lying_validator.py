"""A validator that checks honestly but reveals a wrong number for every miner it checked and
passed. Half of them, every second in address order, it deflates: it reveals 0 with a blank
witness and files no report, as if the check had failed (a captured committee zeroing an honest
miner). The others it inflates one unit (one below at the top of the scale), the smallest lie
there is. Score audits catch both (validator/score_audits.py: a revealed score is recomputed
bit for bit, and a zero its validator did not report is checked and recomputed); the devnet runs
it with `--lying-validators N` to show that a wrong number loses stake."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from protocol.core.proof.commitment import Commit
from protocol.core.settlement.score_vector import SCORE_MAX
from validator.checks import MinerCheck, check_all, fetch_submissions


@dataclass(frozen=True)
class LyingValidator:
    """Satisfies `validator.cheat.ValidatorCheat`."""

    name: str = "lying-validator"
    deflated: set[str] = field(default_factory=set)  # this round's miners it reveals 0 for

    async def checks(self, node: Any, r: int, commits: dict[str, Commit],
                     seed_block: bytes) -> list[MinerCheck]:
        modes = await node.classes.modes(r, commits, seed_block)
        assigned = {m: c for m, c in commits.items() if modes[m].checks}
        submissions = await fetch_submissions(node, r, assigned)
        checks = await check_all(node, r, commits, seed_block, await node.state_for(r), submissions, modes)
        passed = sorted(c.miner for c in checks if c.mode.checks and c.outcome.kind is None)
        self.deflated.clear()
        self.deflated.update(passed[::2])
        # a deflated miner's witness goes blank, as a failed check's is; no report is filed
        return [replace(c, outcome=replace(c.outcome, inner_hashes=())) if c.miner in self.deflated else c
                for c in checks]

    def revealed(self, scores: dict[str, int]) -> dict[str, int]:
        """Every score it computed for a miner it checked, 0 for a deflated one, else one unit off."""
        return {m: 0 if m in self.deflated else s - 1 if s == SCORE_MAX else s + 1 for m, s in scores.items()}
