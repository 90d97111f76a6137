"""Rounds and Scores: wiring, the round clock, commits and columns, seeds, score commit/reveal (calldata)."""

import boa
from conftest import (
    GENESIS_MODEL,
    MINER,
    PHASE_AUDIT,
    PHASE_COMMIT,
    PHASE_DONE,
    PHASE_NONE,
    PHASE_RESULT,
    PHASE_REVEAL,
    PHASE_SCORING,
    TOKEN,
    VALIDATOR,
    Params,
    World,
    chain_id,
    deploy_stack,
    expected_blockhash,
    expected_seed,
    join,
    last_logs,
    make_world,
    now,
    partial,
    seal,
)
from eth_utils import keccak

from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.score_vector import pack_segments, vector_root

EMPTY = b"\x00" * 32
ZERO = "0x" + "00" * 20


# -- deploy, wiring, start ------------------------------------------------------------------------


def _rounds_args(**kw):
    token = partial("Token").deploy([], [])
    args = dict(
        staking_=token.address, run_config_hash_=b"\x11" * 32, genesis_model_hash_=b"\x22" * 32,
        commit_duration_=1, score_duration_=1, reveal_duration_=1, audit_duration_=1,
    )
    args.update(kw)
    return list(args.values())


def test_constructor_reverts():
    for field in ("commit_duration_", "score_duration_", "reveal_duration_", "audit_duration_"):
        with boa.reverts("settlement: zero duration"):
            partial("Rounds").deploy(*_rounds_args(**{field: 0}))
    with boa.reverts("settlement: empty genesis model"):
        partial("Rounds").deploy(*_rounds_args(genesis_model_hash_=EMPTY))
    r = partial("Rounds").deploy(*_rounds_args())
    assert (r.run_config_hash(), r.genesis_model_hash(), r.audit_duration()) == (b"\x11" * 32, b"\x22" * 32, 1)
    token = partial("Token").deploy([], [])
    with boa.reverts("settlement: bad miner share"):
        partial("Rewards").deploy(token.address, 1, 10_001)
    rw = partial("Rewards").deploy(token.address, 7, 10_000)
    assert (rw.emission_per_round(), rw.miner_share_bps()) == (7, 10_000)


def test_wiring_once_by_the_deployer():
    r = partial("Rounds").deploy(*_rounds_args())
    token = partial("Token").deploy([], [])
    rw = partial("Rewards").deploy(token.address, 1, 5000)
    stranger, a = boa.env.generate_address(), boa.env.generate_address()
    with boa.reverts("settlement: not wired"):
        r.start()
    with boa.reverts("settlement: only deployer"):
        r.wire(a, rw.address, a, a, sender=stranger)
    with boa.reverts("settlement: zero address"):
        r.wire(ZERO, rw.address, a, a)
    with boa.reverts("settlement: zero address"):
        r.wire(a, rw.address, a, ZERO)
    r.wire(a, rw.address, a, a)
    assert [(e.scores, e.rewards, e.results, e.keys) for e in last_logs(r, "Wired")] == [(a, rw.address, a, a)]
    with boa.reverts("settlement: already wired"):
        r.wire(a, rw.address, a, a)
    with boa.reverts("settlement: not wired"):  # rewards has no disputes contract yet
        r.start()
    with boa.reverts("settlement: only deployer"):
        rw.wire(a, a, sender=stranger)
    with boa.reverts("settlement: zero address"):
        rw.wire(a, ZERO)
    rw.wire(a, stranger)
    assert (rw.disputes(), rw.results()) == (a, stranger)
    with boa.reverts("settlement: already wired"):
        rw.wire(a, a)


