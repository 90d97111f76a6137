"""The `link` role of `python -m benchmarks pipeline` (run by `benchmarks.pipeline_roles`):

    python -m benchmarks.pipeline_roles PRESET link STEPS S M

S stages, each on its own libp2p host on 127.0.0.1 in this process, train STEPS steps of the
whole model's batch in M microbatches with the stage miner's round (`miner.stage_round`): every
activation and output gradient goes over the stage link (`/veritrain/stage/1.0.0`, signed and
hashed), the stages run concurrently in one trio nursery, and each stage's `StageDriver` computes
on trio's worker threads (a node runs it in a profile worker process instead).
Returns seconds per step (from the first step's start, connections already open, to the last
stage's last step) and the stage-link payload bytes each stage sent per step (headers, tensors and
status answers, from the link's traffic counters; yamux and Noise framing not counted).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from torch import Tensor

from benchmarks.stage_hosts import hosts
from miner.stage_round import Compute, StageLinks, run_stage_round
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params, load_params
from protocol.core.pipeline.gpipe import fresh_state
from protocol.core.pipeline.stage_driver import StageDriver
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_slots import StageSeat
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.boundary_tensor import boundary_shape
from protocol.p2p.host import split_multiaddr
from protocol.p2p.registry import peer_id_of
from protocol.p2p.stage_inbox import StageInbox
from protocol.p2p.stage_link import STAGE_PROTOCOL_ID, StageSender

ROUND, PIPELINE = 1, 0
WAIT_S = 600.0  # one tensor's wait: a whole llama-small step on shared cores is seconds, never this


class LinkBytes:
    """A `Traffic` that keeps the stage link's payload bytes one node sent."""

    def __init__(self) -> None:
        self.sent = 0

    def bytes_in(self, protocol: str, nbytes: int) -> None:
        pass

    def bytes_out(self, protocol: str, nbytes: int) -> None:
        if protocol == STAGE_PROTOCOL_ID:
            self.sent += nbytes

    def rate_limited(self, limit: str) -> None:
        pass


def _drivers(name: str, batches: list[tuple[Tensor, Tensor]], stages: int, count: int,
             seed: int) -> list[StageDriver]:
    model, cfg = preset(name), ComputeConfig()
    split, params = split_model(model, stages), init_params(model, seed)
    out = []
    for s in range(stages):
        module = StageModule(model, split, s)
        load_params(module, stage_params(params, split, s))
        out.append(StageDriver(module, fresh_state(module), StageSeat(ROUND, PIPELINE, s, stages), cfg, count,
                               batches))
    return out


def _on_thread(driver: StageDriver) -> Compute:
    """The driver's calls on a worker thread: the trio loop keeps serving the link meanwhile."""
    async def compute(method: str, *args: Any) -> Any:
        return await trio.to_thread.run_sync(getattr(driver, method), *args)
    return compute


async def _pipeline(name: str, batches: list[tuple[Tensor, Tensor]], stages: int, count: int,
                    seed: int) -> dict[str, Any]:
    shape = boundary_shape(preset(name), ComputeConfig().batch_size // count)
    drivers = _drivers(name, batches, stages, count, seed)
    counters = [LinkBytes() for _ in range(stages)]
    finished: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with hosts(Path(tmp), stages) as nodes:
            keys = [n.identity.public_key for n in nodes]
            addrs = [[split_multiaddr(n.listen_addr)[0]] for n in nodes]
            links = []
            for s, node in enumerate(nodes):
                inbox = StageInbox(node.config, node.registry, node.limiter, traffic=counters[s])
                inbox.mount(node.host)
                inbox.expect_neighbours(ROUND, PIPELINE, s, keys, shape, len(batches), count)
                sender = StageSender(node.host, node.dialer, node.identity, node.config, traffic=counters[s])
                links.append(StageLinks(inbox, sender, keys, addrs, WAIT_S))
            for s in range(stages - 1):  # a pipeline keeps its connections open from round to round
                await nodes[s].dialer.connect(peer_id_of(keys[s + 1]), addrs[s + 1])

            async def stage(s: int) -> None:
                done = await run_stage_round(drivers[s].seat, len(batches), count, shape, links[s],
                                             _on_thread(drivers[s]), lambda step: finished.append(time.perf_counter()))
                if done.silent is not None:
                    raise RuntimeError(f"stage {s}'s neighbour fell silent: {done.silent}")

            began = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for s in range(stages):
                    nursery.start_soon(stage, s)
    if len(finished) != stages * len(batches):
        raise RuntimeError(f"{len(finished)} of {stages} x {len(batches)} stage steps finished")
    return {"s_per_step": (max(finished) - began) / len(batches),
            "bytes_per_step": [c.sent / len(batches) for c in counters]}


def link(name: str, x: Tensor, y: Tensor, steps: int, stages: int, count: int, seed: int) -> dict[str, Any]:
    """S stages over the link for `steps` steps of the batch (x, y); see the module docstring."""
    try:
        return trio.run(_pipeline, name, [(x, y)] * steps, stages, count, seed)
    except BaseExceptionGroup as group:  # the hosts' nested nurseries: name the first failure last, where it is read
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from group
