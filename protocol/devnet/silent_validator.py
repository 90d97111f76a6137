"""A validator that stays up but is absent from settlement: it checks every miner and commits
its scores, then never reveals them, audits, reports, votes or signs a result. The devnet runs
it with `--silent-validators N` to show that the others settle each round without it and that
it earns nothing."""

from __future__ import annotations

from dataclasses import dataclass

from validator.silence import Duty


@dataclass(frozen=True)
class SilentValidator:
    """Satisfies `validator.silence.ValidatorSilence`."""

    name: str = "silent-validator"

    def skips(self, duty: Duty) -> bool:
        return True  # every duty that settles a round; the checks and the commitment still run