def test_start_needs_a_permitted_validator_and_runs_once():
    stack = deploy_stack()
    miners = [join(stack, MINER, 100 * TOKEN) for _ in range(2)]
    join(stack, VALIDATOR, 199 * TOKEN)  # below the validator minimum: no permit
    with boa.reverts("settlement: no permitted validator"):
        stack.settlement.start()
    v = join(stack, VALIDATOR, 200 * TOKEN)
    stack.settlement.start(sender=miners[0])  # anyone may start
    (ev,) = last_logs(stack.settlement, "RoundOpened")
    assert (ev.round, ev.model_hash, ev.start_time, ev.active_miners, ev.snapshot) == (
        0, b"\x22" * 32, boa.env.timestamp, 2, stack.settlement.snapshot_of(0))
    assert list(stack.settlement.validators_of(0)) == [v]
    s = stack.settlement
    assert s.started() and s.current_round() == 0 and s.model_hash(0) == b"\x22" * 32
    assert s.phase(0) == PHASE_COMMIT and s.phase(1) == PHASE_NONE
    assert s.validator_weight(0, v) == s.total_weight(0) == 200 * TOKEN
    assert s.round_info(0)[:5] == (boa.env.timestamp, 0, 2, 0, 0)
    assert s.deadlines(0) == (boa.env.timestamp + 60, 0, 0, 0)
    with boa.reverts("settlement: already started"):
        s.start()


# -- commit phase ---------------------------------------------------------------------------------


def test_commit_stores_one_slot_and_emits_both_values(world: World):
    s, m0, m1 = world.s, world.miners[0], world.miners[1]
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m0)
    (ev,) = last_logs(s, "UpdateCommitted")
    assert (ev.round, ev.miner, ev.update_hash, ev.trace_root, ev.index, ev.steps) == \
        (0, m0, b"\xaa" * 32, b"\xbb" * 32, 0, 0)
    digest = int.from_bytes(keccak(b"\xaa" * 32 + b"\xbb" * 32), "big")
    # the slot is the digest with its low 32 bits replaced by the steps (0: H) and 1 + the column
    assert int.from_bytes(s.commit_slot(0, m0), "big") == (digest >> 32 << 32) | 1
    assert s.has_committed(0, m0) and not s.has_committed(0, m1)
    assert (s.commit_index(0, m0), s.commit_index(0, m1)) == (1, 0)
    assert s.round_info(0)[1] == 1 and s.phase(0) == PHASE_COMMIT
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, 21, sender=m1)  # capacity-scaled: 21 steps
    assert [(e.index, e.steps) for e in last_logs(s, "UpdateCommitted")] == [(1, 21)]
    assert int.from_bytes(s.commit_slot(0, m1), "big") == (digest >> 32 << 32) | (21 << 16) | 2
    assert (s.commit_steps(0, m0), s.commit_steps(0, m1)) == (0, 21)
    assert s.commit_index(0, m1) == 2 and world.columns(0) == [m0, m1]


def test_commit_reverts(world: World):
    s, p = world.s, world.stack.params
    m0, m1 = world.miners[:2]
    with boa.reverts("settlement: round not open"):
        s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=m0)
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m0)
    with boa.reverts("settlement: already committed"):
        s.commit_update(0, b"\xcc" * 32, b"\xdd" * 32, sender=m0)
    for who in (world.validators[0], boa.env.generate_address()):
        with boa.reverts("settlement: not an eligible miner"):
            s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=who)
    poor = join(world.stack, MINER, p.min_miner_stake - 1)
    with boa.reverts("settlement: not an eligible miner"):
        s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=poor)
    boa.env.time_travel(seconds=p.commit_duration - 1)
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m1)  # last second is still in time
    boa.env.time_travel(seconds=1)
    with boa.reverts("settlement: commit deadline passed"):
        s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=world.miners[2])
    s.close_commit(0)
    with boa.reverts("settlement: commit phase closed"):
        s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=world.miners[2])


def test_commit_phase_closes_early_when_every_active_miner_committed(world: World):
    s = world.s
    world.commit_all(0, world.miners[:2])
    assert s.phase(0) == PHASE_COMMIT
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=world.miners[2])
    (ev,) = last_logs(s, "CommitClosed")
    number = boa.env.evm.patch.block_number
    assert (ev.round, ev.block_number) == (0, number)
    assert s.round_info(0)[1:5] == (3, 3, number, boa.env.timestamp)
    assert s.phase(0) == PHASE_SCORING
    assert s.deadlines(0) == (s.round_info(0)[0] + 60, boa.env.timestamp + 60, boa.env.timestamp + 120,
                              boa.env.timestamp + 180)
    # a miner that became eligible after the round opened is too late
    late = join(world.stack, MINER, 100 * TOKEN)
    with boa.reverts("settlement: commit phase closed"):
        s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=late)


