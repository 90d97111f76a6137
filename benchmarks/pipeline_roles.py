"""One measurement of `python -m benchmarks pipeline` in a fresh process (so each peak is its own):

    python -m benchmarks.pipeline_roles PRESET whole STEPS
    python -m benchmarks.pipeline_roles PRESET stage STEPS S s M
    python -m benchmarks.pipeline_roles PRESET link STEPS S M

`whole`: the whole model's training (`run_steps`, the miner's loop) for STEPS steps of a full
batch; `stage`: stage s of S alone (`stage_step`) for STEPS steps of the same batch in M
microbatches, fed what it would receive (tokens, or activations and output gradients of the
right shapes); `link`: all S stages on S libp2p hosts in this process, over the stage link
(`benchmarks.pipeline_link`). Prints one JSON line: the peak resident memory the work added over
the process's idle baseline (torch imported; not for `link`), and seconds per step.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from benchmarks.scale_roles import peak_bytes_of
from protocol.core.model.config import preset
from protocol.core.model.gpt import build_model, init_params, load_params
from protocol.core.pipeline.gpipe import fresh_state, microbatches, stage_step
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.train.training import Checkpoint, run_steps

SEED = 7


def _batch(name: str, cfg: ComputeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    model, gen = preset(name), torch.Generator().manual_seed(SEED)
    shape = (cfg.batch_size, model.block_size)
    return torch.randint(0, model.vocab_size, shape, generator=gen), torch.randint(0, model.vocab_size, shape,
                                                                                    generator=gen)


def whole(name: str, steps: int, out: dict) -> None:
    cfg, model = ComputeConfig(), preset(name)
    x, y = _batch(name, cfg)
    params = init_params(model, SEED)
    net = build_model(model)
    load_params(net, params)
    start = Checkpoint(0, params, {k: torch.zeros_like(v) for k, v in params.items()},
                       {k: torch.zeros_like(v) for k, v in params.items()}, torch.Generator().get_state(), None, False)
    began = time.perf_counter()
    run_steps(net, start, steps, lambda step: (x, y), cfg, consume=True)
    out["s_per_step"] = (time.perf_counter() - began) / steps


def stage(name: str, steps: int, stages: int, s: int, count: int, out: dict) -> None:
    cfg, model = ComputeConfig(), preset(name)
    x, y = _batch(name, cfg)
    split = split_model(model, stages)
    module = StageModule(model, split, s)
    load_params(module, stage_params(init_params(model, SEED), split, s))
    state = fresh_state(module)
    gen = torch.Generator().manual_seed(SEED + 1)
    rows = cfg.batch_size // count
    activation = (rows, model.block_size, model.n_embd)
    inputs = microbatches(x, count) if s == 0 else [torch.randn(activation, generator=gen) for _ in range(count)]
    grads = [] if s == stages - 1 else [torch.randn(activation, generator=gen) * 1e-3 for _ in range(count)]
    began = time.perf_counter()
    for step in range(1, steps + 1):
        stage_step(module, state, inputs, grads, microbatches(y, count), cfg, step)
    out["s_per_step"] = (time.perf_counter() - began) / steps


def main(argv: list[str]) -> int:
    name, role, steps = argv[0], argv[1], int(argv[2])
    out: dict = {}
    if role == "link":
        from benchmarks.pipeline_link import link  # libp2p loads only in this role

        out = link(name, *_batch(name, ComputeConfig()), steps, int(argv[3]), int(argv[4]), SEED)
    elif role == "whole":
        out["peak_bytes"] = peak_bytes_of(whole, name, steps, out)
    else:
        out["peak_bytes"] = peak_bytes_of(stage, name, steps, int(argv[3]), int(argv[4]), int(argv[5]), out)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
