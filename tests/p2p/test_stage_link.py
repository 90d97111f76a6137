"""The stage link (issue 32) over real hosts on 127.0.0.1: one pipeline step of a 2-stage micro GPT
across two nodes equals the in-process step bit for bit; every bad tensor is refused with its typed
error while the honest neighbour is still served; a silent neighbour is named when the wait ends."""

from __future__ import annotations

import copy
from functools import partial

import pytest
import torch
import trio

from protocol.core.crypto.signing import NodeIdentity
from protocol.core.model.config import preset
from protocol.core.model.gpt import init_params, load_params
from protocol.core.pipeline.boundary import (
    Direction,
    Signed,
    Slot,
    check_equivocation,
    sign_boundary,
    verify_boundary,
)
from protocol.core.pipeline.gpipe import (
    StageState,
    fresh_state,
    microbatches,
    pipeline_step,
    stage_step,
    tensor_hash,
)
from protocol.core.pipeline.stage_module import StageModule, stage_params
from protocol.core.pipeline.stage_split import split_model
from protocol.core.train.compute_config import ComputeConfig
from protocol.core.wire.boundary_tensor import (
    boundary_hash,
    boundary_shape,
    encode_header,
    header_for,
)
from protocol.core.wire.messages import MalformedMessage
from protocol.p2p import P2PNode
from protocol.p2p.errors import FrameTooLarge, P2PError
from protocol.p2p.host import NET_ERRORS, split_multiaddr
from protocol.p2p.stage_inbox import Arrived, Expectation, Lane, StageInbox
from protocol.p2p.stage_link import (
    PROTOCOL,
    BoundaryShapeMismatch,
    BoundarySignatureInvalid,
    NotNeighbour,
    SlotFilled,
    StageSender,
    StageSilent,
    TensorHashMismatch,
    UnexpectedSlot,
)

from .conftest import CHAIN_ID, CONTRACT, cluster

