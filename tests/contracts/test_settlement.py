"""Settlement: rounds, phases, score commit/reveal, finalize math, attestation, claims."""

import boa
import pytest
from conftest import (
    MINER,
    NO_WITNESS,
    ONE,
    PHASE_AUDIT,
    PHASE_COMMIT,
    PHASE_DONE,
    PHASE_FINALIZE,
    PHASE_NONE,
    PHASE_REVEAL,
    PHASE_SCORING,
    TOKEN,
    VALIDATOR,
    Params,
    World,
    ascending,
    chain_id,
    deploy_settlement,
    deploy_stack,
    expected_blockhash,
    join,
    last_logs,
    make_world,
    partial,
    score_commitment,
    seal,
    settle_ref,
)
from eth_utils import keccak

EMPTY = b"\x00" * 32
ZERO = "0x" + "00" * 20


# -- deploy, wiring, start ------------------------------------------------------------------------


def _settlement_args(**kw):
    token = partial("Token").deploy([], [])
    args = dict(
        token_=token.address, staking_=token.address, run_config_hash_=b"\x11" * 32,
        genesis_model_hash_=b"\x22" * 32, commit_duration_=1, score_duration_=1, reveal_duration_=1,
        emission_per_round_=1, miner_share_bps_=5000, audit_duration_=1,
    )
    args.update(kw)
    return list(args.values())


def test_constructor_reverts():
    for field in ("commit_duration_", "score_duration_", "reveal_duration_", "audit_duration_"):
        with boa.reverts("settlement: zero duration"):
            deploy_settlement(*_settlement_args(**{field: 0}))
    with boa.reverts("settlement: bad miner share"):
        deploy_settlement(*_settlement_args(miner_share_bps_=10_001))
    with boa.reverts("settlement: empty genesis model"):
        deploy_settlement(*_settlement_args(genesis_model_hash_=EMPTY))
    s = deploy_settlement(*_settlement_args(miner_share_bps_=10_000))
    assert (s.run_config_hash(), s.genesis_model_hash(), s.miner_share_bps()) == (b"\x11" * 32, b"\x22" * 32, 10_000)


def test_set_disputes_once_by_deployer():
    s = deploy_settlement(*_settlement_args())
    stranger, d = boa.env.generate_address(), boa.env.generate_address()
    with boa.reverts("settlement: only deployer"):
        s.set_disputes(d, sender=stranger)
    with boa.reverts("settlement: zero address"):
        s.set_disputes(ZERO)
    with boa.reverts("settlement: not wired"):
        s.start()
    s.set_disputes(d)
    assert [e.disputes for e in last_logs(s, "DisputesSet")] == [d]
    assert s.disputes() == d
    with boa.reverts("settlement: disputes already set"):
        s.set_disputes(stranger)


def test_start_needs_a_permitted_validator_and_runs_once():
    stack = deploy_stack()
    miners = [join(stack, MINER, 100 * TOKEN) for _ in range(2)]
    join(stack, VALIDATOR, 199 * TOKEN)  # below the validator minimum: no permit
    with boa.reverts("settlement: no permitted validator"):
        stack.settlement.start()
    v = join(stack, VALIDATOR, 200 * TOKEN)
    stack.settlement.start(sender=miners[0])  # anyone may start
    (ev,) = last_logs(stack.settlement, "RoundOpened")
    assert (ev.round, ev.model_hash, ev.start_time, ev.active_miners, list(ev.validators)) == (
        0, b"\x22" * 32, boa.env.timestamp, 2, [v])
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
    s, m = world.s, world.miners[0]
    s.commit_update(0, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    (ev,) = last_logs(s, "UpdateCommitted")
    assert (ev.round, ev.miner, ev.update_hash, ev.trace_root) == (0, m, b"\xaa" * 32, b"\xbb" * 32)
    assert s.commit_slot(0, m) == keccak(b"\xaa" * 32 + b"\xbb" * 32)
    assert s.has_committed(0, m) and not s.has_committed(0, world.miners[1])
    assert s.round_info(0)[1] == 1 and s.phase(0) == PHASE_COMMIT


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
    assert (ev.round, ev.block_number, ev.commits) == (0, number, 3)
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
    assert ev.commits == 3 and s.phase(0) == PHASE_SCORING
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
    world.run_round(0, {v0: [1, 1], v1: [1, 1]}, miners=[])
    world.attest(1)
    s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=m)
    assert s.has_committed(1, m)