# -- rule 6: only miners eligible when a round opens take part in it ----------------------------


def test_miners_staked_after_the_opening_can_neither_commit_nor_close_the_phase_early(world: World):
    """Attack: the phase used to close once commits reached the miners active at the opening,
    whoever committed, so as many freshly staked accounts as there were honest miners closed it
    and locked every honest miner out. Late accounts are refused, and do not count."""
    s, st_ = world.s, world.st
    assert s.round_info(0)[2] == 3
    sybils = [join(world.stack, MINER, world.stack.params.min_miner_stake) for _ in range(3)]
    for sybil in sybils:
        assert st_.is_eligible_miner(sybil) and st_.eligible_since(sybil) > s.opening_clock(0)
        with boa.reverts("settlement: not eligible at round open"):
            s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=sybil)
    assert s.phase(0) == PHASE_COMMIT and s.round_info(0)[1] == 0


def test_every_miner_active_at_the_opening_still_commits_and_closes_the_phase_early(world: World):
    """Honest pair of the attack above: with the sybils refused, the three miners active at the
    opening all commit, and the third commit (not an earlier one) closes the phase early."""
    s = world.s
    for _ in range(3):
        join(world.stack, MINER, world.stack.params.min_miner_stake)
    world.commit_all(0, world.miners[:2])
    assert s.phase(0) == PHASE_COMMIT and last_logs(s, "CommitClosed") == []
    world.commit_all(0, world.miners[2:])
    (ev,) = last_logs(s, "CommitClosed")
    assert s.round_info(0)[1] == 3 and s.phase(0) == PHASE_SCORING
    assert all(s.has_committed(0, m) for m in world.miners)


def test_a_miner_eligible_at_the_opening_commits_after_topping_up(world: World):
    """A top-up keeps the eligibility the miner had at the opening (only a drop below the
    minimum restarts it)."""
    s, st_, m = world.s, world.st, world.miners[0]
    since = st_.eligible_since(m)
    assert 0 < since <= s.opening_clock(0)
    st_.stake(TOKEN, sender=m)
    assert st_.eligible_since(m) == since
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    assert s.has_committed(0, m)


def test_a_miner_that_drops_below_the_minimum_and_restakes_waits_for_the_next_round(world: World):
    """Attack variant: unbonding below the minimum and staking again mid-round restarts the
    eligibility, so one account cannot leave and re-enter to dodge the opening snapshot."""
    s, st_, m = world.s, world.st, world.miners[0]
    st_.request_unbond(1, sender=m)
    assert st_.eligible_since(m) == 0
    st_.stake(1, sender=m)
    assert st_.eligible_since(m) > s.opening_clock(0)
    with boa.reverts("settlement: not eligible at round open"):
        s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    world.commit_all(0, world.miners[1:])  # the other two commit; the deadline closes the phase
    assert s.phase(0) == PHASE_COMMIT
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 1], v1: [1, 1]}, miners=[], finalize=False)
    world.fall_back(0)
    s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    assert s.has_committed(1, m)


def test_a_late_miner_takes_part_from_the_next_round(world: World):
    """Honest: a miner staked during round 0 is active when round 1 opens, commits there, and
    counts toward round 1's early close."""
    s = world.s
    late = join(world.stack, MINER, world.stack.params.min_miner_stake)
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]}, finalize=False)
    world.fall_back(0)
    assert s.current_round() == 1 and s.round_info(1)[2] == 4
    assert world.st.eligible_since(late) <= s.opening_clock(1)
    world.commit_all(1, world.miners)
    assert s.phase(1) == PHASE_COMMIT
    s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=late)
    assert s.phase(1) == PHASE_SCORING and s.round_info(1)[1] == 4
    assert s.commit_index(1, late) == 4  # the latest commit is the last column


