"""What the devnet prints while it runs: each round's phase and who has acted in it, and, up
front, how long the run should take.

One line per change (never a spinner redrawn over the lines before it), e.g.
`round 2/5 · commit · committed 3/4 miners`. The expected duration is the start-up and the
seconds a round took in `python -m benchmarks first-run` on 2 cores, by preset; the bound is
every phase running to its deadline."""

from __future__ import annotations

from collections.abc import Callable

from protocol.chain.client import ChainClient, Phase, Role
from protocol.config.run_config import RunConfig

# measured on 2 idle cores by `python -m benchmarks first-run` (docs/BENCHMARKS.md §9): seconds
# from the command to round 1's opening, and per round, for the devnet's default 4 + 3 nodes;
# a preset it did not measure gets only the bound
START_S = 27
ROUND_S = {"micro": 30, "tiny": 41}

# per phase: the role that acts in it, its verb, and how to tell that one account has acted
Acted = Callable[[ChainClient, int, str], bool]
ACTS: dict[Phase, tuple[Role, str, Acted]] = {
    Phase.COMMIT: (Role.MINER, "committed", lambda c, r, a: c.read.rounds.has_committed(r, a)),
    Phase.SCORING: (Role.VALIDATOR, "scored", lambda c, r, a: c.read.scores.scores_committed(r, a)),
    Phase.REVEAL: (Role.VALIDATOR, "revealed", lambda c, r, a: c.read.scores.revealed(r, a)),
    Phase.AUDIT: (Role.VALIDATOR, "audited", lambda c, r, a: c.read.scores.audited(r, a)),
}


def phase_line(admin: ChainClient, accounts: dict[Role, list[str]], round_: int, rounds: int) -> str:
    """`round 2/5 · commit · committed 3/4 miners`: the phase and who has acted in it."""
    phase = admin.phase(round_)
    line = f"round {round_ + 1}/{rounds} · {phase.name.lower()}"
    if phase in ACTS:
        role, verb, acted = ACTS[phase]
        who = accounts[role]
        done = sum(acted(admin, round_, a) for a in who)
        return f"{line} · {verb} {done}/{len(who)} {role.name.lower()}s"
    if phase == Phase.RESULT:
        posted = admin.read.results.has_pending(round_)
        return f"{line} · {'posted, open to challenges' if posted else 'waiting for the certified result'}"
    return line


def expected_line(config: RunConfig, preset: str, rounds: int) -> str:
    """What to expect, said before the run starts."""
    bound = START_S + rounds * config.chain.round_span()
    typical = ROUND_S.get(preset)
    what = f"{rounds} round{'s' * (rounds != 1)} of the {preset} model"
    if typical is None:
        return f"{what}: at most {_span(bound)} (every phase to its deadline)"
    return (f"{what}: about {_span(START_S + rounds * typical)} on 2 idle cores (first round after about "
            f"{START_S} s), at most {_span(bound)} (every phase to its deadline)")


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 180 else f"{seconds / 60:.0f} min"
