"""Checkpoint parts over the real blob protocol: a data dir serves a part straight from the file
it holds (header rewritten, tensor bytes as they are), a holder that answers with less than
was asked, or with a forged part, is skipped, and a part held is replaced by a fuller one
when a later check needs more, without losing the file an earlier check still reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.core.checkpoint.format import MAX_HEADER_BYTES
from protocol.core.checkpoint.part_bytes import CheckpointPart, part_of_blob
from protocol.core.proof.trace import check_served_leaf
from protocol.node.store import DataDir
from protocol.p2p.errors import BlobNotFound
from validator.checks import fetch_leaf

from .test_wire_rules import ROUND, TASK, honest_miner, hosts, memory, served, validator_ctx
from .test_wire_rules import sub as sub  # noqa: F401  (the module's fixture)

P = CheckpointPart


def _part(sub, leaf: int, part: CheckpointPart) -> bytes:  # type: ignore[no-untyped-def]
    return part_of_blob(served(sub, leaf)[0], part, MAX_HEADER_BYTES)


@pytest.mark.trio
async def test_a_data_dir_serves_each_part_it_holds_and_refuses_one_it_does_not(tmp_path, sub):
    with trio.fail_after(60):
        holder = DataDir(tmp_path / "holder")
        holder.add_checkpoint(ROUND, sub.root, 0, *served(sub, 0))  # whole
        holder.add_checkpoint(ROUND, sub.root, 1, _part(sub, 1, P.HASHES), served(sub, 1)[1])  # a part
        async with hosts([memory(tmp_path, "v"), (holder, holder)]) as (validator, h):
            key = h.identity.public_key
            for part in P:
                got = await validator.fetch_checkpoint(key, ROUND, sub.root, 0, part=part.value)
                assert got.data == _part(sub, 0, part)  # the bytes the pure layout gives
                check_served_leaf(got.data, got.proof, sub.root, 0, TASK.model, TASK.cfg, part)
            got = await validator.fetch_checkpoint(key, ROUND, sub.root, 1, part="hashes")
            assert got.data == _part(sub, 1, P.HASHES)
            for more in ("params", "all"):  # it holds only the digests of leaf 1
                with pytest.raises(BlobNotFound):
                    await validator.fetch_checkpoint(key, ROUND, sub.root, 1, part=more)


@pytest.mark.trio
async def test_a_holder_serving_less_than_asked_or_a_forged_part_is_skipped(tmp_path, sub):
    with trio.fail_after(60):
        blob, proof = served(sub, 2)
        short, forged, honest_peer = memory(tmp_path, "s"), memory(tmp_path, "f"), memory(tmp_path, "h")
        short[1].add(ROUND, sub.root, 2, _part(sub, 2, P.HASHES), proof)  # answers every request with digests
        short[1].get_checkpoint = lambda r, root, i, part="all", asker=b"": (_part(sub, 2, P.HASHES), proof)  # type: ignore[method-assign]
        tampered = bytearray(_part(sub, 2, P.PARAMS))
        tampered[-1] ^= 0x01  # one bit of a parameter: its digest no longer matches
        forged[1].add(ROUND, sub.root, 2, bytes(tampered), proof)
        forged[1].get_checkpoint = lambda r, root, i, part="all", asker=b"": (bytes(tampered), proof)  # type: ignore[method-assign]
        honest_peer[1].add(ROUND, sub.root, 2, blob, proof)
        async with hosts([memory(tmp_path, "v"), short, forged, honest_peer]) as nodes:
            validator, s, f, h = nodes
            ctx = validator_ctx(validator, DataDir(tmp_path / "vdata"))
            cheats = [s.identity.public_key, f.identity.public_key]
            assert await fetch_leaf(ctx, ROUND, sub.root, 2, cheats, part=P.PARAMS) is None
            got = await fetch_leaf(ctx, ROUND, sub.root, 2, [*cheats, h.identity.public_key], part=P.PARAMS)
            assert got is not None and got.path.read_bytes() == _part(sub, 2, P.PARAMS)
            assert not list((tmp_path / "vdata" / "blobs").glob(".partial-*"))  # rejected downloads deleted


@pytest.mark.trio
async def test_a_part_held_is_replaced_by_a_fuller_one_and_its_file_kept_until_the_round_goes(tmp_path, sub):
    with trio.fail_after(60):
        miner = honest_miner(tmp_path, sub)
        data = DataDir(tmp_path / "vdata")
        async with hosts([memory(tmp_path, "v"), miner]) as (validator, m):
            ctx, key = validator_ctx(validator, data), m.identity.public_key
            first = await fetch_leaf(ctx, ROUND, sub.root, 2, [key], part=P.HASHES)  # a check's segment end
            assert first is not None and first.fresh
            again = await fetch_leaf(ctx, ROUND, sub.root, 2, [key], part=P.HASHES)
            assert again is not None and again.path == first.path and not again.fresh  # held: not fetched again
            fuller = await fetch_leaf(ctx, ROUND, sub.root, 2, [key], part=P.ALL)  # an audit's segment start
            assert fuller is not None and fuller.path.read_bytes() == served(sub, 2)[0]
            assert not fuller.fresh  # someone kept the entry: whoever fetched it now does not drop it
            assert first.path.is_file()  # the first check may still be reading it
            held = data.held_checkpoint(ROUND, sub.root, 2)
            assert held is not None and held[0] == fuller.path
            smaller = await fetch_leaf(ctx, ROUND, sub.root, 2, [key], part=P.PARAMS)
            assert smaller is not None and smaller.path == fuller.path  # the whole one holds it
        assert data.drop_checkpoints(ROUND) > 0
        assert not first.path.exists() and not fuller.path.exists()
        assert not [p for p in data.blobs.root.iterdir() if not p.name.startswith(".")]


def test_a_superseded_file_another_entry_uses_is_kept(tmp_path: Path, sub) -> None:  # type: ignore[no-untyped-def]
    d = DataDir(tmp_path)
    digests, proof = _part(sub, 0, P.HASHES), served(sub, 0)[1]
    d.add_checkpoint(ROUND, b"\x01" * 32, 0, digests, proof)
    d.add_checkpoint(ROUND + 1, b"\x01" * 32, 0, digests, proof)  # the same bytes, another round
    shared = d.held_checkpoint(ROUND, b"\x01" * 32, 0)
    assert shared is not None
    whole = tmp_path / "whole.partial"
    whole.write_bytes(served(sub, 0)[0])
    from protocol.core.crypto.hashing import content_hash

    d.keep_fetched(ROUND, b"\x01" * 32, 0, whole, content_hash(served(sub, 0)[0]), proof, P.ALL)
    d.drop_checkpoints(ROUND)
    assert shared[0].is_file()  # round ROUND + 1 still refers to it
    d.drop_checkpoints(ROUND + 1)
    assert not shared[0].exists()


def test_a_request_for_an_unknown_part_is_malformed_and_an_old_one_asks_for_all() -> None:
    from protocol.core.wire.messages import MalformedMessage
    from protocol.p2p.framing import decode_request

    base = '{"schema_version": 1, "kind": "checkpoint", "round": 7, "trace_root": "0x' + "ab" * 32 + '", "index": 3'
    assert decode_request((base + "}").encode()).part == "all"  # type: ignore[union-attr]
    assert decode_request((base + ', "part": "hashes"}').encode()).part == "hashes"  # type: ignore[union-attr]
    for bad in ('"v"', '"ALL"', "1", "null"):
        with pytest.raises(MalformedMessage):
            decode_request((base + f', "part": {bad}}}').encode())