def test_close_commit_after_deadline_by_anyone(world: World):
    s = world.s
    with boa.reverts("settlement: round not open"):
        s.close_commit(1)
    world.commit_all(0, world.miners[:1])
    boa.env.time_travel(seconds=59)
    with boa.reverts("settlement: commit deadline not reached"):
        s.close_commit(0)
    boa.env.time_travel(seconds=1)
    s.close_commit(0, sender=boa.env.generate_address())
    (ev,) = last_logs(s, "CommitClosed")
    assert (ev.block_number, s.round_info(0)[1]) == (boa.env.evm.patch.block_number, 1)
    assert s.round_info(0)[3:5] == (boa.env.evm.patch.block_number, boa.env.timestamp)
    with boa.reverts("settlement: commit phase closed"):
        s.close_commit(0)


def test_seed_is_the_closing_blocks_hash_mixed_with_a_later_blocks_randao(world: World):
    s = world.s
    with boa.reverts("settlement: commit phase open"):
        s.store_seed(0)
    world.commit_all(0)
    closed = s.round_info(0)[3]
    with boa.reverts("settlement: seed block not sealed"):
        s.store_seed(0)
    with boa.reverts("settlement: seed not stored"):  # same block: scoring cannot start either
        world.commit_scores(0, world.validators[0], [1, 2, 3])
    seal(5)
    with boa.env.anchor():  # the same closing block, another RANDAO where the seed is stored
        boa.env.evm.patch.prevrandao = b"\x07" * 32
        s.store_seed(0)
        other = s.round_seed(0)
    boa.env.evm.patch.prevrandao = b"\x42" * 32
    try:
        s.store_seed(0)
    finally:
        boa.env.evm.patch.prevrandao = bytes(32)
    (ev,) = last_logs(s, "SeedStored")
    seed = keccak(expected_blockhash(closed) + b"\x42" * 32)
    assert seed != other  # the closing block's proposer, grinding its hash, does not fix the seed
    assert seed != keccak(expected_blockhash(closed + 1) + b"\x42" * 32)  # the fake chain tells blocks apart
    assert (ev.round, ev.seed) == (0, seed)
    assert s.round_seed(0) == seed and s.round_info(0)[5] == seed
    with boa.reverts("settlement: seed already stored"):
        s.store_seed(0)


def test_first_score_commit_in_a_later_block_stores_the_seed(world: World):
    s = world.s
    world.commit_all(0)
    closed = s.round_info(0)[3]
    seal(2)
    world.commit_scores(0, world.validators[0], [1, 2, 3])
    assert [e.seed for e in last_logs(s, "SeedStored")] == [expected_seed(closed)]
    assert s.round_seed(0) == expected_seed(closed)


def test_seed_recloses_when_closing_block_left_blockhash_window(world: World):
    s = world.s
    world.commit_all(0)
    closed = s.round_info(0)[3]
    seal(257)
    with boa.reverts("settlement: seed not stored"):  # touch does not store a stale hash
        world.commit_scores(0, world.validators[0], [1, 2, 3])
    s.store_seed(0)
    (ev,) = last_logs(s, "CommitClosed")
    now = boa.env.evm.patch.block_number
    assert now == closed + 257
    assert (ev.block_number, s.round_info(0)[1]) == (now, 3)
    assert s.round_info(0)[3] == now and s.round_seed(0) == EMPTY
    with boa.reverts("settlement: seed block not sealed"):
        s.store_seed(0)
    seal()
    world.commit_scores(0, world.validators[0], [1, 2, 3])
    assert s.round_seed(0) == expected_seed(now)


def test_seed_at_exactly_256_blocks_is_still_a_blockhash(world: World):
    s = world.s
    world.commit_all(0)
    closed = s.round_info(0)[3]
    seal(256)
    s.store_seed(0)
    assert s.round_seed(0) == expected_seed(closed)


# -- scoring phase --------------------------------------------------------------------------------


