"""Results, Rewards claims and signer slashing (settlement v2, issue 14).

Four validators of equal stake with registered BLS keys are deployed once for the module; each
test forks them. Every post that reaches the signature check is a pairing (seconds in py-evm),
so tests that only exercise the checks in front of it pass a dummy signature.
"""

from __future__ import annotations

import boa
import pytest
from conftest import (
    GENESIS_MODEL,
    KIND_REPLAY,
    NEXT_MODEL,
    SIG,
    TOKEN,
    VOTE_CONFIRM,
    ZERO_ADDRESS,
    Posted,
    World,
    ascending,
    chain_id,
    deploy_stack,
    keyed_world,
    last_logs,
    make_world,
    now,
    partial,
    register_key,
)
from eth_utils import keccak

from protocol.core.crypto.bls import bls_aggregate, bls_sign, g2_to_eip2537
from protocol.core.settlement.abi_words import word
from protocol.core.settlement.result_header import build_result
from protocol.core.settlement.score_vector import scores_hash

kworld_base = keyed_world(validator_stakes=(300 * TOKEN,) * 4)

DUMMY_SIG = b"\x01" * 256
H_DOMAIN, H_CHAIN, H_CONTRACT, H_RUN, H_ROUND, H_MODEL = 0, 1, 2, 3, 4, 5
H_MINTED, H_LOSS, H_QUORUM = 11, 12, 13


def set_word(header: list, k: int, value) -> list:
    out = list(header)
    out[k] = word(value)
    return out


def light_reveals(w: World, rnd: int) -> tuple:
    """TreeChallenges' LightReveals of `rnd`: per round validator H(scores), witness root, loss."""
    hashes, roots, losses = [], [], []
    for v in w.s.validators_of(rnd):
        if w.s.revealed(rnd, v):
            scores, witness_root, loss, _ = w.vectors[(rnd, v)]
            hashes.append(scores_hash(scores))
            roots.append(witness_root)
            losses.append(loss)
        else:
            hashes.append(b"\x00" * 32)
            roots.append(b"\x00" * 32)
            losses.append(0)
    return hashes, roots, losses


def challenge_header(w: World, posted: Posted, settled, challenger) -> None:
    w.stack.account_challenges.challenge_header(
        posted.round, posted.header, posted.non_signers_hash, posted.posted_time, posted.attempt,
        light_reveals(w, posted.round), sender=challenger)


# -- the signers' stake ----------------------------------------------------------------------------


def test_three_of_four_sign_the_round_is_final_and_paid_and_the_next_round_opens(kworld: World):
    w = kworld
    silent = w.validators[3]
    scores = {v: [1000, 2000, 3000] for v in w.validators[:3]}  # the fourth never commits nor signs
    w.to_result(0, scores)
    supply = w.t.totalSupply()
    settled = w.settle(0)
    assert settled.result.quorum and settled.header.minted > 0
    posted = w.post(0, settled, signers=w.validators[:3])
    assert posted.non_signers == [silent]
    assert [e.attempt for e in last_logs(w.stack.results, "ResultPosted")] == [1]
    assert w.s.pending(0) != b"\x00" * 32 and w.s.pending(1) == b"\x00" * 32  # one slot, tagged by round
    with boa.reverts("results: challenge window open"):
        w.s.finalize_result(*posted.final_args())
    w.finalize(posted)
    minted = settled.header.minted
    assert w.s.total_minted() == minted
    assert w.t.totalSupply() == supply + minted
    assert w.t.balanceOf(w.stack.rewards.address) == minted
    assert w.s.claims_root(0) == settled.header.claims_root
    assert w.s.final_root(0) == posted.root and w.s.pending(0) == b"\x00" * 32
    assert w.s.heldout_loss(0) == settled.header.heldout_loss and not w.s.fallback(0)
    assert (w.s.current_round(), w.s.model_hash(1), w.s.finalized(0)) == (1, NEXT_MODEL, True)
    assert w.s.phase(1) == 1  # the commit phase of round 1 is open
    with boa.reverts("results: not the pending result"):
        w.s.finalize_result(*posted.final_args())
    with boa.reverts("results: round already ended"):
        w.s.post_result(posted.header, DUMMY_SIG, [], [])


