# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain result demands: a pending result's parts on demand
@custom:contract-name result_demands
@license GNU Affero General Public License v3.0 only
@notice Data availability of a pending result (docs/PROTOCOL.md §11.9,
        Demands). Every challenge carries a part of the posted result (a leaf
        and its path, a node, the validator entries, a chunk of the claims
        list); the
        right result is rebuildable from chain data, the posted one is not, so
        signers could finalize a wrong root by keeping it to themselves. In the
        first quarter of a pending attempt's challenge window anyone may demand
        one part, by position: a column leaf (< n), the tree root's preimage
        (n, a nonempty tree), the validator entries (n + 1), the claims chunk
        summaries (n + 2) or a claims chunk (n + 3 + c), posting the challenge
        bond. Anyone (a signer: it holds them)
        answers within half of the window with that part, checked against the
        header, in one transaction; the bond pays it once the attempt is final
        (`settle_demand`), and goes back to the demander of an attempt
        rejected (answering a wrong result earns nothing); the answer's event
        carries the part, so one answer serves everyone. A demand left
        unanswered at its deadline rejects the attempt (its signers become
        slashable) and returns the bond: the deadline falls at least a quarter
        window before the attempt may be finalized, so `expire` always comes
        first. Each account makes at most MAX_DEMANDS demands a round, so
        demands are no spam lever. The book (`demand_book`) keeps them.