def test_score_commit_reverts():
    w = make_world(Params(max_permits=2), validator_stakes=(300 * TOKEN, 200 * TOKEN, 250 * TOKEN))
    s = w.s
    v0, v2, v1 = w.validators  # the third evicted the smallest: v2 holds no permit
    assert list(s.validators_of(0)) == [v0, v1]
    c = b"\x07" * 32
    with boa.reverts("settlement: commit phase open"):
        s.commit_scores(0, c, sender=v0)
    w.to_scoring(0)
    for who in (v2, w.miners[0], boa.env.generate_address()):  # v2 was evicted
        with boa.reverts("settlement: not a permitted validator"):
            s.commit_scores(0, c, sender=who)
    with boa.reverts("settlement: empty commitment"):
        s.commit_scores(0, EMPTY, sender=v0)
    with boa.reverts("settlement: empty commitment"):  # the audits-done mark would read as audited
        s.commit_scores(0, keccak(b"veritrain/audits-done/v1"), sender=v0)
    s.commit_scores(0, c, sender=v0)
    (ev,) = last_logs(s, "ScoresCommitted")
    assert (ev.round, ev.validator, ev.commitment) == (0, v0, c)
    assert s.score_commitment(0, v0) == c
    with boa.reverts("settlement: scores already committed"):
        s.commit_scores(0, b"\x08" * 32, sender=v0)
    assert s.phase(0) == PHASE_SCORING
    boa.env.time_travel(seconds=60)
    assert s.phase(0) == PHASE_REVEAL
    with boa.reverts("settlement: scoring phase closed"):
        s.commit_scores(0, c, sender=v1)


def test_scoring_closes_early_when_every_validator_committed(world: World):
    s = world.s
    world.to_scoring(0)
    world.commit_scores(0, world.validators[0], [1, 2, 3])
    assert s.phase(0) == PHASE_SCORING and s.deadlines(0)[1] > boa.env.timestamp
    world.commit_scores(0, world.validators[1], [1, 2, 3])
    assert s.phase(0) == PHASE_REVEAL
    assert s.deadlines(0)[1:] == (boa.env.timestamp, boa.env.timestamp + 60, boa.env.timestamp + 120)


# -- reveal phase ---------------------------------------------------------------------------------


def test_reveal_happy_path_and_early_close(world: World):
    s = world.s
    world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30])
    with boa.reverts("settlement: scoring phase open"):
        world.reveal(0, v0)
    world.commit_scores(0, v1, [11, 21, 31], loss=2_400_000)
    world.reveal(0, v0)
    (ev,) = last_logs(s, "ScoresRevealed")
    packed, witness_root, loss, _ = world.reveal_args(0, v0)
    root = vector_root(chain_id(), str(world.stack.scores.address), str(v0), 0, [10, 20, 30], witness_root, loss)
    assert (ev.round, ev.validator, ev.segments, ev.columns, ev.witness_root, ev.heldout_loss, ev.vector_root) == (
        0, v0, packed, 3, witness_root, loss, root)
    assert packed == [bytes.fromhex("0000000a" "00010014" "0002001e")]  # (column, score), 2 bytes big-endian each
    assert s.vector_root(0, v0) == root and s.vector_root(0, v1) == EMPTY
    assert s.revealed(0, v0) and not s.revealed(0, v1)
    assert s.phase(0) == PHASE_REVEAL
    with boa.reverts("settlement: already revealed"):
        world.reveal(0, v0)
    world.reveal(0, v1)
    assert s.revealed(0, v1)
    assert s.phase(0) == PHASE_AUDIT  # every committer revealed: no need to wait


def test_reveal_reverts(world: World):
    s = world.s
    world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30])
    packed, witness_root, loss, salt = world.reveal_args(0, v0)
    boa.env.time_travel(seconds=60)
    with boa.reverts("settlement: no score commitment"):
        s.reveal_scores(0, packed, witness_root, loss, salt, sender=v1)
    for segments in ([], [packed[0], b""]):  # one segment per 1,024 committed miners, here 3
        with boa.reverts("settlement: one score segment per 1,024 committed miners"):
            s.reveal_scores(0, segments, witness_root, loss, salt, sender=v0)
    (segment,) = packed
    for other in (segment[:4], b"", segment + bytes.fromhex("00000001")):  # another vector's bytes
        with boa.reverts("settlement: reveal does not match commitment"):
            s.reveal_scores(0, [other], witness_root, loss, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, [segment[:-1] + b"\x1f"], witness_root, loss, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, packed, witness_root, loss, b"\x06" * 32, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):  # the columns' order is committed
        s.reveal_scores(0, pack_segments([20, 10, 30]), witness_root, loss, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):  # the witness root is committed
        s.reveal_scores(0, packed, b"\x07" * 32, loss, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):  # and the held-out loss
        s.reveal_scores(0, packed, witness_root, loss + 1, salt, sender=v0)
    boa.env.time_travel(seconds=60)
    with boa.reverts("settlement: reveal deadline passed"):
        s.reveal_scores(0, packed, witness_root, loss, salt, sender=v0)