def test_a_late_miner_takes_part_from_the_next_round(world: World):
    """Honest: a miner staked during round 0 is active when round 1 opens, commits there, and
    counts toward round 1's early close."""
    s = world.s
    late = join(world.stack, MINER, world.stack.params.min_miner_stake)
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    world.attest(1)
    assert s.current_round() == 1 and s.round_info(1)[2] == 4
    assert world.st.eligible_since(late) <= s.opening_clock(1)
    world.commit_all(1, world.miners)
    assert s.phase(1) == PHASE_COMMIT
    s.commit_update(1, b"\xaa" * 32, b"\xbb" * 32, sender=late)
    assert s.phase(1) == PHASE_SCORING and s.round_info(1)[1] == 4


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
    assert (ev.block_number, ev.commits) == (boa.env.evm.patch.block_number, 1)
    assert s.round_info(0)[3:5] == (boa.env.evm.patch.block_number, boa.env.timestamp)
    with boa.reverts("settlement: commit phase closed"):
        s.close_commit(0)


def test_seed_is_blockhash_of_closing_block_stored_in_a_later_block(world: World):
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
    s.store_seed(0)
    (ev,) = last_logs(s, "SeedStored")
    seed = expected_blockhash(closed)
    assert seed != expected_blockhash(closed + 1)  # the fake chain tells blocks apart
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
    assert [e.seed for e in last_logs(s, "SeedStored")] == [expected_blockhash(closed)]
    assert s.round_seed(0) == expected_blockhash(closed)


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
    assert (ev.block_number, ev.commits) == (now, 3)
    assert s.round_info(0)[3] == now and s.round_seed(0) == EMPTY
    with boa.reverts("settlement: seed block not sealed"):
        s.store_seed(0)
    seal()
    world.commit_scores(0, world.validators[0], [1, 2, 3])
    assert s.round_seed(0) == expected_blockhash(now)


def test_seed_at_exactly_256_blocks_is_still_a_blockhash(world: World):
    s = world.s
    world.commit_all(0)
    closed = s.round_info(0)[3]
    seal(256)
    s.store_seed(0)
    assert s.round_seed(0) == expected_blockhash(closed)


# -- scoring phase --------------------------------------------------------------------------------


def test_score_commit_reverts():
    w = make_world(Params(max_permits=2), validator_stakes=(300 * TOKEN, 250 * TOKEN, 200 * TOKEN))
    s = w.s
    v0, v1, v2 = w.validators
    assert list(s.validators_of(0)) == [v0, v1]
    c = b"\x07" * 32
    with boa.reverts("settlement: commit phase open"):
        s.commit_scores(0, c, sender=v0)
    w.to_scoring(0)
    for who in (v2, w.miners[0], boa.env.generate_address()):  # v2 is outside the top-K
        with boa.reverts("settlement: not a permitted validator"):
            s.commit_scores(0, c, sender=who)
    with boa.reverts("settlement: empty commitment"):
        s.commit_scores(0, EMPTY, sender=v0)
    s.commit_scores(0, c, sender=v0)
    (ev,) = last_logs(s, "ScoresCommitted")
    assert (ev.round, ev.validator, ev.commitment) == (0, v0, c)
    assert s.score_commitment(0, v0) == c and s.score_commit_count(0) == 1
    with boa.reverts("settlement: scores already committed"):
        s.commit_scores(0, b"\x08" * 32, sender=v0)
    assert s.phase(0) == PHASE_SCORING
    boa.env.time_travel(seconds=60)
    assert s.phase(0) == PHASE_REVEAL
    with boa.reverts("settlement: scoring phase closed"):
        s.commit_scores(0, c, sender=v1)