def test_signers_holding_two_thirds_or_less_are_refused(kworld: World):
    w = kworld
    w.to_result(0)
    header = list(w.settle(0).header.words())
    half, keys = w.non_signer_args(0, w.validators[:2])
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, w.validators[:2]), half, keys)


def test_exactly_two_thirds_of_the_stake_is_refused():
    w = make_world(validator_stakes=(200 * TOKEN,) * 3, bls=True)
    w.to_result(0)
    header = list(w.settle(0).header.words())
    absent, keys = w.non_signer_args(0, w.validators[:2])
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, w.validators[:2]), absent, keys)


# -- absence costs the absent (issue 28 item 4) ------------------------------------------------------


def test_two_of_three_equal_validators_certify_without_the_third_which_earns_nothing():
    """The third never reveals nor signs: 2/3 of the stake revealed is the round's quorum, and
    both revealed validators are more than 2/3 of the revealed stake, so the round settles and
    pays; the absent one's dividend is 0."""
    w = make_world(validator_stakes=(200 * TOKEN,) * 3, bls=True)
    absent = w.validators[2]
    w.to_result(0, {v: [1000, 2000, 3000] for v in w.validators[:2]})
    settled = w.settle(0)
    assert settled.result.quorum and all(p > 0 for p in settled.result.pay)
    posted = w.post(0, settled, signers=w.validators[:2])
    assert posted.non_signers == [absent]
    w.finalize(posted)
    assert w.s.finalized(0) and not w.s.fallback(0)
    assert settled.entry_of(str(absent)).cumulative == 0
    assert all(settled.entry_of(str(v)).cumulative > 0 for v in w.validators[:2])


def test_a_signer_that_never_revealed_cannot_make_up_a_certificate(kworld: World):
    """Four equal validators, the fourth never reveals: three signers counting it pass the old
    measure (3/4 of all stake) but only two of them revealed, exactly 2/3 of the revealed stake.
    The three that revealed certify."""
    w = kworld
    absent = w.validators[3]
    w.to_result(0, {v: [1000, 2000, 3000] for v in w.validators[:3]})
    header = list(w.settle(0).header.words())
    colluders = [w.validators[0], w.validators[1], absent]
    non_signers, keys = w.non_signer_args(0, colluders)
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, colluders), non_signers, keys)
    w.post(0, signers=w.validators[:3])
    assert w.s.pending(0) != b"\x00" * 32


def test_without_the_quorum_signers_need_more_than_two_thirds_of_all_stake():
    """One of three revealed: the round's result is the fallback's, and its certificate is
    measured against the whole permitted stake: the revealed one with one other is refused."""
    w = make_world(validator_stakes=(200 * TOKEN,) * 3, bls=True)
    w.to_result(0, {w.validators[0]: [1000, 2000, 3000]})
    settled = w.settle(0)
    assert not settled.result.quorum
    header = list(settled.header.words())
    non_signers, keys = w.non_signer_args(0, w.validators[:2])
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, w.validators[:2]), non_signers, keys)
    w.post(0, settled, signers=w.validators)
    assert w.s.pending(0) != b"\x00" * 32


def three_keyed_one_keyless() -> World:
    """Four validators of equal stake, the last without a BLS key, round 0 at its result phase."""
    w = make_world(validator_stakes=(200 * TOKEN,) * 4, start=False)
    for i, v in enumerate(w.validators[:3]):
        register_key(w, v, i)
    w.s.start()
    w.to_result(0)
    return w


def test_a_validator_without_a_key_never_counts_as_a_signer():
    """Three keyed validators and one without a key, equal stakes: the keyless one cannot sign,
    listed or not; with one keyed non-signer the signers hold exactly half."""
    w = three_keyed_one_keyless()
    settled = w.settle(0)
    header = list(settled.header.words())
    keyless = w.validators[3]
    with boa.reverts("results: key outside the round's aggregate"):
        w.s.post_result(header, w.sign(header, w.validators[:3]), [keyless], [b"\x01" * 128])
    absent, keys = w.non_signer_args(0, [w.validators[0], w.validators[1], keyless])
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, w.validators[:2]), absent, keys)
    w.s.post_result(header, w.sign(header, w.validators[:3]), [], [])  # 3/4 keyed: the keyless one is out
    assert w.s.pending(0) != b"\x00" * 32


