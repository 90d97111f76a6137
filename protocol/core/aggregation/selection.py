"""Which updates form θ_{r+1}: a named rule over the round's consensus scores (PROTOCOL.md §13).

The rule's name and its size are consensus parameters (`[training] selection`, `top_g`, in the
run config hash): every node computes the same set from chain data alone, so a node-local
setting can never change the model. A new rule is a pure function here, a name in
`SELECTION_RULES` (the run config refuses any other name) and a test. Torch-free: the config
layer validates names against this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from protocol.core.errors import ConfigError

Rule = Callable[[Mapping[str, int], int], list[str]]  # (miner -> consensus, top_g) -> chosen miners


class UnknownSelectionRule(ConfigError):
    """Raised when a run names a selection rule this build does not know."""


def top_consensus_v1(consensus: Mapping[str, int], top_g: int) -> list[str]:
    """The `top_g` miners with the highest positive consensus (ties: the lower address), in
    address order. A confirmed cheat has consensus 0 in the result, so it is never chosen
    (as Templar's validator aggregates only its top-scored peers)."""
    eligible = sorted(((c, m) for m, c in consensus.items() if c > 0), key=lambda cm: (-cm[0], int(cm[1], 16)))
    return sorted((m for _, m in eligible[:top_g]), key=lambda m: int(m, 16))


SELECTION_RULES: dict[str, Rule] = {"top-consensus-v1": top_consensus_v1}


def check_rule(rule: str) -> str:
    """`rule` itself if this build knows it; UnknownSelectionRule otherwise."""
    if rule not in SELECTION_RULES:
        raise UnknownSelectionRule(f"selection rule {rule!r} is not one of {', '.join(SELECTION_RULES)}")
    return rule


def select_updates(consensus: Mapping[str, int], rule: str, top_g: int) -> list[str]:
    """The miners whose updates are aggregated into θ_{r+1}, by the run's `rule` and `top_g`."""
    if top_g < 1:
        raise ConfigError(f"top_g must be positive, not {top_g}")
    return SELECTION_RULES[check_rule(rule)](consensus, top_g)
