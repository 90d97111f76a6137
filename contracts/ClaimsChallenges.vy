# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain claims challenges: the claims root, a chunk of the claims list, one claim
@custom:contract-name claims_challenges
@license GNU Affero General Public License v3.0 only
@notice During a posted result's challenge window anyone may dispute here its
        claims (docs/PROTOCOL.md §11.6, §11.9): the claims root against the
        roots of the list's chunks, one chunk (its length and its tree's
        root), or one claim against its column leaf or validator entry. The
        list is committed in chunks of CLAIMS_CHUNK claims (claims_list_hash
        hashes each chunk's list hash and root), so every challenge carries one
        chunk, never the list. A wrong value rejects the attempt through the
        results contract and returns the bond; a right one burns it.
"""

from ethereum.ercs import IERC20
from . import challenge_base
from . import constants
from . import result_math
from .interfaces import IChainFacts
from .interfaces import IForfeits
from .interfaces import IResults
from .interfaces import IVectorRoots

initializes: challenge_base

exports: (
    challenge_base.token,
    challenge_base.rounds,
    challenge_base.scores,
    challenge_base.rewards,
    challenge_base.results,
    challenge_base.challenge_bond,
)

MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS
CLAIMS_CHUNK: constant(uint256) = result_math.CLAIMS_CHUNK
MAX_CHUNKS: constant(uint256) = result_math.MAX_CHUNKS
MAX_SUMMARY: constant(uint256) = result_math.MAX_SUMMARY

# kinds are numbered across the challenge contracts (1: column challenges, 2-4, 14: tree
# challenges, 5-10, 16: account challenges)
KIND_CLAIMS_ROOT: constant(uint256) = 11
KIND_MINER_CLAIM: constant(uint256) = 12
KIND_VALIDATOR_CLAIM: constant(uint256) = 13
KIND_CLAIMS_CHUNK: constant(uint256) = 15


@deploy
def __init__(
    token_: IERC20, rounds_: IChainFacts, scores_: IVectorRoots, rewards_: IForfeits, results_: IResults,
    challenge_bond_: uint256,
):
    """
    @notice Binds the challenges to one settlement stack.
    @param token_ The token bonds are paid (and burned) in.
    @param rounds_ The rounds contract (commits, validators).
    @param scores_ The scores contract (unused here; kept for one constructor shape).
    @param rewards_ The rewards contract (unused here; kept for one constructor shape).
    @param results_ The results contract (pending attempts, final roots, rejects).
    @param challenge_bond_ The bond a challenge posts.
    """
    challenge_base.__init__(token_, rounds_, scores_, rewards_, results_, challenge_bond_)


@external
def challenge_claims_root(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY],
):
    """
    @notice Disputes the claims root: the claims list must come in
            ceil((n + V) / CLAIMS_CHUNK) chunks and claims_root must be the tree
            of their roots.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries Per chunk its list hash and root (checked against claims_list_hash).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    self._check_summaries(header, summaries)
    upheld: bool = len(summaries) != 2 * self._chunk_count(round)
    if not upheld:
        roots: DynArray[bytes32, MAX_CHUNKS] = []
        for c: uint256 in range(len(summaries) // 2, bound=MAX_CHUNKS):
            roots.append(summaries[2 * c + 1])
        upheld = result_math._claims_root(roots) != header[constants.H_CLAIMS_ROOT]
    challenge_base._settle(round, attempt, upheld, KIND_CLAIMS_ROOT)


@external
def challenge_claims_chunk(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY], chunk: uint256, claims: DynArray[bytes32, CLAIMS_CHUNK],
):
    """
    @notice Disputes chunk `chunk` of the claims list: it must hold CLAIMS_CHUNK
            claims (the last one the rest) and its root must be its tree's.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries Per chunk its list hash and root (checked against claims_list_hash).
    @param chunk The chunk.
    @param claims Its claims (checked against its list hash).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    assert self._chunk_posted(header, summaries, chunk, claims), "challenges: no such chunk"
    total: uint256 = challenge_base._claims_total(round)
    expected: uint256 = 0
    if chunk * CLAIMS_CHUNK < total:
        expected = min(CLAIMS_CHUNK, total - chunk * CLAIMS_CHUNK)
    upheld: bool = len(claims) != expected or result_math._claims_root(claims) != summaries[2 * chunk + 1]
    challenge_base._settle(round, attempt, upheld, KIND_CLAIMS_CHUNK)


@external
def challenge_miner_claim(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY], claims: DynArray[bytes32, CLAIMS_CHUNK], leaf: challenge_base.Column,
    sums: DynArray[uint256, MAX_SUMS], path: challenge_base.Path,
):
    """
    @notice Disputes claim i: it must be claim_leaf(miner, cumulative) of column leaf i.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries Per chunk its list hash and root (checked against claims_list_hash).
    @param claims The claims of the chunk holding claim i (i // CLAIMS_CHUNK); empty when
           the posted list has no such chunk.
    @param leaf The column leaf's fields.
    @param sums The column leaf's sums.
    @param path The leaf's inclusion path.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    challenge_base._check_leaf(header[constants.H_TREE_ROOT], challenge_base._commits(round), leaf.index, leaf, sums, path)
    want: bytes32 = result_math._claim_leaf(leaf.miner, leaf.cumulative)
    upheld: bool = self._claim_wrong(header, summaries, claims, leaf.index, want)
    challenge_base._settle(round, attempt, upheld, KIND_MINER_CLAIM)


@external
def challenge_validator_claim(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    summaries: DynArray[bytes32, MAX_SUMMARY], claims: DynArray[bytes32, CLAIMS_CHUNK],
    at: challenge_base.EntryAt,
):
    """
    @notice Disputes claim n + j: it must be claim_leaf(account, cumulative) of validator entry j.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param summaries Per chunk its list hash and root (checked against claims_list_hash).
    @param claims The claims of the chunk holding claim n + j; empty when the posted list
           has no such chunk.
    @param at Entry j, its position and its inclusion path under validators_hash.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    e: challenge_base.Entry = challenge_base._check_entry(round, header, at)
    want: bytes32 = result_math._claim_leaf(e.account, e.cumulative)
    upheld: bool = self._claim_wrong(header, summaries, claims, challenge_base._commits(round) + at.position, want)
    challenge_base._settle(round, attempt, upheld, KIND_VALIDATOR_CLAIM)


@pure
@internal
def _check_summaries(header: bytes32[HEADER_WORDS], summaries: DynArray[bytes32, MAX_SUMMARY]):
    """
    @dev Reverts unless `summaries` are the chunk summaries `header` commits to.
    """
    assert result_math._list_hash32(summaries) == header[constants.H_CLAIMS_LIST], "challenges: claims do not match claims_list_hash"


@pure
@internal
def _chunk_posted(
    header: bytes32[HEADER_WORDS], summaries: DynArray[bytes32, MAX_SUMMARY], chunk: uint256,
    claims: DynArray[bytes32, CLAIMS_CHUNK],
) -> bool:
    """
    @dev Whether the posted list has chunk `chunk`; reverts unless `summaries` match the header
         and, when it has, `claims` are that chunk.
    """
    self._check_summaries(header, summaries)
    if chunk >= len(summaries) // 2:
        return False
    assert result_math._list_hash32(claims) == summaries[2 * chunk], "challenges: claims do not match their chunk"
    return True


@pure
@internal
def _claim_wrong(
    header: bytes32[HEADER_WORDS], summaries: DynArray[bytes32, MAX_SUMMARY], claims: DynArray[bytes32, CLAIMS_CHUNK],
    index: uint256, want: bytes32,
) -> bool:
    """
    @dev Whether posted claim `index` is missing or is not `want` (`claims`: its chunk).
    """
    if not self._chunk_posted(header, summaries, index // CLAIMS_CHUNK, claims):
        return True
    k: uint256 = index % CLAIMS_CHUNK
    return k >= len(claims) or claims[k] != want


@view
@internal
def _chunk_count(round: uint256) -> uint256:
    """
    @dev The chunks of a right claims list: one claim per column and per round validator.
    """
    total: uint256 = challenge_base._claims_total(round)
    return (total + CLAIMS_CHUNK - 1) // CLAIMS_CHUNK