def test_a_validator_without_a_key_is_never_slashed_as_a_signer():
    """A wrong root signed by the three keyed validators, the keyless one left off the list (it
    need not be listed): once the root is rejected the signers are slashable, the keyless one is not."""
    w = three_keyed_one_keyless()
    honest = w.settle(0)
    wrong = set_word(list(honest.header.words()), H_LOSS, honest.header.heldout_loss + 1)
    w.s.post_result(wrong, w.sign(wrong, w.validators[:3]), [], [])
    posted = Posted(honest, wrong, [], now(), 1)
    challenge_header(w, posted, honest, w.miners[2])
    args = (0, 1, posted.root, [], posted.posted_time)
    keyless = w.validators[3]
    with boa.reverts("results: not a keyed validator of the round"):
        w.s.slash_signer(*args, keyless)
    assert w.s.slash_signer(*args, w.validators[0]) > 0
    assert w.st.staked(keyless) == 200 * TOKEN


def test_non_signer_lists_are_checked(kworld: World):
    w = kworld
    w.to_result(0)
    header = list(w.settle(0).header.words())
    a, b = ascending(w.validators)[:2]
    ka, kb = w.stack.keys.key_of(a), w.stack.keys.key_of(b)
    with boa.reverts("results: non-signers not strictly ascending"):
        w.s.post_result(header, DUMMY_SIG, [b, a], [kb, ka])
    with boa.reverts("results: non-signers not strictly ascending"):
        w.s.post_result(header, DUMMY_SIG, [a, a], [ka, ka])
    with boa.reverts("results: non-signer not a permitted validator"):
        w.s.post_result(header, DUMMY_SIG, [w.miners[0]], [b""])
    with boa.reverts("results: wrong non-signer key"):
        w.s.post_result(header, DUMMY_SIG, [a], [kb])
    with boa.reverts("results: wrong non-signer key"):
        w.s.post_result(header, DUMMY_SIG, [a], [b""])
    with boa.reverts("results: one key per non-signer"):
        w.s.post_result(header, DUMMY_SIG, [a], [])


def test_a_bad_aggregate_signature_is_refused(kworld: World):
    w = kworld
    w.to_result(0)
    header = list(w.settle(0).header.words())
    three = w.validators[:3]
    # the fixtures' one-signing aggregate is the aggregate of the individual signatures
    root = keccak(b"".join(header))
    sigs = [bls_sign(w.secrets[v], root) for v in three]
    assert w.sign(header, three) == g2_to_eip2537(bls_aggregate(sigs))
    # three signed, but the post claims the fourth signed too
    with boa.reverts("results: invalid aggregate signature"):
        w.s.post_result(header, w.sign(header, three), [], [])
    assert w.s.pending(0) == b"\x00" * 32


# -- replays ---------------------------------------------------------------------------------------


def test_a_signature_from_another_round_is_refused(kworld: World):
    w = kworld
    w.run_round(0)
    old = w.settled[0]
    w.to_result(1)
    header1 = list(w.settle(1).header.words())
    old_header = list(old.header.words())
    with boa.reverts("results: round already ended"):  # the old header itself
        w.s.post_result(old_header, w.sign(old_header, w.validators), [], [])
    with boa.reverts("results: invalid aggregate signature"):
        w.s.post_result(header1, w.sign(old_header, w.validators), [], [])


