"""Pure parts: message codec, registry rules, rate limits, topic and message-id functions."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from libp2p.pubsub.pb import rpc_pb2
from pydantic import ValidationError

from protocol.core.errors import SignatureError
from protocol.core.wire.messages import (
    MAX_GOSSIP_BYTES,
    GossipPayload,
    MalformedMessage,
    MessageRejected,
    PartialAnnounced,
    ResultSigned,
    SignedGossip,
    TreeAudited,
    decode_gossip,
    encode_gossip,
    make_gossip,
    new_nonce,
    to_hex,
)
from protocol.p2p import (
    PeerLimiter,
    RatePolicy,
    RegistryView,
    limits_for,
    message_id,
    node_key_of,
    peer_id_of,
    topic_for,
)
from protocol.p2p.errors import RegistryError
from protocol.p2p.gossip import GossipRules
from protocol.p2p.host import build_host

from .conftest import (
    CHAIN_ID,
    CONTRACT,
    STAKE,
    RoundClock,
    account,
    admit_all,
    announcement,
    entry_for,
    identity,
    p2p_config,
)


def test_gossip_roundtrip_and_tamper():
    data = make_gossip(identity(0), CHAIN_ID, CONTRACT, 5, announcement(0))
    signed = decode_gossip(data)
    assert signed.payload.body == announcement(0) and signed.sender_key == identity(0).public_key
    flipped = bytearray(data)
    flipped[-3] ^= 1  # still JSON? maybe not; either way it must not pass
    with pytest.raises((MalformedMessage, MessageRejected)):
        decode_gossip(bytes(flipped))
    with pytest.raises(MessageRejected):
        decode_gossip(b"\x00" * 64 + data[64:])


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.replace(b'"schema_version":1', b'"schema_version":2'),
        lambda d: d.replace(b'"round":5', b'"round":5,"extra":1'),
        lambda d: d.replace(b'"round":5', b'"round":"5"'),
        lambda d: d[:64] + b"not json",
        lambda d: d[:40],
        lambda d: d + b" " * MAX_GOSSIP_BYTES,
    ],
)
def test_malformed_gossip_is_typed(mutate):
    data = make_gossip(identity(0), CHAIN_ID, CONTRACT, 5, announcement(0))
    with pytest.raises(MalformedMessage):
        decode_gossip(mutate(data))


def test_payload_is_frozen_and_sender_must_sign():
    body = ResultSigned(validator=to_hex(account(1)), result_root="0x" + "cd" * 32, model_hash="0x" + "ab" * 32,
                        signature="0x" + "ef" * 96)
    payload = GossipPayload(
        chain_id=CHAIN_ID,
        contract=to_hex(CONTRACT),
        round=1,
        nonce=new_nonce(),
        sender=to_hex(identity(1).public_key),
        body=body,
    )
    with pytest.raises(ValidationError) as frozen:
        payload.round = 2  # type: ignore[misc]
    assert frozen.value.errors()[0]["type"] == "frozen_instance"
    assert payload.round == 1
    with pytest.raises(SignatureError):
        encode_gossip(identity(2), payload)
    assert decode_gossip(encode_gossip(identity(1), payload)).payload == payload


def test_topic_and_message_id_are_stable_golden_values():
    assert topic_for(CHAIN_ID, CONTRACT) == "/veritrain/1/31337/0x" + CONTRACT.hex()
    msg = rpc_pb2.Message(data=b"abc", topicIDs=["t"], from_id=b"x", seqno=b"1")
    expect = hashlib.sha256(b"veritrain/msgid/v1\x00t\x00abc").digest()
    assert message_id(msg) == expect
    other = rpc_pb2.Message(data=b"abc", topicIDs=["t"], from_id=b"y", seqno=b"2")
    assert message_id(other) == expect  # content-addressed: sender and seqno do not matter


def test_peer_id_is_stable_and_matches_libp2p():
    host = build_host(identity(3), admit=admit_all)
    assert host.get_id() == peer_id_of(identity(3).public_key)
    assert build_host(identity(3), admit=admit_all).get_id() == host.get_id()
    assert node_key_of(host.get_id()) == identity(3).public_key


def test_registry_first_valid_binding_wins():
    reg = RegistryView(CHAIN_ID, CONTRACT)
    reg.upsert(entry_for(0))
    # a squatter registers node 0's key for its own account: rejected, victim unaffected
    squat = dataclasses.replace(entry_for(0), account=account(9))
    with pytest.raises(RegistryError):
        reg.upsert(squat)
    assert reg.lookup_by_node_key(identity(0).public_key).account == account(0)
    # a binding signed for another deployment is invalid
    bad = dataclasses.replace(entry_for(1), binding_sig=entry_for(2).binding_sig)
    with pytest.raises(RegistryError):
        reg.upsert(bad)
    assert reg.lookup_by_peer_id(peer_id_of(identity(1).public_key)) is None
    reg.update_standing(identity(0).public_key, 7, 9)
    assert reg.lookup_by_account(account(0)).stake == 7
    # the account moves to a new node key: the old key is forgotten
    moved = entry_for(0, ident=identity(5))
    reg.upsert(moved)
    assert reg.lookup_by_node_key(identity(0).public_key) is None
    assert reg.lookup_by_peer_id(peer_id_of(identity(5).public_key)) == moved
    reg.remove(identity(5).public_key)
    assert len(reg) == 0


def test_limits_grow_with_stake_and_reputation():
    p = RatePolicy()
    low = limits_for(entry_for(0, stake=0, reputation=0), p)
    mid = limits_for(entry_for(0, stake=STAKE, reputation=32768), p)
    high = limits_for(entry_for(0, stake=100 * STAKE, reputation=65535), p)
    assert low.requests_per_s < mid.requests_per_s < high.requests_per_s
    assert low.bytes_per_s < mid.bytes_per_s < high.bytes_per_s
    assert high.requests_per_s == p.base_requests_per_s * p.max_stake_factor * 1.5  # capped


def test_token_buckets_with_a_fake_clock():
    now = [0.0]
    lim = PeerLimiter(RatePolicy(base_requests_per_s=2, burst_seconds=1), clock=lambda: now[0])
    e = entry_for(0, stake=0, reputation=65535)  # factor 1.5 -> 3 req/s, capacity 3
    assert [lim.allow_request(e) for _ in range(4)] == [True, True, True, False]
    now[0] += 1.0
    assert lim.allow_request(e)
    assert lim.byte_delay(e, 10) == 0.0
    assert [lim.open_stream(e) for _ in range(5)] == [True] * 4 + [False]
    lim.close_stream(e)
    assert lim.open_stream(e)


def test_gossip_rules_round_window_and_replayed_nonce():
    reg = RegistryView(CHAIN_ID, CONTRACT)
    reg.upsert(entry_for(0))
    clock = RoundClock(5)
    rules = GossipRules(p2p_config(), reg, PeerLimiter(), clock)
    origin = peer_id_of(identity(0).public_key)
    signed = decode_gossip(make_gossip(identity(0), CHAIN_ID, CONTRACT, 5, announcement(0)))
    rules.check(signed, origin, b"id-1")
    rules.record(signed, b"id-1")
    rules.check(signed, origin, b"id-1")  # the same message again is a duplicate, not a replay
    with pytest.raises(MessageRejected):
        rules.check(signed, origin, b"id-2")  # same signed nonce inside another message
    clock.value = 7
    with pytest.raises(MessageRejected):
        rules.check(signed, origin, b"id-1")  # round 5 is outside 6..8
    with pytest.raises(MessageRejected):
        rules.check(signed, peer_id_of(identity(1).public_key), b"id-1")


def test_a_partial_sum_announcement_speaks_only_for_its_signers_account():
    """`partial_announced` is evidence against the validator it names: gossip admits it only
    from the node key bound to that validator's account (INTEROP.md §4 rule 6)."""
    reg = RegistryView(CHAIN_ID, CONTRACT)
    reg.upsert(entry_for(0))
    reg.upsert(entry_for(1))
    rules = GossipRules(p2p_config(), reg, PeerLimiter(), RoundClock(5))

    def announced(by: int, named: int) -> SignedGossip:
        body = PartialAnnounced(validator=to_hex(account(named)), level=1, index=3, partial_hash="0x" + "ab" * 32,
                                claim_sig="0x" + "cd" * 64)
        return decode_gossip(make_gossip(identity(by), CHAIN_ID, CONTRACT, 5, body))

    own = announced(0, 0)
    rules.check(own, peer_id_of(identity(0).public_key), b"id-own")
    with pytest.raises(MessageRejected, match="different node key"):  # node 0 cannot frame validator 1
        rules.check(announced(0, 1), peer_id_of(identity(0).public_key), b"id-framed")
    with pytest.raises(ValidationError):  # strict: a level 0 node is a leaf, never announced
        PartialAnnounced(validator=to_hex(account(0)), level=0, index=0, partial_hash="0x" + "ab" * 32,
                         claim_sig="0x" + "cd" * 64)


def test_a_tree_audited_notice_speaks_only_for_its_signers_account():
    """`tree_audited` makes the others wait for its dissents: only the validator's own node key may
    send it, and its dissent count is bounded."""
    reg = RegistryView(CHAIN_ID, CONTRACT)
    reg.upsert(entry_for(0))
    reg.upsert(entry_for(1))
    rules = GossipRules(p2p_config(), reg, PeerLimiter(), RoundClock(5))

    def audited(by: int, named: int) -> SignedGossip:
        body = TreeAudited(validator=to_hex(account(named)), dissents=2)
        return decode_gossip(make_gossip(identity(by), CHAIN_ID, CONTRACT, 5, body))

    rules.check(audited(0, 0), peer_id_of(identity(0).public_key), b"id-own")
    with pytest.raises(MessageRejected, match="different node key"):
        rules.check(audited(0, 1), peer_id_of(identity(0).public_key), b"id-framed")
    with pytest.raises(ValidationError):
        TreeAudited(validator=to_hex(account(0)), dissents=-1)
