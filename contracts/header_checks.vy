# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain header checks: a result's header words, disputed from chain data
@custom:contract-name header_checks
@license GNU Affero General Public License v3.0 only
@notice A module of the account challenges contract (docs/PROTOCOL.md §11,
        Challenges): the header's identity words, n, the quorum flag, the
        held-out loss and the model without quorum, from chain data and one light
        reveal per validator (`challenge_header`); minted against the tree root's
        sums (`challenge_minted`). Two functions, so that neither carries both the
        reveals and the root's 2 + V sums.
"""

from . import challenge_base
from . import constants
from . import result_math

uses: challenge_base

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_SUMS: constant(uint256) = result_math.MAX_SUMS
HEADER_WORDS: constant(uint256) = constants.HEADER_WORDS

# kinds are numbered across the challenge contracts (see AccountChallenges)
KIND_HEADER: constant(uint256) = 5
KIND_MINTED: constant(uint256) = 16


@external
def challenge_header(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    reveals: challenge_base.LightReveals,
):
    """
    @notice Disputes the header's words that chain data settle: its domain,
            chain, results contract, run config and round; n (the round's
            commits); the quorum flag (3R >= 2W, R > 0); the held-out loss (lower
            median of the revealed losses); and, without quorum, the model
            (unchanged: the round's own). The signers' tree is never needed.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param reveals One reveal per round validator (H(scores) for the scores).
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    vals: DynArray[address, MAX_VALIDATORS] = staticcall challenge_base.rounds.validators_of(round)
    assert len(reveals.scores_hashes) == len(vals) and len(reveals.witness_roots) == len(vals) and len(reveals.losses) == len(vals), "challenges: one reveal per round validator"
    weights: DynArray[uint256, MAX_VALIDATORS] = challenge_base._weights(round, vals)
    revealed_weight: uint256 = 0
    losses: DynArray[uint256, MAX_VALIDATORS] = []
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        if challenge_base._revealed(round, vals[j], reveals.scores_hashes[j], reveals.witness_roots[j], reveals.losses[j]):
            revealed_weight += weights[j]
            losses.append(reveals.losses[j])
    quorum: bool = revealed_weight > 0 and revealed_weight * 3 >= staticcall challenge_base.rounds.total_weight(round) * 2
    upheld: bool = self._identity_wrong(round, header) or self._values_wrong(round, header, quorum, losses)
    challenge_base._settle(round, attempt, upheld, KIND_HEADER)


@external
def challenge_minted(
    round: uint256, header: bytes32[HEADER_WORDS], non_signers_hash: bytes32, posted_time: uint256, attempt: uint256,
    root: challenge_base.Node,
):
    """
    @notice Disputes minted: the root's pay plus every credit, at most the emission;
            a root whose sums are not 2 + V is wrong too.
    @param round The round.
    @param header The pending attempt's header words.
    @param non_signers_hash The pending attempt's non-signers hash.
    @param posted_time When the attempt was posted.
    @param attempt The attempt number.
    @param root The tree root's preimage; empty for an empty tree.
    """
    challenge_base._open(round, header, non_signers_hash, posted_time, attempt)
    v: uint256 = staticcall challenge_base.rounds.validator_count(round)
    root_sums: DynArray[uint256, MAX_SUMS] = challenge_base._root_sums(header[constants.H_TREE_ROOT], root, v)
    challenge_base._settle(round, attempt, len(root_sums) != v + 2 or self._minted_wrong(header, root_sums), KIND_MINTED)


@view
@internal
def _identity_wrong(round: uint256, header: bytes32[HEADER_WORDS]) -> bool:
    """
    @dev Whether the header names another domain, chain, results contract, run config or round.
    """
    return (
        header[constants.H_TAG] != constants.RESULT_TAG
        or convert(header[constants.H_CHAIN_ID], uint256) != chain.id
        or convert(header[constants.H_RESULTS], uint256) != convert(convert(challenge_base.results.address, uint160), uint256)
        or header[constants.H_RUN_CONFIG] != staticcall challenge_base.rounds.run_config_hash()
        or convert(header[constants.H_ROUND], uint256) != round
    )


@view
@internal
def _values_wrong(round: uint256, header: bytes32[HEADER_WORDS], quorum: bool, losses: DynArray[uint256, MAX_VALIDATORS]) -> bool:
    """
    @dev Whether n, the quorum flag, the held-out loss or (without quorum) the model is wrong.
    """
    flag: uint256 = 0
    if quorum:
        flag = 1
    if convert(header[constants.H_N], uint256) != challenge_base._commits(round):
        return True
    if convert(header[constants.H_QUORUM], uint256) != flag:
        return True
    if not result_math._is_lower_median(convert(header[constants.H_LOSS], uint256), losses):
        return True
    return not quorum and header[constants.H_MODEL] != staticcall challenge_base.rounds.model_hash(round)


@view
@internal
def _minted_wrong(header: bytes32[HEADER_WORDS], root_sums: DynArray[uint256, MAX_SUMS]) -> bool:
    """
    @dev Whether minted is not the root's pay plus every credit, or exceeds the emission.
    """
    minted: uint256 = convert(header[constants.H_MINTED], uint256)
    if minted > staticcall challenge_base.rewards.emission_per_round():
        return True
    remaining: uint256 = minted
    for k: uint256 in range(1, MAX_SUMS):
        if k >= len(root_sums):
            break
        # subtract rather than add: a wrong root may hold sums that overflow
        if root_sums[k] > remaining:
            return True
        remaining -= root_sums[k]
    return remaining != 0