def test_one_validators_commitment_cannot_be_revealed_by_another(world: World):
    s = world.s
    world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30])
    s.commit_scores(0, s.score_commitment(0, v0), sender=v1)  # v1 copies v0's commitment
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, *world.reveal_args(0, v0), sender=v1)
    world.reveal(0, v0)
    assert not s.revealed(0, v1)


def test_a_reveal_scores_every_committed_miner_in_commit_order():
    w = make_world(n_miners=4, validator_stakes=(300 * TOKEN, 200 * TOKEN))
    m = w.miners
    w.to_scoring(0, [m[2], m[0], m[3]])  # m[1] is eligible but does not commit
    assert w.columns(0) == [m[2], m[0], m[3]]
    v0, v1 = w.validators
    w.commit_scores(0, v0, [1, 2, 3])
    w.commit_scores(0, v1, [1] * 1025)  # a segment too many: its commitment can never be revealed
    w.reveal(0, v0)
    with boa.reverts("settlement: one score segment per 1,024 committed miners"):
        w.reveal(0, v1)
    assert w.s.revealed(0, v0) and not w.s.revealed(0, v1)


def test_vector_root_matches_python(world: World):
    v = world.validators[0]
    scores, witness_root, loss = [1, 65535, 0], b"\x01" * 32, 2_345_678
    got = world.s.vector_root_of(v, 7, list_hash([keccak(seg) for seg in pack_segments(scores)]), witness_root, loss)
    addr = str(world.stack.scores.address)
    assert got == vector_root(chain_id(), addr, str(v), 7, scores, witness_root, loss)
    assert got != vector_root(chain_id(), addr, str(world.validators[1]), 7, scores, witness_root, loss)
    assert got != vector_root(chain_id(), addr, str(v), 8, scores, witness_root, loss)
    assert got != vector_root(chain_id(), addr, str(v), 7, scores[::-1], witness_root, loss)
    assert world.commitment_of(7, v, scores, witness_root, loss, b"\x09" * 32) == keccak(got + b"\x09" * 32)


# -- the round's end -------------------------------------------------------------------------------------


def test_a_round_without_commits_or_reveals_falls_back_and_mints_nothing(world: World):
    s = world.s
    boa.env.time_travel(seconds=60)
    s.close_commit(0)
    boa.env.time_travel(seconds=60)
    assert s.phase(0) == PHASE_RESULT  # nobody committed scores: nothing to wait for
    world.fall_back(0)
    (ev,) = last_logs(world.stack.results, "RoundEnded")
    assert (ev.round, ev.model_hash, ev.fallback) == (0, GENESIS_MODEL, True)
    assert s.phase(0) == PHASE_DONE and s.phase(1) == PHASE_COMMIT
    assert s.total_minted() == 0 and world.t.totalSupply() == world.stack.genesis


def test_reveal_with_no_committed_miners(world: World):
    s = world.s
    world.to_scoring(0, [])
    for v in world.validators:
        world.commit_scores(0, v, [])
    for v in world.validators:
        world.reveal(0, v)
    world.finish_audits(0)
    settled = world.settle(0)
    assert settled.header.n == 0 and settled.header.minted == 0 and settled.header.tree_root == EMPTY
    assert s.phase(0) == PHASE_RESULT


# -- the next round ---------------------------------------------------------------------------------------


def test_the_next_round_needs_a_permitted_validator_to_open(world: World):
    s = world.s
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]}, finalize=False)
    for v in (v0, v1):
        world.st.request_unbond(world.st.staked(v), sender=v)
    boa.env.time_travel(seconds=s.result_deadline(0) - now())
    with boa.reverts("settlement: no permitted validator"):
        s.fall_back(0)


