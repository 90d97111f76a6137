"""What one pipeline stage needs in memory to train (torch-free): its parameters, their gradients,
AdamW's two moments (4 bytes each, float32), and the activations its backward pass keeps.

Activations: GPipe runs every microbatch forward before any backward, so a stage keeps a whole
batch's worth (B rows of T tokens) for each of its blocks. Per token and block, in float32 values,
we count what autograd keeps: 16 · C for the norms, projections, attention output and residual,
4 · H for the feed-forward's hidden values (H = 4 · C for a GPT, the SwiGLU width for a Llama),
and 2 · n_head · T for attention scores and probabilities (the CPU's attention kernel keeps them).
The first stage adds the embeddings' output, the last the logits (B · T · V). It is an estimate:
`python -m benchmarks pipeline` prints it beside the measured peak (llama-small: 0.9 of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.core.model.config import LlamaConfig, ModelConfig
from protocol.core.pipeline.stage_split import StageSplit

FLOAT = 4  # bytes


@dataclass(frozen=True)
class StageMemory:
    params: int  # bytes of each: parameters, gradients
    moments: int  # AdamW's first and second moments together
    activations: int

    @property
    def total(self) -> int:
        return 2 * self.params + self.moments + self.activations


def activation_values_per_token(cfg: ModelConfig) -> int:
    """Values one block keeps per token for its backward pass."""
    hidden = cfg.hidden if isinstance(cfg, LlamaConfig) else 4 * cfg.n_embd
    return 16 * cfg.n_embd + 4 * hidden + 2 * cfg.n_head * cfg.block_size


def stage_memory(cfg: ModelConfig, split: StageSplit, stage: int, batch_size: int) -> StageMemory:
    """Stage `stage`'s training memory at `batch_size` rows of `cfg.block_size` tokens a step."""
    params = split.sizes(cfg)[stage] * FLOAT
    tokens = batch_size * cfg.block_size
    values = len(split.blocks[stage]) * activation_values_per_token(cfg) * tokens
    if stage == 0:
        values += tokens * cfg.n_embd
    if stage == split.count - 1:
        values += 2 * tokens * cfg.vocab_size  # logits and their softmax
    return StageMemory(params, 2 * params, values * FLOAT)
