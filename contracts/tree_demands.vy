# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain tree demands: a pending result's leaves on demand
@custom:contract-name tree_demands
@license GNU Affero General Public License v3.0 only
@notice Data availability of a pending result's column sum tree (docs/PROTOCOL.md §11.9,
        Demands). A challenger cannot prove a leaf of a tree it has never seen, so
        signers could finalize a wrong root by withholding the tree. In the first
        quarter of a pending attempt's challenge window anyone may demand one column
        leaf, or the root's preimage (position n), posting the challenge bond;
        anyone (a signer: it holds the tree) answers within half of the window
        with the leaf, its sums and its whole path (or the root's body and sums),
        in one transaction, and takes the bond. The answer's event carries it, so
        one answer serves everyone. A demand left unanswered at its deadline
        rejects the attempt (its signers become slashable) and returns the bond:
        the deadline falls at least a quarter window before the attempt may be
        finalized, so `expire` always comes first. Each account makes at most
        MAX_DEMANDS demands a round, so demands are no spam lever.
"""

from . import challenge_base
from . import constants
from . import result_math

uses: challenge_base

HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
MAX_DEPTH: constant(uint256) = result_math.MAX_DEPTH
MAX_DEMANDS: constant(uint256) = 8  # demands one account may make per round
KIND_UNANSWERED: constant(uint256) = 14  # challenge kinds are numbered across the challenge contracts


struct Demand:
    demander: address
    deadline: uint256
    answered: bool


# keccak(round, attempt, position) -> the demand of that leaf of that attempt
demands: public(HashMap[bytes32, Demand])
demands_made: public(HashMap[uint256, HashMap[address, uint256]])


event LeafDemanded:
    round: indexed(uint256)
    attempt: uint256
    position: uint256
    demander: indexed(address)
    deadline: uint256

event RootAnswered:
    round: indexed(uint256)
    attempt: uint256
    answerer: indexed(address)
    body: bytes32
    sums: DynArray[uint256, MAX_SUMS]

event LeafAnswered:
    round: indexed(uint256)
    attempt: uint256
    position: uint256
    answerer: indexed(address)
    fields: uint256[6]
    sums: DynArray[uint256, MAX_SUMS]
    siblings: DynArray[bytes32, MAX_DEPTH]
    sums_hashes: DynArray[bytes32, MAX_DEPTH]


@external
def demand_leaf(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    position: uint256,
):
    """
    @notice Demands column leaf `position` of the pending attempt, or its tree
            root's preimage when `position` is n (a nonempty tree), posting the
            challenge bond (after `approve`): the answerer takes it, an unanswered
            demand returns it and rejects the attempt.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param position The column (< n), or n for the root preimage.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    window: uint256 = staticcall challenge_base.results.challenge_window()
    assert block.timestamp < posted_time + window // 4, "demands: first quarter of the window only"
    n: uint256 = challenge_base._commits(round)
    assert position < n or (position == n and n > 0), "challenges: column out of range"
    made: uint256 = self.demands_made[round][msg.sender]
    assert made < MAX_DEMANDS, "demands: demand cap reached"
    self.demands_made[round][msg.sender] = made + 1
    key: bytes32 = keccak256(abi_encode(round, attempt, position))
    assert self.demands[key].demander == empty(address), "demands: already demanded"
    deadline: uint256 = block.timestamp + window // 2
    self.demands[key] = Demand(demander=msg.sender, deadline=deadline, answered=False)
    log LeafDemanded(round=round, attempt=attempt, position=position, demander=msg.sender, deadline=deadline)


@external
def answer_leaf(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    leaf: challenge_base.Column, sums: DynArray[uint256, MAX_SUMS], path: challenge_base.Path,
):
    """
    @notice Answers the demand of column leaf `leaf.index` with the leaf, its sums
            and its path in the attempt's tree, before the demand's deadline; pays
            the demand's bond to the answerer.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param leaf The column leaf (its index is its position).
    @param sums Its sums.
    @param path Its inclusion path.
    """
    n: uint256 = challenge_base._commits(round)
    assert leaf.index < n, "challenges: column out of range"
    self._settle_answer(self._pending_demand(round, header, non_signers_hash, posted_time, attempt, leaf.index))
    challenge_base._check_leaf(header[constants.H_TREE_ROOT], n, leaf.index, leaf, sums, path)
    log LeafAnswered(
        round=round, attempt=attempt, position=leaf.index, answerer=msg.sender,
        fields=[leaf.index, leaf.miner, leaf.reputation, leaf.cumulative, leaf.prev, leaf.prev_index],
        sums=sums, siblings=path.siblings, sums_hashes=path.sums_hashes,
    )


@external
def answer_root(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    root: challenge_base.Node,
):
    """
    @notice Answers the demand of the attempt's root preimage (position n) with its
            body and sums, before the demand's deadline; pays the demand's bond to
            the answerer.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param root The root's body and sums (node_hash(body, sums) is the tree root).
    """
    self._settle_answer(
        self._pending_demand(round, header, non_signers_hash, posted_time, attempt, challenge_base._commits(round))
    )
    assert result_math._node_hash(root.body, root.sums) == header[constants.H_TREE_ROOT], "challenges: root preimage"
    log RootAnswered(round=round, attempt=attempt, answerer=msg.sender, body=root.body, sums=root.sums)


@external
def expire_demand(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    position: uint256,
):
    """
    @notice Rejects the pending attempt once a demand of one of its leaves is past
            its deadline unanswered, and returns the demander's bond. Anyone may call it.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param position The demanded column (n: the root preimage).
    """
    key: bytes32 = self._pending_demand(round, header, non_signers_hash, posted_time, attempt, position)
    d: Demand = self.demands[key]
    assert block.timestamp >= d.deadline, "demands: deadline not reached"
    self.demands[key].answered = True  # settled: neither answered nor expired again
    extcall challenge_base.results.reject(round, d.demander)
    assert extcall challenge_base.token.transfer(d.demander, challenge_base.challenge_bond, default_return_value=True), "demands: bond transfer failed"
    log challenge_base.ChallengeUpheld(round=round, attempt=attempt, challenger=d.demander, kind=KIND_UNANSWERED)


@internal
def _settle_answer(key: bytes32):
    """
    @dev Marks an open demand answered before its deadline and pays its bond to the answerer.
    """
    assert block.timestamp < self.demands[key].deadline, "demands: deadline passed"
    self.demands[key].answered = True
    assert extcall challenge_base.token.transfer(msg.sender, challenge_base.challenge_bond, default_return_value=True), "demands: bond transfer failed"


@view
@internal
def _pending_demand(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    position: uint256,
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
    assert not d.answered, "demands: already settled"
    return key