def test_a_full_permit_set_lets_only_its_holders_score():
    w = make_world(Params(max_permits=2), validator_stakes=(250 * TOKEN, 200 * TOKEN, 300 * TOKEN))
    v0, v1, v2 = w.validators
    assert list(w.s.validators_of(0)) == [v0, v2]  # v2 evicted v1 and took its slot
    assert w.s.validator_weight(0, v1) == 0 and w.s.total_weight(0) == 550 * TOKEN
    w.to_scoring(0)
    with boa.reverts("settlement: not a permitted validator"):
        w.commit_scores(0, v1, [1, 2, 3])
    w.commit_scores(0, v0, [1, 2, 3])
    w.commit_scores(0, v2, [1, 2, 3])
    assert w.s.phase(0) == PHASE_REVEAL  # both permit holders committed


def test_a_stake_change_counts_from_the_next_round_and_earlier_rounds_keep_their_weights():
    """Each round opens on its own frozen version of the permitted set. A stake added while
    round 1 runs counts in round 2; rounds 0 and 1 keep their weights."""
    world = make_world(bls=True)
    s, st = world.s, world.st
    v0, v1 = world.validators
    weights = (s.validator_weight(0, v0), s.validator_weight(0, v1))
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    assert s.snapshot_of(1) == s.snapshot_of(0) + 1
    world.t.approve(st.address, 5 * TOKEN, sender=v0)
    st.stake(5 * TOKEN, sender=v0)
    world.run_round(1, {v0: [1, 2, 3], v1: [1, 2, 3]})
    assert s.snapshot_of(2) == s.snapshot_of(1) + 1
    assert s.validator_weight(2, v0) == weights[0] + 5 * TOKEN and s.validator_weight(2, v1) == weights[1]
    assert (s.validator_weight(1, v0), s.validator_weight(1, v1)) == weights
    assert s.total_weight(2) == s.total_weight(1) + 5 * TOKEN
    assert list(s.weights_of(2, [v1, v0])) == [weights[1], weights[0] + 5 * TOKEN]


# -- hooks ----------------------------------------------------------------


def test_only_disputes_and_scores_hooks(world: World):
    s = world.s
    m = world.miners[0]
    for caller in (world.validators[0], world.stack.deployer, world.st.address):
        with boa.reverts("settlement: only disputes"):
            s.report_opened(0, m, sender=caller)
        with boa.reverts("settlement: only disputes"):
            s.report_resolved(0, m, False, sender=caller)
        with boa.reverts("settlement: only scores"):
            s.record_score_commit(0, caller, sender=caller)
        with boa.reverts("settlement: only scores"):
            s.record_reveal(0, caller, sender=caller)
        with boa.reverts("settlement: only scores"):
            s.record_audit_done(0, sender=caller)
        with boa.reverts("settlement: only disputes"):
            world.stack.rounds.record_report(0, True, sender=caller)
    with boa.reverts("settlement: no open report"):
        s.report_resolved(0, m, False, sender=world.d.address)


def test_reporting_open_window(world: World):
    s = world.s
    v0, v1 = world.validators
    assert not s.reporting_open(0)  # commit phase
    world.to_scoring(0)
    assert s.reporting_open(0)
    world.commit_scores(0, v0, [1, 2, 3])
    boa.env.time_travel(seconds=60)
    world.reveal(0, v0)
    boa.env.time_travel(seconds=60)  # the reveal deadline: the audit phase keeps reports open
    assert s.phase(0) == PHASE_AUDIT and s.reporting_open(0)
    boa.env.time_travel(seconds=59)
    assert s.reporting_open(0)
    boa.env.time_travel(seconds=1)
    assert s.phase(0) == PHASE_RESULT and not s.reporting_open(0)  # audit deadline


# -- round limits, timeline bounds and seed touches -----------------------------------------------


def test_start_needs_an_eligible_miner():
    stack = deploy_stack()
    join(stack, VALIDATOR, 200 * TOKEN)
    m = join(stack, MINER, 99 * TOKEN)  # below the miner minimum
    with boa.reverts("settlement: no eligible miner"):
        stack.settlement.start()
    stack.staking.stake(TOKEN, sender=m)
    stack.settlement.start()
    assert stack.settlement.round_info(0)[2] == 1