"""

from . import challenge_base
from . import constants
from . import demand_book
from . import entries_tree
from . import result_math

uses: challenge_base
uses: demand_book

HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
MAX_DEPTH: constant(uint256) = result_math.MAX_DEPTH
MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
CLAIMS_CHUNK: constant(uint256) = result_math.CLAIMS_CHUNK
MAX_SUMMARY: constant(uint256) = result_math.MAX_SUMMARY
# demands one account may make per round: enough for one honest search through the largest tree
# (the root, the entries, the claims summaries and a chunk, 4 spread leaves, MAX_DEPTH - 2 leaves down
# to the wrong one, a claim's leaf: 21 at MAX_DEPTH 14)
MAX_DEMANDS: constant(uint256) = 24
KIND_UNANSWERED: constant(uint256) = 14  # challenge kinds are numbered across the challenge contracts
# an answered entry's prev pointer: prev above, prev_index in the low 32 bits
POINTER_SHIFT: constant(uint256) = 32
MASK32: constant(uint256) = 2**32 - 1


# a validator entry as an answer carries it (index and account are its position's, prev with
# prev_index in one word), so that the list of 1,024 fits in 128 KB of calldata
struct AnsweredEntry:
    credit: uint256
    cumulative: uint256
    pointer: uint256


event Demanded:
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

event DemandSettled:
    round: indexed(uint256)
    attempt: uint256
    position: uint256
    payee: indexed(address)

event ValidatorsAnswered:
    round: indexed(uint256)
    attempt: uint256
    answerer: indexed(address)
    entries: DynArray[challenge_base.Entry, MAX_VALIDATORS]

event ClaimsAnswered:
    round: indexed(uint256)
    attempt: uint256
    answerer: indexed(address)
    summaries: DynArray[bytes32, MAX_SUMMARY]

event ClaimsChunkAnswered:
    round: indexed(uint256)
    attempt: uint256
    answerer: indexed(address)
    chunk: uint256
    claims: DynArray[bytes32, CLAIMS_CHUNK]


@external
def demand(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    positions: DynArray[uint256, MAX_DEMANDS],
):
    """
    @notice Demands parts of the pending attempt, each by its position: column
            leaf `position` (< n), its tree root's preimage (n, a nonempty
            tree), its validator entries (n + 1), its claims chunk summaries
            (n + 2) or chunk c of its claims list (n + 3 + c, for each chunk a
            right list has),
            posting the challenge bond for each (after `approve`): it pays the
            answerer of an attempt made final (`settle_demand`), goes back to
            the demander of one rejected, and an unanswered demand rejects the
            attempt and returns it.
            Several in one transaction, so a search through the tree costs one
            block per step.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param positions The parts: a column (< n), n the root preimage, n + 1 the entries, n + 2 the
           claims chunk summaries, n + 3 + c claims chunk c.
    """
    n: uint256 = challenge_base._commits(round)
    total: uint256 = challenge_base._claims_total(round)
    last: uint256 = n + 2 + (total + CLAIMS_CHUNK - 1) // CLAIMS_CHUNK
    for position: uint256 in positions:
        assert position <= last and (position != n or n > 0), "demands: no such part"
        deadline: uint256 = demand_book._demand(round, header, non_signers_hash, posted_time, attempt, position, MAX_DEMANDS)
        log Demanded(round=round, attempt=attempt, position=position, demander=msg.sender, deadline=deadline)


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
    demand_book._answer(round, header, non_signers_hash, posted_time, attempt, leaf.index)
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
    demand_book._answer(round, header, non_signers_hash, posted_time, attempt, challenge_base._commits(round))
    assert result_math._node_hash(root.body, root.sums) == header[constants.H_TREE_ROOT], "challenges: root preimage"
    log RootAnswered(round=round, attempt=attempt, answerer=msg.sender, body=root.body, sums=root.sums)


@external
def answer_validators(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    answered: DynArray[AnsweredEntry, MAX_VALIDATORS],
):
    """
    @notice Answers the demand of the validator entries (position n + 1) with
            the whole list, one entry per round validator, each as (credit,
            cumulative, prev << 32 | prev_index): entry j's index is j and its
            account the round validator at position j, so a tree naming other words
            there cannot be answered (its demand expires). The tree over the entries
            must be the header's validators_hash. Before the demand's deadline; pays
            the demand's bond to the answerer; the event carries the whole entries.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param answered Every entry of the attempt's validators list, by position.
    """
    demand_book._answer(round, header, non_signers_hash, posted_time, attempt, challenge_base._commits(round) + 1)
    vals: DynArray[address, MAX_VALIDATORS] = staticcall challenge_base.rounds.validators_of(round)
    assert len(answered) == len(vals), "challenges: one entry per round validator"
    entries: DynArray[challenge_base.Entry, MAX_VALIDATORS] = []
    leaves: DynArray[bytes32, MAX_VALIDATORS] = []
    for j: uint256 in range(len(answered), bound=MAX_VALIDATORS):
        a: AnsweredEntry = answered[j]
        e: challenge_base.Entry = challenge_base.Entry(
            index=j, account=convert(convert(vals[j], uint160), uint256), credit=a.credit, cumulative=a.cumulative,
            prev=a.pointer >> POINTER_SHIFT, prev_index=a.pointer & MASK32,
        )
        entries.append(e)
        leaves.append(challenge_base._entry_leaf(e))
    assert entries_tree._root(leaves) == header[constants.H_VALIDATORS], "challenges: entries do not match validators_hash"
    log ValidatorsAnswered(round=round, attempt=attempt, answerer=msg.sender, entries=entries)


@external
def answer_claims(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY],
):
    """
    @notice Answers the demand of the claims chunk summaries (position n + 2):
            per chunk its list hash and root, hashing to the header's
            claims_list_hash, before the demand's deadline; pays the demand's
            bond to the answerer.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries The attempt's chunk summaries.
    """
    demand_book._answer(round, header, non_signers_hash, posted_time, attempt, challenge_base._commits(round) + 2)
    assert result_math._list_hash32(summaries) == header[constants.H_CLAIMS_LIST], "challenges: claims do not match claims_list_hash"
    log ClaimsAnswered(round=round, attempt=attempt, answerer=msg.sender, summaries=summaries)


@external
def answer_claims_chunk(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY], chunk: uint256, claims: DynArray[bytes32, CLAIMS_CHUNK],
):
    """
    @notice Answers the demand of claims chunk `chunk` (position n + 3 + chunk)
            with its claims (hashing to its summary, itself under the header's
            claims_list_hash), before the demand's deadline; pays the demand's
            bond to the answerer.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries The attempt's chunk summaries.
    @param chunk The chunk.
    @param claims Its claims.
    """
    demand_book._answer(round, header, non_signers_hash, posted_time, attempt, challenge_base._commits(round) + 3 + chunk)
    assert result_math._list_hash32(summaries) == header[constants.H_CLAIMS_LIST], "challenges: claims do not match claims_list_hash"
    assert chunk < len(summaries) // 2 and result_math._list_hash32(claims) == summaries[2 * chunk], "challenges: claims do not match their chunk"
    log ClaimsChunkAnswered(round=round, attempt=attempt, answerer=msg.sender, chunk=chunk, claims=claims)


@external
def expire_demand(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    position: uint256,
):
    """
    @notice Rejects the pending attempt once a demand of one of its parts is past
            its deadline unanswered, and returns the demander's bond. Anyone may call it.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param position The demanded part (as in `demand`).
    """
    demand_book._expire(round, header, non_signers_hash, posted_time, attempt, position, KIND_UNANSWERED)


@external
def settle_demand(round: uint256, attempt: uint256, position: uint256):
    """
    @notice Pays out the bond of a demand once its attempt is settled: to the
            answerer of an attempt made final, to the demander of one rejected
            or of a demand nobody answered. Anyone may call it.
    @param round The round.
    @param attempt The attempt the demand concerned.
    @param position The demanded part.
    """
    payee: address = demand_book._settle(round, attempt, position)
    log DemandSettled(round=round, attempt=attempt, position=position, payee=payee)