def test_a_signature_from_another_run_chain_or_contract_is_refused(kworld: World):
    w = kworld
    w.to_result(0)
    other = deploy_stack(run_config_hash=b"\x99" * 32)  # another run of the protocol
    settled = build_result(w.inputs(0), chain_id(), str(other.results.address), other.run_config_hash, NEXT_MODEL)
    theirs = list(settled.header.words())
    sig = w.sign(theirs, w.validators)
    with boa.reverts("results: wrong contract"):
        w.s.post_result(theirs, sig, [], [])
    ours = set_word(theirs, H_CONTRACT, str(w.stack.results.address))
    with boa.reverts("results: wrong run"):
        w.s.post_result(ours, sig, [], [])
    ours = set_word(ours, H_RUN, w.stack.run_config_hash)
    assert ours == list(w.settle(0).header.words())
    with boa.reverts("results: invalid aggregate signature"):  # the right words, but not what they signed
        w.s.post_result(ours, sig, [], [])
    with boa.reverts("results: wrong chain"):
        w.s.post_result(set_word(ours, H_CHAIN, chain_id() + 1), sig, [], [])
    with boa.reverts("results: wrong domain"):
        w.s.post_result(set_word(ours, H_DOMAIN, keccak(b"veritrain/result/v0")), sig, [], [])
    with boa.reverts("results: empty model hash"):
        w.s.post_result(set_word(ours, H_MODEL, b"\x00" * 32), sig, [], [])
    with boa.reverts("results: bad quorum flag"):
        w.s.post_result(set_word(ours, H_QUORUM, 2), sig, [], [])
    with boa.reverts("results: payout above the emission"):
        w.s.post_result(set_word(ours, H_MINTED, w.p.emission + 1), sig, [], [])


# -- timing ----------------------------------------------------------------------------------------


def test_post_waits_for_the_audit_and_the_reports_and_stops_at_the_deadline(kworld: World):
    w = kworld
    w.to_scoring(0)
    for v in w.validators:
        w.commit_scores(0, v, [1000] * 3)
    assert w.s.phase(0) == 3  # every validator committed: the reveal phase is open
    header = list(w.settle(0).header.words())
    with boa.reverts("results: audit phase open"):
        w.s.post_result(header, DUMMY_SIG, [], [])
    rid = w.d.report_fraud(0, w.miners[0], KIND_REPLAY, 0, b"\x01" * 32, SIG, sender=w.validators[0])
    for v in w.validators:
        w.reveal(0, v)
    w.finish_audits(0)
    assert w.s.audit_closed(0)
    with boa.reverts("results: report open"):
        w.s.post_result(header, DUMMY_SIG, [], [])
    for v in w.validators[1:]:
        w.d.vote_fraud(rid, VOTE_CONFIRM, sender=v)
    w.d.resolve_fraud(rid)
    assert w.s.forfeited(0, w.miners[0])
    settled = w.settle(0)
    assert settled.result.consensus[0] == 0 and settled.result.pay[0] == 0  # the forfeit is in the result
    boa.env.time_travel(seconds=w.s.result_deadline(0) - now())
    with boa.reverts("results: result deadline passed"):
        w.s.post_result(list(settled.header.words()), DUMMY_SIG, [], [])


def test_one_pending_result_at_a_time_and_fall_back_waits_for_it(kworld: World):
    w = kworld
    w.to_result(0)
    posted = w.post(0)
    with boa.reverts("results: a result is pending"):
        w.s.post_result(posted.header, DUMMY_SIG, [], [])
    boa.env.time_travel(seconds=w.s.result_deadline(0) - now())
    with boa.reverts("results: a result is pending"):
        w.s.fall_back(0)
    with boa.reverts("results: not the pending result"):
        w.s.finalize_result(posted.header, posted.non_signers_hash, posted.posted_time, posted.attempt + 1)
    w.finalize(posted)  # the window passed: a pending root still becomes final after the deadline
    assert w.s.current_round() == 1


def test_without_two_thirds_signing_the_round_falls_back_after_the_deadline(kworld: World):
    w = kworld
    w.to_result(0, {v: [1000] * 3 for v in w.validators[:2]})  # half the stake revealed: no quorum
    settled = w.settle(0)
    assert not settled.result.quorum and settled.header.model_hash == GENESIS_MODEL
    header = list(settled.header.words())
    absent, keys = w.non_signer_args(0, w.validators[:2])
    with boa.reverts("results: signers hold 2/3 of the stake or less"):
        w.s.post_result(header, w.sign(header, w.validators[:2]), absent, keys)
    with boa.reverts("results: result deadline not reached"):
        w.s.fall_back(0)
    supply = w.t.totalSupply()
    w.fall_back(0)
    assert [e.round for e in last_logs(w.stack.results, "RoundFellBack")] == [0]
    assert w.s.fallback(0) and w.s.final_root(0) == b"\x00" * 32
    assert (w.s.total_minted(), w.t.totalSupply(), w.s.claims_root(0)) == (0, supply, b"\x00" * 32)
    assert (w.s.current_round(), w.s.model_hash(1)) == (1, GENESIS_MODEL)
    with boa.reverts("results: round already ended"):
        w.s.fall_back(0)
    with boa.reverts("settlement: round not paid"):
        w.s.claim(0, 1, [], sender=w.validators[0])