def test_round_with_no_active_miner_closes_at_its_deadline():
    """Round 1 opens with 0 active miners (all unbonded): nobody can close it early. Miners
    joining after it opened may not commit into it (rule 6: only miners eligible at the opening
    take part), so its deadline closes it with no commit; the commit cap is exercised with
    miners eligible at the opening in test_findings."""
    w = make_world(Params(min_miner_stake=1), n_miners=1)
    s = w.s
    v0, v1 = w.validators
    w.run_round(0, {v0: [1], v1: [1]}, finalize=False)
    w.st.request_unbond(w.st.staked(w.miners[0]), sender=w.miners[0])
    w.fall_back(0)
    start = s.round_info(1)[0]
    assert s.current_round() == 1 and s.round_info(1)[2] == 0
    newcomers = [join(w.stack, MINER, 1, funds=1) for _ in range(3)]
    for m in newcomers:
        assert w.st.is_eligible_miner(m)
        with boa.reverts("settlement: not eligible at round open"):
            s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    assert s.phase(1) == PHASE_COMMIT and s.round_info(1)[1] == 0 and last_logs(s, "CommitClosed") == []
    boa.env.time_travel(seconds=start + 60 - boa.env.timestamp)
    s.close_commit(1)
    assert s.round_info(1)[1] == 0 and s.phase(1) == PHASE_SCORING


def test_late_close_commit_does_not_stretch_the_timeline(world: World):
    """Scoring and reveal deadlines count from the commit deadline at the latest, so the
    dispute timeline stays within the unbonding delay however late `close_commit` comes."""
    s = world.s
    start = s.round_info(0)[0]
    world.commit_all(0, world.miners[:1])
    boa.env.time_travel(seconds=start + 90 - boa.env.timestamp)  # 30 s after the commit deadline
    s.close_commit(0)
    assert s.round_info(0)[4] == start + 90
    assert s.deadlines(0) == (start + 60, start + 120, start + 180, start + 240)
    assert s.phase(0) == PHASE_SCORING and s.reporting_open(0)
    seal()
    world.commit_scores(0, world.validators[0], [7])
    boa.env.time_travel(seconds=29)
    assert s.phase(0) == PHASE_SCORING
    boa.env.time_travel(seconds=1)
    assert s.phase(0) == PHASE_REVEAL
    boa.env.time_travel(seconds=60)  # nobody revealed: nothing to audit
    assert s.phase(0) == PHASE_RESULT and not s.reporting_open(0)


def test_very_late_close_commit_leaves_nothing_to_wait_for(world: World):
    s = world.s
    start = s.round_info(0)[0]
    world.commit_all(0, world.miners[:2])
    boa.env.time_travel(seconds=start + 1000 - boa.env.timestamp)
    s.close_commit(0)
    assert s.deadlines(0) == (start + 60, start + 120, start + 180, start + 240)
    assert s.phase(0) == PHASE_RESULT and not s.reporting_open(0)
    assert s.result_deadline(0) == start + 240 + world.p.result_duration
    seal()
    with boa.reverts("settlement: scoring phase closed"):
        world.commit_scores(0, world.validators[0], [1, 2])
    with boa.reverts("results: result deadline passed"):
        s.post_result(list(world.settle(0).header.words()), b"\x01" * 256, [], [])
    s.fall_back(0)
    assert s.phase(0) == PHASE_DONE


def test_a_reveal_stores_the_seed_when_nobody_did(world: World):
    s = world.s
    world.commit_all(0)  # closes early; nobody calls store_seed
    closed = s.round_info(0)[3]
    seal(3)
    assert s.round_seed(0) == EMPTY
    world.commit_scores(0, world.validators[0], [1, 2, 3])  # the score commit stores it
    assert s.round_seed(0) == expected_seed(closed)


def test_a_round_without_a_seed_still_falls_back(world: World):
    s = world.s
    boa.env.time_travel(seconds=60)
    s.close_commit(0)
    boa.env.evm.patch.timestamp += 240 + world.p.result_duration  # same block: no seed can be stored
    s.fall_back(0)
    assert s.round_seed(0) == EMPTY and s.current_round() == 1
