"""Pipeline stages (issue 32): the split, stage modules that compute what the whole model computes,
and each stage's step replayed alone, bit for bit, from the tensors it received."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from protocol.core.errors import ConfigError
from protocol.core.model.config import LlamaConfig, layout, preset
from protocol.core.model.gpt import build_model, init_params, load_params
from protocol.core.pipeline.gpipe import (
    Received,
    StageTraffic,
    fresh_state,
    microbatches,
    pipeline_step,
    stage_step,
)
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig

CFG = ComputeConfig()
THREE = dataclasses.replace(preset("llama-micro"), n_layer=3)  # the smallest Llama of three stages


@pytest.mark.parametrize(("name", "stages"), [("tiny", 2), ("tiny", 3), ("llama-small", 2), ("llama-small", 3)])
def test_every_parameter_is_in_one_stage_the_embeddings_first_and_the_head_last(name: str, stages: int) -> None:
    cfg = preset(name)
    split = split_model(cfg, stages)
    names = [n for stage in split.names for n in stage]
    assert names == list(layout(cfg))  # each once, in the whole model's order: contiguous stages
    assert split.stage_of("lm_head.weight") == stages - 1
    assert split.stage_of("wte.weight" if "wte.weight" in names else "tok_emb.weight") == 0
    assert all(len(r) >= 1 for r in split.blocks)
    sizes = split.sizes(cfg)
    block = sum(s for n, s in ((n, torch.Size(sh).numel()) for n, sh in layout(cfg).items()) if ".0." in n)
    assert max(sizes) - min(sizes) <= block  # balanced to within one block


def test_a_tied_llama_and_impossible_counts_are_refused() -> None:
    tied = LlamaConfig(block_size=32, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, tie_embeddings=True)
    with pytest.raises(ConfigError, match="tie_embeddings = false"):
        split_model(tied, 2)
    with pytest.raises(ConfigError, match="2 to 2 stages"):
        split_model(preset("llama-micro"), 3)
    with pytest.raises(ConfigError, match="not 1"):
        split_model(preset("tiny"), 1)


def modules_for(name: str, stages: int, seed: int = 1) -> list[StageModule]:
    cfg = THREE if name == "three" else preset(name)
    split, params = split_model(cfg, stages), init_params(cfg, seed)
    modules = [StageModule(cfg, split, s) for s in range(stages)]
    for s, module in enumerate(modules):
        assert [n for n, _ in module.named_parameters()] == list(split.names[s])
        load_params(module, stage_params(params, split, s))
    return modules


def batch(name: str, rows: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    cfg, gen = THREE if name == "three" else preset(name), torch.Generator().manual_seed(seed)
    shape = (rows, cfg.block_size)
    return torch.randint(0, cfg.vocab_size, shape, generator=gen), torch.randint(0, cfg.vocab_size, shape, generator=gen)


@pytest.mark.parametrize("name", ["micro", "llama-micro"])
def test_stages_in_a_chain_compute_the_whole_models_loss_bit_for_bit(name: str) -> None:
    cfg = preset(name)
    whole = build_model(cfg)
    load_params(whole, init_params(cfg, 1))
    first, last = modules_for(name, 2)
    x, y = batch(name)
    assert torch.equal(whole(x, y), last(first(x), y))


def run(name: str, stages: int, steps: int, count: int = 4, cheat_at: int | None = None):
    """Train `steps` pipeline steps; keep each stage's start and what it received and sent. With
    `cheat_at`, the middle stage adds 1e-6 to one weight just before that step."""
    modules = modules_for(name, stages)
    states = [fresh_state(m) for m in modules]
    starts = [(copy.deepcopy(m), copy.deepcopy(st)) for m, st in zip(modules, states, strict=True)]
    log: list[tuple[list[StageTraffic], list[Received], torch.Tensor]] = []
    for step in range(1, steps + 1):
        x, y = batch(name, seed=step)
        if step == cheat_at:
            with torch.no_grad():
                next(modules[stages // 2].parameters()).view(-1)[0] += 1e-6
        traffic, received = pipeline_step(modules, states, x, y, count, CFG, step)
        log.append((traffic, received, y))
    return modules, starts, log


def replay(stage: int, starts, log, count: int = 4) -> tuple[StageModule, int | None]:
    """Stage `stage` alone from its start and what it received: its end module, and the first step
    whose sent tensors differ from what it sent (None: none)."""
    module, state = copy.deepcopy(starts[stage][0]), copy.deepcopy(starts[stage][1])
    differs = None
    for step, (traffic, received, y) in enumerate(log, start=1):
        sent = stage_step(module, state, received[stage].inputs, received[stage].grads, microbatches(y, count), CFG,
                          step)
        if differs is None and sent.hashes() != traffic[stage].hashes():
            differs = step
    return module, differs


def test_each_stage_replays_alone_bit_for_bit_from_what_it_received() -> None:
    modules, starts, log = run("three", 3, steps=2)
    for s, module in enumerate(modules):
        again, differs = replay(s, starts, log)
        assert differs is None
        assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), module.state_dict().values(),
                                                     strict=True))


def test_a_stage_that_deviates_is_caught_at_that_step_and_its_honest_neighbours_replay_clean() -> None:
    modules, starts, log = run("three", 3, steps=4, cheat_at=3)
    cheat, first_wrong = replay(1, starts, log)
    assert first_wrong == 3  # its sent activations at step 3 are not what its replay computes
    for honest in (0, 2):  # fed the cheater's tensors, they still did exactly their own work
        again, differs = replay(honest, starts, log)
        assert differs is None
        assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(),
                                                     modules[honest].state_dict().values(), strict=True))


def test_training_through_the_pipeline_lowers_the_loss() -> None:
    modules = modules_for("micro", 2)
    states = [fresh_state(m) for m in modules]
    x, y = batch("micro")
    losses = []
    for step in range(1, 9):
        pipeline_step(modules, states, x, y, 2, CFG, step)
        with torch.no_grad():
            losses.append(float(modules[1](modules[0](x), y)))
    assert losses[-1] < losses[0] - 0.1, losses


def test_a_batch_that_does_not_split_into_the_microbatches_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not split"):
        microbatches(torch.zeros(6, 4), 4)