def test_fall_back_needs_the_audit_closed(kworld: World):
    w = kworld
    w.to_scoring(0)
    with boa.reverts("results: audit phase open"):
        w.s.fall_back(0)


# -- claims ----------------------------------------------------------------------------------------


def test_claims_pay_once_against_the_proven_leaf_and_later_only_the_difference(kworld: World):
    w = kworld
    m, v = w.miners[0], w.validators[0]
    with boa.reverts("settlement: round not paid"):
        w.s.claim(0, 1, [], sender=m)
    w.run_round(0, {x: [1000, 2000, 3000] for x in w.validators})
    c = w.settled[0].claim_of(str(m))
    assert c.amount > 0
    other = w.settled[0].claim_of(str(w.miners[1]))
    with boa.reverts("settlement: invalid claim proof"):  # another account's leaf
        w.s.claim(0, other.amount, list(other.proof), sender=m)
    with boa.reverts("settlement: invalid claim proof"):  # another amount
        w.s.claim(0, c.amount + 1, list(c.proof), sender=m)
    before = w.t.balanceOf(m)
    assert w.claim(m, 0) == c.amount
    assert [(e.account, e.amount, e.cumulative) for e in last_logs(w.stack.rewards, "Claimed")] == [(m, c.amount, c.amount)]
    assert w.t.balanceOf(m) == before + c.amount and w.s.claimed(m) == c.amount
    with boa.reverts("settlement: nothing to claim"):
        w.claim(m, 0)
    w.run_round(1, {x: [1000, 2000, 3000] for x in w.validators})
    later = w.settled[1].claim_of(str(m))
    assert later.amount > c.amount  # cumulative: round 0 plus round 1
    assert w.claim(m, 1) == later.amount - c.amount
    with boa.reverts("settlement: nothing to claim"):  # the older root pays nothing more
        w.claim(m, 0)
    # a validator that never claimed takes both rounds at once from the later root
    assert w.claim(v, 1) == w.settled[1].claim_of(str(v)).amount
    assert w.s.total_claimed() == w.s.claimed(m) + w.s.claimed(v)
    assert w.t.balanceOf(w.stack.rewards.address) == w.s.total_minted() - w.s.total_claimed()


# -- rejected results ------------------------------------------------------------------------------


def test_signers_of_a_rejected_root_are_slashable_once_each(kworld: World):
    w = kworld
    w.to_result(0)
    honest = w.settle(0)
    signers, silent = w.validators[:3], w.validators[3]
    wrong = set_word(list(honest.header.words()), H_LOSS, honest.header.heldout_loss + 1)
    posted = w.post(0, header=wrong, signers=signers)
    posted = Posted(honest, wrong, posted.non_signers, posted.posted_time, posted.attempt)
    challenger = w.miners[2]
    bond_before = w.t.balanceOf(challenger)
    with boa.reverts("results: not a rejected result"):
        w.s.slash_signer(0, 1, posted.root, posted.non_signers, posted.posted_time, signers[0])
    challenge_header(w, posted, honest, challenger)
    assert [e.attempt for e in last_logs(w.stack.account_challenges, "ChallengeUpheld")] == [1]
    assert w.t.balanceOf(challenger) == bond_before  # the bond came back
    assert w.s.pending(0) == b"\x00" * 32 and w.s.rejected_count(0) == 1
    assert w.s.rejected_by(0, 1) == challenger
    with boa.reverts("results: not the pending result"):
        w.s.finalize_result(*posted.final_args())
    args = (0, 1, posted.root, posted.non_signers, posted.posted_time)
    with boa.reverts("results: did not sign"):
        w.s.slash_signer(*args, silent)
    with boa.reverts("results: not a keyed validator of the round"):
        w.s.slash_signer(*args, w.miners[0])
    with boa.reverts("results: not a rejected result"):
        w.s.slash_signer(0, 1, posted.root, [], posted.posted_time, signers[0])
    for v in signers:
        stake = w.st.staked(v)
        reward = w.t.balanceOf(challenger)
        amount = w.s.slash_signer(*args, v)
        assert amount == stake * w.p.signer_slash_bps // 10_000 > 0
        assert w.st.staked(v) == stake - amount
        assert w.t.balanceOf(challenger) == reward + amount * w.p.reporter_share_bps // 10_000
        with boa.reverts("results: already slashed"):
            w.s.slash_signer(*args, v)
    assert w.st.staked(silent) == 300 * TOKEN
    # another root may be posted: the honest one, as attempt 2, becomes final
    again = w.post(0, honest)
    assert again.attempt == 2
    w.finalize(again)
    assert w.s.final_root(0) == again.root and w.s.current_round() == 1


