"""A staged devnet's own rules (docs/PROTOCOL.md §16): its cheating stages and what it refuses
before anything starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from miner.stage_cheat import FORK_NAME, NAME, ForkingStage, LazyStage, StageCheat
from protocol.core.errors import ConfigError

if TYPE_CHECKING:
    from protocol.devnet.network import DevnetOptions

STAGE_CHEATS: dict[str, type[LazyStage] | type[ForkingStage]] = {NAME: LazyStage, FORK_NAME: ForkingStage}


def stage_cheat_of(kind: str) -> StageCheat | None:
    make = STAGE_CHEATS.get(kind)
    return None if make is None else make()


def check_staged(opts: DevnetOptions) -> None:
    """A staged devnet's counts, before anything starts."""
    kinds = {k for k, _ in opts.cheaters}
    staged_kinds = kinds & set(STAGE_CHEATS)
    if not opts.stages:
        if staged_kinds:
            raise ConfigError(f"{', '.join(sorted(staged_kinds))} take a stage seat: give --stages and --pipelines")
        return
    if opts.pipelines < 1:
        raise ConfigError("a staged devnet needs --pipelines 1 or more (stage miners per stage)")
    if kinds - set(STAGE_CHEATS):
        raise ConfigError(f"a staged devnet's cheaters are {', '.join(STAGE_CHEATS)} only, not "
                          f"{', '.join(sorted(kinds - set(STAGE_CHEATS)))}")
    if len(opts.cheaters) >= opts.miner_count or opts.throttled or opts.training.get("fan_in"):
        raise ConfigError("a staged devnet needs an honest stage miner, and takes no --throttled nor --fan-in")
    if opts.lying_validators or opts.lazy_aggregators:  # score audits and trees: not in staged runs (§16.9)
        raise ConfigError("a staged devnet takes --lazy-validators and --silent-validators, not --lying-validators "
                          "nor --lazy-aggregators")
