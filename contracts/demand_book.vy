# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain demand book: what a pending result's signers must show on request
@custom:contract-name demand_book
@license GNU Affero General Public License v3.0 only
@notice The bookkeeping every demand shares (docs/PROTOCOL.md §11.9, Demands):
        a demand of one part of the pending attempt (a column leaf, the root's
        preimage, the validator entries, the claims list) is made in the first
        quarter of the challenge window with the challenge bond, is answered
        within half of the window, and otherwise rejects the attempt and
        returns the bond. The bond of an answered demand is held until the
        attempt is settled (`_settle`): it pays the answerer of an attempt made
        final, and goes back to the demander of one rejected (answering the
        parts of a wrong result earns nothing) or left unanswered. Each
        contract that takes demands keeps its own book, with its own cap per
        account and round.
"""

from . import challenge_base

uses: challenge_base


struct Demand:
    demander: address
    deadline: uint256  # 0 once its bond is paid out (expired or settled)
    answerer: address  # empty until answered


# keccak(round, attempt, position) -> the demand of that part of that attempt
demands: public(HashMap[bytes32, Demand])
demands_made: public(HashMap[uint256, HashMap[address, uint256]])


@internal
def _demand(
    round: uint256, header: bytes32[challenge_base.HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256,
    attempt: uint256, position: uint256, cap: uint256,
) -> uint256:
    """
    @dev Records the caller's demand of `position` of the pending attempt,
         taking the bond; returns its deadline. `position` is checked by the caller.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    window: uint256 = staticcall challenge_base.results.challenge_window()
    assert block.timestamp < posted_time + window // 4, "demands: first quarter of the window only"
    made: uint256 = self.demands_made[round][msg.sender]
    assert made < cap, "demands: demand cap reached"
    self.demands_made[round][msg.sender] = made + 1
    key: bytes32 = keccak256(abi_encode(round, attempt, position))
    assert self.demands[key].demander == empty(address), "demands: already demanded"
    deadline: uint256 = block.timestamp + window // 2
    self.demands[key] = Demand(demander=msg.sender, deadline=deadline, answerer=empty(address))
    return deadline


@internal
def _answer(
    round: uint256, header: bytes32[challenge_base.HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256,
    attempt: uint256, position: uint256,
):
    """
    @dev Records the caller as the answer of the open demand of `position`,
         before its deadline; the bond waits for the attempt's end (`_settle`).
         The caller checks the answer.
    """
    key: bytes32 = self._pending_demand(round, header, non_signers_hash, posted_time, attempt, position)
    assert block.timestamp < self.demands[key].deadline, "demands: deadline passed"
    self.demands[key].answerer = msg.sender


@internal
def _expire(
    round: uint256, header: bytes32[challenge_base.HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256,
    attempt: uint256, position: uint256, kind: uint256,
):
    """
    @dev Rejects the pending attempt once the demand of `position` is past its
         deadline unanswered, and returns the demander's bond.
    """
    key: bytes32 = self._pending_demand(round, header, non_signers_hash, posted_time, attempt, position)
    d: Demand = self.demands[key]
    assert block.timestamp >= d.deadline, "demands: deadline not reached"
    self.demands[key] = Demand(demander=d.demander, deadline=0, answerer=d.demander)  # paid: never again
    extcall challenge_base.results.reject(round, d.demander)
    assert extcall challenge_base.token.transfer(d.demander, challenge_base.challenge_bond, default_return_value=True), "demands: bond transfer failed"
    log challenge_base.ChallengeUpheld(round=round, attempt=attempt, challenger=d.demander, kind=kind)


@view
@internal
def _pending_demand(
    round: uint256, header: bytes32[challenge_base.HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256,
    attempt: uint256, position: uint256,
) -> bytes32:
    """
    @dev The key of an open demand of `position` in the round's pending attempt.
    """
    pending: bytes32 = staticcall challenge_base.results.commitment_of(
        keccak256(abi_encode(header)), non_signers_hash, posted_time, attempt
    )
    assert pending != empty(bytes32) and staticcall challenge_base.results.pending(round) == pending, "challenges: not the pending attempt"
    key: bytes32 = keccak256(abi_encode(round, attempt, position))
    d: Demand = self.demands[key]
    assert d.demander != empty(address), "demands: no such demand"
    assert d.answerer == empty(address), "demands: already settled"
    return key


@internal
def _settle(round: uint256, attempt: uint256, position: uint256) -> address:
    """
    @dev Pays out the bond of a demand of an attempt that is settled: to its
         answerer when the attempt became final, else to its demander (the
         attempt was rejected, or nobody answered). Returns the payee.
    """
    key: bytes32 = keccak256(abi_encode(round, attempt, position))
    d: Demand = self.demands[key]
    assert d.demander != empty(address) and d.deadline != 0, "demands: nothing to pay"
    payee: address = d.demander
    if staticcall challenge_base.results.rejected_count(round) < attempt:
        assert staticcall challenge_base.results.final_root(round) != empty(bytes32), "demands: attempt not settled"
        if d.answerer != empty(address):
            payee = d.answerer
    self.demands[key].deadline = 0
    assert extcall challenge_base.token.transfer(payee, challenge_base.challenge_bond, default_return_value=True), "demands: bond transfer failed"
    return payee