def test_a_challenge_of_a_right_header_burns_the_bond(kworld: World):
    w = kworld
    w.to_result(0)
    posted = w.post(0)
    challenger = w.miners[0]
    supply, balance = w.t.totalSupply(), w.t.balanceOf(challenger)
    challenge_header(w, posted, posted.settled, challenger)
    assert [e.attempt for e in last_logs(w.stack.account_challenges, "ChallengeFailed")] == [1]
    assert w.t.balanceOf(challenger) == balance - w.p.challenge_bond
    assert w.t.totalSupply() == supply - w.p.challenge_bond
    assert w.s.pending(0) != b"\x00" * 32
    boa.env.time_travel(seconds=w.p.result_window)
    with boa.reverts("challenges: window closed"):
        challenge_header(w, posted, posted.settled, challenger)
    w.finalize(posted)
    assert w.s.current_round() == 1


def test_only_the_challenge_contracts_reject_and_only_results_pays():
    stack = deploy_stack()
    stranger = boa.env.generate_address()
    with boa.reverts("results: only challenges"):
        stack.results.reject(0, stranger, sender=stranger)
    for challenges in (stack.column_challenges, stack.tree_challenges, stack.account_challenges,
                       stack.claims_challenges):
        with boa.reverts("results: no pending result"):  # past the caller check
            stack.results.reject(0, stranger, sender=challenges.address)
    with boa.reverts("settlement: only results"):
        stack.rewards.pay_round(0, 1, b"\x01" * 32, sender=stranger)
    with boa.reverts("settlement: only results"):
        stack.rounds.end_round(0, NEXT_MODEL, False, sender=stranger)


@pytest.mark.parametrize("bad", ["duration", "window", "slash", "share"])
def test_results_constructor_reverts(bad):
    stack = deploy_stack()
    args = dict(duration=60, window=60, slash=1000, share=2000)
    args[bad] = 0 if bad in ("duration", "window") else 10_001
    message = "results: zero duration" if bad in ("duration", "window") else "results: bad fraction"
    with boa.reverts(message):
        partial("Results").deploy(stack.rounds.address, stack.rewards.address, stack.staking.address,
                                  args["duration"], args["window"], args["slash"], args["share"])


def test_wiring_is_once_by_the_deployer():
    stack = deploy_stack()
    a = boa.env.generate_address()
    with boa.reverts("results: only deployer"):
        stack.results.wire(a, a, a, a, sender=a)
    with boa.reverts("results: already wired"):
        stack.results.wire(a, a, a, a)
    fresh = partial("Results").deploy(stack.rounds.address, stack.rewards.address, stack.staking.address, 1, 1, 0, 0)
    for zero_at in range(4):  # every challenge contract must be named
        with boa.reverts("results: zero address"):
            fresh.wire(*[ZERO_ADDRESS if k == zero_at else a for k in range(4)])
    with boa.reverts("settlement: already wired"):
        stack.rewards.wire(a, a)
    with boa.reverts("settlement: already wired"):
        stack.rounds.wire(a, a, a, a)
