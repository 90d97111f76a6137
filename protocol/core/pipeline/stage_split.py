"""Which parameters each pipeline stage holds (torch-free: from `model.config.layout`).

A model of L blocks splits into S contiguous stages, 2 <= S <= L, each holding at least one block:
the embeddings (GPT's token and position tables, Llama's token table) go with the first stage, the
final norm and the head with the last. The blocks are cut where the largest stage holds the fewest
parameters (embeddings and head counted), the earliest such cut on a tie, so every node derives
the same split from the config alone. A Llama with tied embeddings is refused: its one table would
be the first stage's input and the last stage's head, so two stages would train one tensor; set
`tie_embeddings = false` and the head is a tensor of the last stage like any other. Parameter names
stay the whole model's, so a stage's state is a slice of the whole state by name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from protocol.core.errors import ConfigError
from protocol.core.model.config import LlamaConfig, ModelConfig, Shapes, layout

# the most stages a run may have: a pipeline's pay is split among its stages on chain, one loop each
MAX_STAGES = 32
_BLOCK = re.compile(r"^(?:h|layers)\.(\d+)\.")


@dataclass(frozen=True)
class StageSplit:
    """The stages of one model: parameter names and block indices per stage, in model order."""

    names: tuple[tuple[str, ...], ...]
    blocks: tuple[range, ...]

    @property
    def count(self) -> int:
        return len(self.names)

    def stage_of(self, name: str) -> int:
        return next(s for s, names in enumerate(self.names) if name in names)

    def shapes(self, cfg: ModelConfig, stage: int) -> Shapes:
        """Stage `stage`'s parameters, name -> shape, in the whole model's order."""
        whole = layout(cfg)
        return {name: whole[name] for name in self.names[stage]}

    def sizes(self, cfg: ModelConfig) -> list[int]:
        """Parameters per stage."""
        return [sum(math.prod(shape) for shape in self.shapes(cfg, s).values()) for s in range(self.count)]


def split_model(cfg: ModelConfig, stages: int) -> StageSplit:
    """The split of `cfg` into `stages` stages (ConfigError when it has none)."""
    return _split(cfg, stages)


@lru_cache(maxsize=32)
def _split(cfg: ModelConfig, stages: int) -> StageSplit:
    if isinstance(cfg, LlamaConfig) and cfg.tie_embeddings:
        raise ConfigError("a staged run needs tie_embeddings = false: a tied table would be trained by the first "
                          "and the last stage at once")
    if not 2 <= stages <= cfg.n_layer:
        raise ConfigError(f"a model of {cfg.n_layer} blocks splits into 2 to {cfg.n_layer} stages, not {stages}")
    whole = layout(cfg)
    first, last, per_block = _edges(whole, cfg.n_layer)
    cuts = _balanced_cuts(cfg.n_layer, stages, per_block, first, last)
    blocks = tuple(range(a, b) for a, b in zip((0, *cuts), (*cuts, cfg.n_layer), strict=True))
    names: list[list[str]] = [[] for _ in range(stages)]
    seen_block = False
    for name in whole:
        match = _BLOCK.match(name)
        if match is None:  # before every block: the embeddings; after them: the final norm and head
            names[-1 if seen_block else 0].append(name)
            continue
        seen_block = True
        names[next(s for s, r in enumerate(blocks) if int(match.group(1)) in r)].append(name)
    return StageSplit(tuple(tuple(n) for n in names), blocks)


def _edges(whole: Shapes, n_layer: int) -> tuple[int, int, int]:
    """(parameters before the blocks, after them, in one block)."""
    before = after = 0
    block = [0] * n_layer
    seen = False
    for name, shape in whole.items():
        size, match = math.prod(shape), _BLOCK.match(name)
        if match is not None:
            seen = True
            block[int(match.group(1))] += size
        elif seen:
            after += size
        else:
            before += size
    return before, after, block[0]


def _balanced_cuts(n_layer: int, stages: int, per_block: int, first: int, last: int) -> tuple[int, ...]:
    """Block indices where stages 1 .. S-1 begin: the largest stage smallest, earliest on a tie."""
    best: tuple[int, tuple[int, ...]] | None = None

    def walk(start: int, left: int, cuts: tuple[int, ...]) -> None:
        nonlocal best
        if left == 1:
            bounds = (0, *cuts, n_layer)
            sizes = [(b - a) * per_block for a, b in zip(bounds, bounds[1:], strict=False)]
            sizes[0] += first
            sizes[-1] += last
            if best is None or max(sizes) < best[0]:
                best = (max(sizes), cuts)
            return
        for cut in range(start + 1, n_layer - left + 2):
            walk(cut, left - 1, (*cuts, cut))

    walk(0, stages, ())
    assert best is not None
    return best[1]