def test_scoring_closes_early_when_every_validator_committed(world: World):
    s = world.s
    ordered = world.to_scoring(0)
    world.commit_scores(0, world.validators[0], [1, 2, 3], ordered)
    assert s.phase(0) == PHASE_SCORING and s.score_closed_time(0) == 0
    world.commit_scores(0, world.validators[1], [1, 2, 3], ordered)
    assert s.phase(0) == PHASE_REVEAL
    assert s.score_closed_time(0) == boa.env.timestamp
    assert s.deadlines(0)[1:] == (boa.env.timestamp, boa.env.timestamp + 60, boa.env.timestamp + 120)


# -- reveal phase ---------------------------------------------------------------------------------


def test_reveal_happy_path_and_early_close(world: World):
    s = world.s
    ordered = world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30], ordered)
    with boa.reverts("settlement: scoring phase open"):
        world.reveal(0, v0)
    world.commit_scores(0, v1, [11, 21, 31], ordered)
    world.reveal(0, v0)
    (ev,) = last_logs(s, "ScoresRevealed")
    _, _, witnesses, sigs, _ = world.reveal_args(0, v0)
    assert (ev.round, ev.validator, list(ev.miners), list(ev.scores), list(ev.witnesses), ev.challenge_sigs) == (
        0, v0, ordered, [10, 20, 30], witnesses, sigs)
    assert s.revealed(0, v0) and not s.revealed(0, v1)
    assert list(s.miners_of(0)) == ordered
    assert list(s.scores_of(0, v0)) == [10, 20, 30] and list(s.scores_of(0, v1)) == []
    assert s.phase(0) == PHASE_REVEAL
    with boa.reverts("settlement: already revealed"):
        world.reveal(0, v0)
    world.reveal(0, v1)
    assert list(s.revealed_validators_of(0)) == [v0, v1]
    assert s.phase(0) == PHASE_AUDIT  # every committer revealed: no need to wait


def test_reveal_reverts(world: World):
    s = world.s
    ordered = world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30], ordered)
    miners, scores, witnesses, sigs, salt = world.reveal_args(0, v0)
    boa.env.time_travel(seconds=60)
    with boa.reverts("settlement: no score commitment"):
        s.reveal_scores(0, miners, scores, witnesses, sigs, salt, sender=v1)
    with boa.reverts("settlement: length mismatch"):
        s.reveal_scores(0, miners, [10, 20], witnesses, sigs, salt, sender=v0)
    with boa.reverts("settlement: length mismatch"):
        s.reveal_scores(0, miners, scores, witnesses[:2], sigs, salt, sender=v0)
    with boa.reverts("settlement: one 64-byte challenge signature per miner"):
        s.reveal_scores(0, miners, scores, witnesses, sigs[:-1], salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, miners, [10, 20, 31], witnesses, sigs, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, miners, scores, witnesses, sigs, b"\x06" * 32, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, miners[::-1], scores[::-1], witnesses[::-1], sigs, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):  # the witnesses are committed
        s.reveal_scores(0, miners, scores, [witnesses[1], witnesses[0], witnesses[2]], sigs, salt, sender=v0)
    with boa.reverts("settlement: reveal does not match commitment"):  # so are the signatures
        s.reveal_scores(0, miners, scores, witnesses, sigs[64:128] + sigs[:64] + sigs[128:], salt, sender=v0)
    boa.env.time_travel(seconds=60)
    with boa.reverts("settlement: reveal deadline passed"):
        s.reveal_scores(0, miners, scores, witnesses, sigs, salt, sender=v0)


def test_one_validators_commitment_cannot_be_revealed_by_another(world: World):
    s = world.s
    ordered = world.to_scoring(0)
    v0, v1 = world.validators
    world.commit_scores(0, v0, [10, 20, 30], ordered)
    s.commit_scores(0, s.score_commitment(0, v0), sender=v1)  # v1 copies v0's commitment
    with boa.reverts("settlement: reveal does not match commitment"):
        s.reveal_scores(0, *world.reveal_args(0, v0), sender=v1)
    world.reveal(0, v0)
    assert not s.revealed(0, v1)