MODEL = preset("micro")  # block_size 32, n_embd 32
ROWS, COUNT = 8, 2  # a batch of 8 sequences in 2 microbatches
SHAPE = boundary_shape(MODEL, ROWS // COUNT)  # (4, 32, 32): 16 KiB a tensor
ROUND, PIPELINE = 3, 1
CFG = ComputeConfig()
WAIT_S = 10.0  # a stage's wait for a tensor in the honest runs (they take well under a second)


def fwd(m: int, step: int = 1) -> Slot:
    return Slot(ROUND, PIPELINE, 0, step, m, Direction.FORWARD)


def bwd(m: int) -> Slot:
    return Slot(ROUND, PIPELINE, 1, 1, m, Direction.BACKWARD)


def stage_modules() -> list[StageModule]:
    split, params = split_model(MODEL, 2), init_params(MODEL, 1)
    modules = [StageModule(MODEL, split, s) for s in range(2)]
    for s, module in enumerate(modules):
        load_params(module, stage_params(params, split, s))
    return modules


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shape = (ROWS, MODEL.block_size)
    return (torch.randint(0, MODEL.vocab_size, shape, generator=gen),
            torch.randint(0, MODEL.vocab_size, shape, generator=gen))


def raw(t: torch.Tensor) -> bytes:
    return t.detach().to(torch.float32).contiguous().numpy().tobytes()


def tensor_of(arrived: Arrived) -> torch.Tensor:
    return torch.frombuffer(bytearray(arrived.data), dtype=torch.float32).view(arrived.shape)


class Stage:
    """One node's side of the link: its inbox (mounted on the node's host) and its sender."""

    def __init__(self, node: P2PNode) -> None:
        self.node = node
        self.key = node.identity.public_key
        self.inbox = StageInbox(node.config, node.registry, node.limiter)
        self.inbox.mount(node.host)
        self.sender = StageSender(node.host, node.dialer, node.identity, node.config)

    async def send(self, to: Stage, slot: Slot, t: torch.Tensor) -> Signed:
        return await self.sender.send(to.key, slot, raw(t), tuple(t.shape), [split_multiaddr(to.node.listen_addr)[0]])

    async def push(self, to: Stage, slot: Slot, data: bytes, shape: tuple[int, ...], signer: NodeIdentity,
                   signed_hash: bytes | None = None) -> None:
        """A frame as a hostile sender builds it: any bytes, shape and signer."""
        digest = boundary_hash(data) if signed_hash is None else signed_hash
        sig = sign_boundary(signer, CHAIN_ID, CONTRACT, slot, digest)
        await self.sender.push(to.key, header_for(slot, shape, digest, sig), data,
                               [split_multiaddr(to.node.listen_addr)[0]])


async def run_first(me: Stage, last: Stage, module: StageModule, state: StageState, x, y) -> list[Signed]:
    """Stage 0: activations forward, then its step once the gradients are back. Its step recomputes
    the forward pass (GPipe's re-materialisation): what it sent must be what it recomputes."""
    xs, ys = microbatches(x, COUNT), microbatches(y, COUNT)
    acts = await trio.to_thread.run_sync(lambda: [module(xb).detach() for xb in xs])
    sent = [await me.send(last, fwd(m), a) for m, a in enumerate(acts)]
    grads = [tensor_of(await me.inbox.receive(bwd(m), WAIT_S)) for m in range(COUNT)]
    traffic = await trio.to_thread.run_sync(partial(stage_step, module, state, xs, grads, ys, CFG, 1))
    assert [s.tensor_hash for s in sent] == list(traffic.hashes()[0])
    return sent


async def run_last(me: Stage, first: Stage, module: StageModule, state: StageState, y) -> list[Signed]:
    """Stage 1: the activations in, its step, the input gradients back (microbatch M-1 first)."""
    acts = [tensor_of(await me.inbox.receive(fwd(m), WAIT_S)) for m in range(COUNT)]
    ys = microbatches(y, COUNT)
    traffic = await trio.to_thread.run_sync(partial(stage_step, module, state, acts, (), ys, CFG, 1))
    return [await me.send(first, bwd(m), traffic.backward[m]) for m in reversed(range(COUNT))][::-1]


def expect_pipeline(stages: list[Stage], steps: int = 1) -> None:
    keys = [s.key for s in stages]
    for s, stage in enumerate(stages):
        stage.inbox.expect_neighbours(ROUND, PIPELINE, s, keys, SHAPE, steps, COUNT)


@pytest.mark.trio
async def test_one_pipeline_step_over_the_link_equals_the_in_process_step_bit_for_bit(tmp_path):
    modules, x_y = stage_modules(), batch()
    reference = copy.deepcopy(modules)
    ref_traffic, _ = pipeline_step(reference, [fresh_state(m) for m in reference], *x_y, COUNT, CFG, 1)
    states = [fresh_state(m) for m in modules]
    results: dict[int, list[Signed]] = {}
    with trio.fail_after(30):
        async with cluster(tmp_path, 2) as c:
            first, last = stages = [Stage(n) for n in c.nodes]
            expect_pipeline(stages)

            async def run(s: int) -> None:
                results[s] = await (run_first(first, last, modules[0], states[0], *x_y) if s == 0
                                    else run_last(last, first, modules[1], states[1], x_y[1]))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, 0)
                nursery.start_soon(run, 1)
    for module, ref in zip(modules, reference, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(module.state_dict().values(), ref.state_dict().values(),
                                                     strict=True))
    assert [s.tensor_hash for s in results[0]] == [tensor_hash(t) for t in ref_traffic[0].forward]
    assert [s.tensor_hash for s in results[1]] == [tensor_hash(t) for t in ref_traffic[1].backward]
    # each receiver kept the signed hash of every slot, and each verifies as its sender's
    for receiver, sender, slots, sent in ((last, first, map(fwd, range(COUNT)), results[0]),
                                          (first, last, map(bwd, range(COUNT)), results[1])):
        for slot, signed in zip(slots, sent, strict=True):
            assert receiver.inbox.evidence[slot] == (sender.key, signed)
            verify_boundary(sender.key, signed.signature, CHAIN_ID, CONTRACT, slot, signed.tensor_hash)
        assert receiver.inbox.refusals == {}


async def refused(receiver: Stage, error: type[Exception], attempt) -> None:
    """`attempt` is refused with `error` at the sender, counted once at the receiver, nothing kept."""
    before = dict(receiver.inbox.refusals)
    kept = dict(receiver.inbox.evidence)
    with pytest.raises(error):
        await attempt
    counted = {n: k - before.get(n, 0) for n, k in receiver.inbox.refusals.items() if k != before.get(n, 0)}
    assert issubclass(error, P2PError | MalformedMessage) and counted == {error.__name__: 1}
    assert receiver.inbox.evidence == kept


@pytest.mark.trio
async def test_every_bad_tensor_is_refused_typed_and_the_honest_neighbour_is_still_served(tmp_path):
    act = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    with trio.fail_after(30):
        async with cluster(tmp_path, 3) as c:
            honest, receiver, outsider = stages = [Stage(n) for n in c.nodes]
            expect_pipeline(stages[:2], steps=2)
            me = honest.node.identity
            # an admitted peer this stage expects nothing from: refused before its header is read
            await refused(receiver, NotNeighbour, outsider.send(receiver, fwd(0), act))
            # expected in another lane, it still cannot send in the honest neighbour's
            receiver.inbox.expect(Lane(ROUND, PIPELINE + 1, 0, Direction.FORWARD), Expectation(outsider.key, SHAPE, 1, 1))
            await refused(receiver, NotNeighbour, outsider.send(receiver, fwd(0), act))
            big = torch.zeros(2 * SHAPE[0], *SHAPE[1:])
            await refused(receiver, FrameTooLarge, honest.push(receiver, fwd(0), raw(big), tuple(big.shape), me))
            narrow = raw(act)[: len(raw(act)) // 2]
            await refused(receiver, BoundaryShapeMismatch, honest.push(receiver, fwd(0), narrow, (4, 32, 16), me))
            await refused(receiver, UnexpectedSlot, honest.push(receiver, fwd(0, step=3), raw(act), SHAPE, me))
            await refused(receiver, BoundarySignatureInvalid,
                          honest.push(receiver, fwd(0), raw(act), SHAPE, outsider.node.identity))
            tampered = bytearray(raw(act))
            tampered[-1] ^= 1
            await refused(receiver, TensorHashMismatch,
                          honest.push(receiver, fwd(0), bytes(tampered), SHAPE, me, boundary_hash(raw(act))))
            await refused(receiver, MalformedMessage, honest.sender.push(
                receiver.key, header_for(fwd(0), SHAPE, b"\0" * 32, b"\0" * 64).model_copy(update={"dtype": "float16"}),
                raw(act), [split_multiaddr(receiver.node.listen_addr)[0]]))
            # after all that, the honest neighbour's tensor is kept and handed to the stage
            signed = await honest.send(receiver, fwd(0), act)
            got = await receiver.inbox.receive(fwd(0), WAIT_S)
            assert torch.equal(tensor_of(got), act) and got.signed == signed and got.sender == honest.key
            await honest.send(receiver, fwd(0), act)  # a resend after a lost answer: accepted again
            # another tensor for a filled slot: refused, and kept as equivocation evidence
            await refused(receiver, SlotFilled, honest.send(receiver, fwd(0), act + 1))
            second = receiver.inbox.equivocations[fwd(0)]
            check_equivocation(honest.key, CHAIN_ID, CONTRACT, fwd(0), signed, second)
            assert receiver.inbox.evidence[fwd(0)] == (honest.key, signed)


@pytest.mark.trio
async def test_a_silent_neighbour_is_named_when_the_wait_ends(tmp_path):
    act = torch.randn(SHAPE, generator=torch.Generator().manual_seed(2))
    wait_s, read_s, margin_s = 0.5, 1.0, 1.0  # margin: scheduling on 2 busy cores
    with trio.fail_after(30):
        async with cluster(tmp_path, 2, read_timeout_s=read_s) as c:
            first, last = stages = [Stage(n) for n in c.nodes]
            expect_pipeline(stages)
            # never sends: the wait ends with the typed timeout naming the slot and the neighbour
            start = trio.current_time()
            with pytest.raises(StageSilent) as info:
                await last.inbox.receive(fwd(0), wait_s)
            assert wait_s <= trio.current_time() - start < wait_s + margin_s
            assert (info.value.slot, info.value.sender) == (fwd(0), first.key)
            with pytest.raises(UnexpectedSlot):  # nobody sends stage 1 its own gradients
                await last.inbox.receive(bwd(0), wait_s)
            # stalls mid-tensor: the receiver drops the stream after one read timeout, the stage's
            # wait for that slot ends as for a silent one, and the next tensor is served
            await first.sender.dialer.connect(last.node.peer_id, [split_multiaddr(last.node.listen_addr)[0]])
            stream = await first.node.host.new_stream(last.node.peer_id, [PROTOCOL])
            data = raw(act)
            sig = sign_boundary(first.node.identity, CHAIN_ID, CONTRACT, fwd(1), boundary_hash(data))
            await stream.write(encode_header(header_for(fwd(1), SHAPE, boundary_hash(data), sig)) + data[:1000])
            start = trio.current_time()
            with pytest.raises(NET_ERRORS):  # the receiver resets the stream: no answer to a stall
                await stream.read(1)
            assert read_s <= trio.current_time() - start < read_s + margin_s
            assert last.inbox.refusals == {"TransferTimeout": 1}
            start = trio.current_time()
            with pytest.raises(StageSilent) as info:
                await last.inbox.receive(fwd(1), wait_s)
            assert wait_s <= trio.current_time() - start < wait_s + margin_s
            assert (info.value.slot, info.value.sender) == (fwd(1), first.key)
            await first.send(last, fwd(1), act)
            assert torch.equal(tensor_of(await last.inbox.receive(fwd(1), WAIT_S)), act)
            # once the node is in a later round the link forgets this one: lanes, tensors, evidence
            last.inbox.forget_before(ROUND)
            assert fwd(1) in last.inbox.evidence
            last.inbox.forget_before(ROUND + 1)
            assert not last.inbox.evidence
            with pytest.raises(UnexpectedSlot):
                await last.inbox.receive(fwd(1), wait_s)