@pytest.mark.parametrize("case", ["descending", "duplicate", "subset", "stranger", "second_differs"])
def test_reveal_requires_every_committed_miner_ascending(case):
    w = make_world(n_miners=4, validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    ordered = w.to_scoring(0, w.miners[:3])
    v0, v1, _ = w.validators
    outsider = w.miners[3]  # eligible but did not commit
    bad = {
        "descending": ordered[::-1],
        "duplicate": [ordered[0], ordered[0], ordered[1]],
        "subset": ordered[:2],
        "stranger": ascending(ordered[:2] + [outsider]),
        "second_differs": ascending(ordered[:2] + [outsider]),
    }[case]
    expected = {
        "descending": "settlement: miners not strictly ascending",
        "duplicate": "settlement: miners not strictly ascending",
        "subset": "settlement: miners must be every committed miner",
        "stranger": "settlement: miners must be every committed miner",
        "second_differs": "settlement: miners must be every committed miner",
    }[case]
    if case == "second_differs":  # the first reveal fixes the list; a later one must match it
        w.commit_scores(0, v0, [1, 2, 3], ordered)
    w.commit_scores(0, v1, [1] * len(bad), bad)
    boa.env.time_travel(seconds=60)
    if case == "second_differs":
        w.reveal(0, v0)
    with boa.reverts(expected):
        w.reveal(0, v1)


def test_score_commitment_hash_matches_python(world: World):
    ms = ascending(world.miners)
    v = world.validators[0]
    wits, sigs = [b"\x01" * 32, b"\x02" * 32, NO_WITNESS], [b"\x03" * 64, b"\x04" * 64, b"\x05" * 64]
    got = world.s.score_commitment_hash(v, 7, ms, [1, 65535, 0], wits, b"".join(sigs), b"\x09" * 32)
    addr = world.stack.scores.address
    assert got == score_commitment(chain_id(), addr, v, 7, ms, [1, 65535, 0], wits, sigs, b"\x09" * 32)
    assert got != score_commitment(chain_id(), addr, world.validators[1], 7, ms, [1, 65535, 0], wits, sigs, b"\x09" * 32)
    assert got != score_commitment(chain_id(), addr, v, 7, ms, [1, 65535, 0], wits[::-1], sigs, b"\x09" * 32)
    from protocol.chain.commitments import score_commitment as client_commitment

    assert got == client_commitment(chain_id(), addr, v, 7, ms, [1, 65535, 0], wits, sigs, b"\x09" * 32)


# -- finalize -------------------------------------------------------------------------------------


def test_finalize_reverts(world: World):
    s = world.s
    with boa.reverts("settlement: reveal phase open"):
        s.finalize(0)
    with boa.reverts("settlement: reveal phase open"):
        s.finalize(3)
    ordered = world.to_scoring(0)
    world.commit_scores(0, world.validators[0], [1, 2, 3], ordered)
    world.commit_scores(0, world.validators[1], [1, 2, 3], ordered)
    world.reveal(0, world.validators[0])
    with boa.reverts("settlement: reveal phase open"):  # one committer still to reveal
        s.finalize(0)
    boa.env.time_travel(seconds=60)  # the reveal deadline ends the phase without it
    assert s.phase(0) == PHASE_AUDIT
    with boa.reverts("settlement: audit phase open"):
        s.finalize(0)
    boa.env.time_travel(seconds=60)  # the audit deadline ends it without audits_done
    assert s.phase(0) == PHASE_FINALIZE
    s.finalize(0)
    assert s.phase(0) == PHASE_DONE
    with boa.reverts("settlement: already finalized"):
        s.finalize(0)


def _check_settlement(w: World, rnd: int, scores: dict, ordered: list, held=(), forfeited=()):
    s, p = w.s, w.stack.params
    weights = {v: s.validator_weight(rnd, v) for v in scores}
    by_miner = {v: [dict(zip(w.scores[(rnd, v)][0], w.scores[(rnd, v)][1], strict=True))[m] for m in ordered] for v in scores}
    return settle_ref(p, weights, by_miner, ordered, held, forfeited)


def test_finalize_matches_reference_and_mints_exactly_the_credits():
    w = make_world(n_miners=4, validator_stakes=(500 * TOKEN, 300 * TOKEN, 200 * TOKEN))
    s, t = w.s, w.t
    v0, v1, v2 = w.validators
    ordered = ascending(w.miners)
    scores = {v0: [60000, 30000, 0, 7], v1: [50000, 31000, 10, 7], v2: [65535, 0, 20, 9]}
    supply = t.totalSupply()
    w.run_round(0, scores, finalize=False)
    s.finalize(0, sender=boa.env.generate_address())
    logs = last_logs(s)
    cons, mrew, vrew, agree = _check_settlement(w, 0, scores, ordered)
    # stakes 500/300/200: 60000 has support 700/1000 -> consensus 60000 for miner 0, etc.
    # miner 2: 10 has the support of exactly half (500/1000), which is not a majority -> 0
    assert cons[ordered[0]] == 60000 and cons[ordered[1]] == 30000 and cons[ordered[2]] == 0
    settled = {e.miner: e for e in logs if type(e).__name__ == "MinerSettled"}
    vsettled = {e.validator: e for e in logs if type(e).__name__ == "ValidatorSettled"}
    (fin,) = [e for e in logs if type(e).__name__ == "Finalized"]
    for m in ordered:
        assert s.consensus(0, m) == cons[m] == settled[m].consensus
        assert s.claimable(m) == mrew[m] == settled[m].reward
        assert s.reputation(m) == cons[m] // 10 == settled[m].reputation
        assert not settled[m].held
    for v in scores:
        assert s.claimable(v) == vrew[v] == vsettled[v].reward
        assert vsettled[v].agreement == agree[v]
    assert agree[v0] == ONE and agree[v0] > agree[v2]  # v0 scored miner 2 at its consensus, 0
    credited = sum(mrew.values()) + sum(vrew.values())
    assert (fin.minted, fin.miners, fin.validators) == (credited, 4, 3)
    assert s.total_minted() == s.total_claimable() == credited
    assert t.totalSupply() == supply + credited
    assert t.balanceOf(w.stack.rewards.address) == credited
    # the rounding dust of each pool is not minted
    assert w.stack.params.emission - 8 < credited <= w.stack.params.emission


def test_miner_rewards_proportional_to_consensus(world: World):
    v0, v1 = world.validators
    ordered = ascending(world.miners)
    world.run_round(0, {v0: [3000, 1000, 0], v1: [3000, 1000, 0]})
    pool = 700 * TOKEN
    assert [world.s.claimable(m) for m in ordered] == [pool * 3 // 4, pool // 4, 0]
    assert world.s.claimable(v0) * 2 == world.s.claimable(v1) * 3  # equal agreement: by stake 300:200


def test_validator_rewards_by_stake_times_agreement():
    w = make_world(validator_stakes=(200 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    v0, v1, v2 = w.validators
    # v2 is far off consensus (3x above on one miner, 0 on another)
    w.run_round(0, {v0: [100, 100, 100], v1: [100, 100, 100], v2: [300, 0, 100]})
    a2 = 200 * ONE // 500  # sum(min)=100+0+100, sum(max)=300+100+100
    pool = 300 * TOKEN
    total = 2 * ONE + a2
    assert w.s.claimable(v0) == w.s.claimable(v1) == pool * ONE // total
    assert w.s.claimable(v2) == pool * a2 // total


def test_all_zero_consensus_mints_no_miner_pool(world: World):
    v0, v1 = world.validators
    world.run_round(0, {v0: [0, 0, 0], v1: [0, 0, 0]})
    assert all(world.s.claimable(m) == 0 for m in world.miners)
    # a validator that matches an all-zero consensus has full agreement
    assert world.s.claimable(v0) + world.s.claimable(v1) == world.s.total_minted() <= 300 * TOKEN
    assert world.s.claimable(v0) == 180 * TOKEN


def test_unrevealed_validator_earns_nothing_and_does_not_vote():
    w = make_world(validator_stakes=(300 * TOKEN, 200 * TOKEN, 200 * TOKEN))
    s = w.s
    v0, v1, v2 = w.validators
    ordered = w.to_scoring(0)
    w.commit_scores(0, v0, [100, 100, 100], ordered)
    w.commit_scores(0, v1, [100, 100, 100], ordered)
    w.commit_scores(0, v2, [60000, 60000, 60000], ordered)
    w.reveal(0, v0)
    w.reveal(0, v1)
    boa.env.time_travel(seconds=60)
    w.finish_audits(0)
    s.finalize(0)
    assert s.claimable(v2) == 0
    assert [s.consensus(0, m) for m in ordered] == [100, 100, 100]
    assert s.claimable(v0) + s.claimable(v1) == s.total_minted() - sum(s.claimable(m) for m in ordered)


def test_finalize_without_reveals_or_commits_mints_nothing(world: World):
    s = world.s
    boa.env.time_travel(seconds=60)
    s.close_commit(0)
    boa.env.time_travel(seconds=60)
    assert s.phase(0) == PHASE_FINALIZE  # nobody committed scores: nothing to wait for
    s.finalize(0)
    (ev,) = last_logs(s, "Finalized")
    assert (ev.minted, ev.miners, ev.validators) == (0, 0, 0)
    assert s.total_minted() == 0 and world.t.totalSupply() == world.stack.genesis


def test_reveal_with_no_committed_miners(world: World):
    s = world.s
    world.to_scoring(0, [])
    world.commit_scores(0, world.validators[0], [], [])
    world.commit_scores(0, world.validators[1], [], [])
    world.reveal(0, world.validators[0])
    world.reveal(0, world.validators[1])
    world.finish_audits(0)
    s.finalize(0)
    assert s.total_minted() == 0


def test_reputation_is_an_integer_ema_over_rounds(world: World):
    v0, v1 = world.validators
    ordered = ascending(world.miners)
    rep = 0
    for rnd, c in enumerate([65535, 65535, 1234, 0]):
        world.run_round(rnd, {v0: [c, 0, 0], v1: [c, 0, 0]}, ordered)
        rep = (9 * rep + c) // 10
        assert world.s.reputation(ordered[0]) == rep
        world.attest(rnd + 1)
    assert world.s.reputation(ordered[0]) == 10196  # 6553, 12451, 11329, 10196
    assert world.s.reputation(ordered[1]) == 0


# -- attest ---------------------------------------------------------------------------------------


def test_attest_reverts(world: World):
    s = world.s
    v0, v1 = world.validators
    with boa.reverts("settlement: round 0 uses the genesis model"):
        s.attest_model(0, b"\x33" * 32, 1, sender=v0)
    with boa.reverts("settlement: previous round not finalized"):
        s.attest_model(1, b"\x33" * 32, 1, sender=v0)
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    with boa.reverts("settlement: not a permitted validator"):
        s.attest_model(1, b"\x33" * 32, 1, sender=world.miners[0])
    late = join(world.stack, VALIDATOR, 1000 * TOKEN)  # not a validator of round 0
    with boa.reverts("settlement: not a permitted validator"):
        s.attest_model(1, b"\x33" * 32, 1, sender=late)
    with boa.reverts("settlement: empty model hash"):
        s.attest_model(1, EMPTY, 1, sender=v1)
    s.attest_model(1, b"\x33" * 32, 1, sender=v1)
    with boa.reverts("settlement: already attested"):
        s.attest_model(1, b"\x44" * 32, 1, sender=v1)


def test_attest_records_stake_majority_hash_and_opens_next_round(world: World):
    s = world.s
    v0, v1 = world.validators  # 300 / 200
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    late = join(world.stack, VALIDATOR, 1000 * TOKEN)
    s.attest_model(1, b"\x44" * 32, 7, sender=v1)  # 200 of 500: no majority
    (ev,) = last_logs(s, "ModelAttestation")
    assert (ev.round, ev.validator, ev.model_hash, ev.heldout_loss) == (1, v1, b"\x44" * 32, 7)
    assert s.model_hash(1) == EMPTY and s.current_round() == 0 and s.phase(1) == PHASE_NONE
    assert s.attest_weight(1, b"\x44" * 32) == 200 * TOKEN
    s.attest_model(1, b"\x33" * 32, 9, sender=v0)  # 300 of 500 on another hash: majority
    logs = last_logs(s)
    assert [(e.model_hash, e.heldout_loss) for e in logs if type(e).__name__ == "ModelRecorded"] == [(b"\x33" * 32, 9)]
    (opened,) = [e for e in logs if type(e).__name__ == "RoundOpened"]
    assert opened.round == 1 and list(opened.validators) == [late, v0, v1]  # permits re-snapshotted
    assert (s.model_hash(1), s.heldout_loss(1), s.current_round()) == (b"\x33" * 32, 9, 1)
    assert s.phase(1) == PHASE_COMMIT and s.total_weight(1) == 1500 * TOKEN


def test_attest_loss_is_lower_median_of_the_agreeing_validators():
    w = make_world(validator_stakes=(200 * TOKEN,) * 4)
    vs = w.validators
    w.run_round(0, {v: [5, 5, 5] for v in vs})
    h = b"\x55" * 32
    w.s.attest_model(1, h, 9_000_000, sender=vs[0])
    w.s.attest_model(1, h, 3_000_000, sender=vs[1])
    assert w.s.model_hash(1) == EMPTY  # 400 of 800 is not a majority
    w.s.attest_model(1, h, 6_000_000, sender=vs[2])
    assert w.s.heldout_loss(1) == 6_000_000
    w.s.attest_model(1, h, 1, sender=vs[3])  # late: recorded, changes nothing
    assert w.s.attested_by(1, vs[3]) and w.s.heldout_loss(1) == 6_000_000 and w.s.current_round() == 1


def test_attest_needs_a_permitted_validator_to_open_the_round(world: World):
    s = world.s
    v0, v1 = world.validators
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    for v in (v0, v1):
        world.st.request_unbond(world.st.staked(v), sender=v)
    with boa.reverts("settlement: no permitted validator"):
        s.attest_model(1, b"\x33" * 32, 1, sender=v0)


def test_top_k_permits_only_let_top_validators_score():
    w = make_world(Params(max_permits=2), validator_stakes=(250 * TOKEN, 200 * TOKEN, 300 * TOKEN))
    v0, v1, v2 = w.validators
    assert list(w.s.validators_of(0)) == [v2, v0]
    assert w.s.validator_weight(0, v1) == 0 and w.s.total_weight(0) == 550 * TOKEN
    ordered = w.to_scoring(0)
    with boa.reverts("settlement: not a permitted validator"):
        w.commit_scores(0, v1, [1, 2, 3], ordered)
    w.commit_scores(0, v0, [1, 2, 3], ordered)
    w.commit_scores(0, v2, [1, 2, 3], ordered)
    assert w.s.phase(0) == PHASE_REVEAL  # both permit holders committed


# -- claim and disputes-only hooks ----------------------------------------------------------------


def test_claim_pays_once(world: World):
    s, t = world.s, world.t
    v0, v1 = world.validators
    with boa.reverts("settlement: nothing to claim"):
        s.claim(sender=v0)
    world.run_round(0, {v0: [1, 2, 3], v1: [1, 2, 3]})
    amount = s.claimable(v0)
    before = t.balanceOf(v0)
    assert s.claim(sender=v0) == amount > 0
    (ev,) = last_logs(s, "Claimed")
    assert (ev.account, ev.amount) == (v0, amount)
    assert t.balanceOf(v0) == before + amount
    assert (s.claimable(v0), s.claimed(v0)) == (0, amount)
    assert s.total_claimable() == t.balanceOf(world.stack.rewards.address)
    with boa.reverts("settlement: nothing to claim"):
        s.claim(sender=v0)


def test_only_disputes_hooks(world: World):
    s = world.s
    m = world.miners[0]
    for caller in (world.validators[0], world.stack.deployer, world.st.address):
        with boa.reverts("settlement: only disputes"):
            s.report_opened(0, m, sender=caller)
        with boa.reverts("settlement: only disputes"):
            s.report_resolved(0, m, False, sender=caller)
    with boa.reverts("settlement: no open report"):
        s.report_resolved(0, m, False, sender=world.d.address)


def test_reporting_open_window(world: World):
    s = world.s
    v0, v1 = world.validators
    assert not s.reporting_open(0)  # commit phase
    ordered = world.to_scoring(0)
    assert s.reporting_open(0)
    world.commit_scores(0, v0, [1, 2, 3], ordered)
    boa.env.time_travel(seconds=60)
    world.reveal(0, v0)
    boa.env.time_travel(seconds=60)  # the reveal deadline: the audit phase keeps reports open
    assert s.phase(0) == PHASE_AUDIT and s.reporting_open(0)
    boa.env.time_travel(seconds=59)
    assert s.reporting_open(0)
    boa.env.time_travel(seconds=1)
    assert s.phase(0) == PHASE_FINALIZE and not s.reporting_open(0)  # audit deadline


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


def test_round_with_no_active_miner_closes_at_its_deadline_and_caps_commits():
    """Round 1 opens with 0 active miners (all unbonded): nobody can close it early. Miners
    joining after it opened may not commit into it (rule 6: only miners eligible at the opening
    take part), so its deadline closes it with no commit; the 256-commit cap is exercised with
    miners eligible at the opening in test_findings."""
    w = make_world(Params(min_miner_stake=1), n_miners=1)
    s = w.s
    v0, v1 = w.validators
    w.run_round(0, {v0: [1], v1: [1]})
    w.st.request_unbond(w.st.staked(w.miners[0]), sender=w.miners[0])
    w.attest(1)
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
    assert s.phase(0) == PHASE_FINALIZE and not s.reporting_open(0)


def test_very_late_close_commit_leaves_nothing_to_wait_for(world: World):
    s = world.s
    start = s.round_info(0)[0]
    world.commit_all(0, world.miners[:2])
    boa.env.time_travel(seconds=start + 1000 - boa.env.timestamp)
    s.close_commit(0)
    assert s.deadlines(0) == (start + 60, start + 120, start + 180, start + 240)
    assert s.phase(0) == PHASE_FINALIZE and not s.reporting_open(0)
    seal()
    with boa.reverts("settlement: scoring phase closed"):
        world.commit_scores(0, world.validators[0], [1, 2])
    s.finalize(0)
    assert s.phase(0) == PHASE_DONE


def test_finalize_stores_the_seed_when_nobody_did(world: World):
    s = world.s
    world.commit_all(0)  # closes early; nobody scores, nobody calls store_seed
    closed = s.round_info(0)[3]
    seal(3)
    boa.env.time_travel(seconds=120)
    assert s.round_seed(0) == EMPTY and s.phase(0) == PHASE_FINALIZE
    s.finalize(0)
    assert [e.seed for e in last_logs(s, "SeedStored")] == [expected_blockhash(closed)]
    assert s.round_seed(0) == expected_blockhash(closed)


def test_finalize_in_the_closing_block_stores_no_seed(world: World):
    s = world.s
    boa.env.time_travel(seconds=60)
    s.close_commit(0)
    boa.env.evm.patch.timestamp += 120  # same block: the closing block is not sealed yet
    s.finalize(0)
    assert s.round_seed(0) == EMPTY and last_logs(s, "SeedStored") == []
