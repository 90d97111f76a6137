# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain scores: commit-reveal, stake-weighted median and finalize
@custom:contract-name scores
@license GNU Affero General Public License v3.0 only
@notice Validators commit then reveal uint16 scores for every miner that
        committed, with one replay witness and one challenge signature per miner
        (audited off-chain in the audit phase; a wrong one is a `lazy_validator`
        report). Once the audit phase is over and no report of the round is open,
        `finalize` checks the reveal quorum (> 2/3 of the permitted stake), takes
        the strict-majority stake-weighted median per miner (Yuma-style, weights
        clipped at consensus; a confirmed cheat counts as 0) and each validator's
        agreement with it, and hands both to the rewards contract, which pays the
        round's emission. Without the quorum the round takes the fallback: every
        consensus is 0, no miner emission, and the validators that revealed are
        paid by stake. The phase clock lives in the rounds contract, which this
        one asks before every step. Revert strings keep the pre-split "settlement: " prefix.
"""

from . import constants
from .interfaces import IDisputes
from .interfaces import IRewards
from .interfaces import IRounds

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_MINERS: constant(uint256) = constants.MAX_MINERS
SCORE_WORDS: constant(uint256) = constants.SCORE_WORDS
ONE: constant(uint256) = constants.ONE
SIG_BYTES: constant(uint256) = constants.ED25519_SIG_BYTES
REVEAL_SIG_BYTES: constant(uint256) = constants.REVEAL_SIG_BYTES
MASK16: constant(uint256) = 2**16 - 1
SCORE_DOMAIN: constant(bytes32) = keccak256("veritrain/scores/v1")

rounds: public(immutable(IRounds))
deployer: immutable(address)

rewards: public(IRewards)
score_commitment: public(HashMap[uint256, HashMap[address, bytes32]])
revealed: public(HashMap[uint256, HashMap[address, bool]])
revealed_validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
packed_scores: HashMap[uint256, HashMap[address, DynArray[uint256, SCORE_WORDS]]]
consensus: public(HashMap[uint256, HashMap[address, uint16]])
audited: public(HashMap[uint256, HashMap[address, bool]])
fallback: public(HashMap[uint256, bool])


event ScoresCommitted:
    round: indexed(uint256)
    validator: indexed(address)
    commitment: bytes32

event ScoresRevealed:
    round: indexed(uint256)
    validator: indexed(address)
    miners: DynArray[address, MAX_MINERS]
    scores: DynArray[uint16, MAX_MINERS]
    witnesses: DynArray[bytes32, MAX_MINERS]
    challenge_sigs: Bytes[REVEAL_SIG_BYTES]

event AuditsDone:
    round: indexed(uint256)
    validator: indexed(address)

event Finalized:
    round: indexed(uint256)
    minted: uint256
    miners: uint256
    validators: uint256
    fallback: bool

event RewardsSet:
    rewards: address


@deploy
def __init__(rounds_: IRounds):
    """
    @notice Binds the scores to one round clock.
    @param rounds_ The rounds contract.
    """
    rounds = rounds_
    deployer = msg.sender


@external
def wire(rewards_: IRewards):
    """
    @notice Names the rewards contract `finalize` pays through, once, by the deployer.
    @param rewards_ The rewards contract.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.rewards.address == empty(address), "settlement: already wired"
    assert rewards_.address != empty(address), "settlement: zero address"
    self.rewards = rewards_
    log RewardsSet(rewards=rewards_.address)


@external
def commit_scores(round: uint256, commitment: bytes32):
    """
    @notice Commits `keccak(abi_encode(domain, chain id, this, validator, round,
            miners, scores, witnesses, challenge_sigs, salt))` during the scoring phase.
    @param round The round being scored.
    @param commitment The commitment (`score_commitment_hash` computes it).
    """
    extcall rounds.record_score_commit(round, msg.sender)
    assert self.score_commitment[round][msg.sender] == empty(bytes32), "settlement: scores already committed"
    assert commitment != empty(bytes32), "settlement: empty commitment"
    self.score_commitment[round][msg.sender] = commitment
    log ScoresCommitted(round=round, validator=msg.sender, commitment=commitment)


@external
def reveal_scores(
    round: uint256, miners: DynArray[address, MAX_MINERS], scores: DynArray[uint16, MAX_MINERS],
    witnesses: DynArray[bytes32, MAX_MINERS], challenge_sigs: Bytes[REVEAL_SIG_BYTES], salt: bytes32,
):
    """
    @notice Reveals the caller's committed scores, replay witnesses and challenge
            signatures. `miners` must be every miner that committed in `round`, in
            strictly ascending address order. Only the scores are stored; the
            witnesses and signatures are in the event, for auditors. Stores the
            round's seed first if it is due and nobody has.
    @param round The round being revealed.
    @param miners Every miner that committed in `round`, ascending.
    @param scores One score per miner.
    @param witnesses One replay witness per miner (zero: no check passed, score 0).
    @param challenge_sigs One 64-byte ed25519 challenge signature per miner, concatenated in `miners` order.
    @param salt The salt of the commitment.
    """
    extcall rounds.record_reveal(round)
    commitment: bytes32 = self.score_commitment[round][msg.sender]
    assert commitment != empty(bytes32), "settlement: no score commitment"
    assert not self.revealed[round][msg.sender], "settlement: already revealed"
    assert len(miners) == len(scores) and len(miners) == len(witnesses), "settlement: length mismatch"
    assert len(challenge_sigs) == len(miners) * SIG_BYTES, "settlement: one 64-byte challenge signature per miner"
    assert self._commitment(msg.sender, round, miners, scores, witnesses, challenge_sigs, salt) == commitment, "settlement: reveal does not match commitment"
    extcall rounds.accept_reveal(round, miners)
    self.packed_scores[round][msg.sender] = self._pack(scores)
    self.revealed[round][msg.sender] = True
    self.revealed_validators[round].append(msg.sender)
    log ScoresRevealed(round=round, validator=msg.sender, miners=miners, scores=scores, witnesses=witnesses, challenge_sigs=challenge_sigs)


@external
def audits_done(round: uint256):
    """
    @notice Says the caller, a validator that revealed in `round`, finished its
            witness audits; the audit phase closes once every validator that
            revealed said so (or at its deadline). Once per validator, during the audit phase.
    @param round The round being audited.
    """
    assert self.revealed[round][msg.sender], "settlement: scores not revealed"
    assert not self.audited[round][msg.sender], "settlement: audits already done"
    extcall rounds.record_audit_done(round)
    self.audited[round][msg.sender] = True
    log AuditsDone(round=round, validator=msg.sender)


@external
def finalize(round: uint256):
    """
    @notice Settles `round` once its audit phase is over and none of its reports
            is open: with the reveal quorum, consensus scores, then reputation and
            emission into claimable balances through the rewards contract; without
            it, the fallback (consensus 0, no miner emission, validators paid by
            stake). Stores the round's seed first if it is due and nobody has.
    @param round The round to settle.
    """
    miners: DynArray[address, MAX_MINERS] = extcall rounds.record_finalize(round)
    # every report of the round resolved: forfeits (cheats, lazy validators) are final
    assert staticcall IDisputes(staticcall self.rewards.disputes()).open_in_round(round) == 0, "settlement: report open"
    vals: DynArray[address, MAX_VALIDATORS] = self.revealed_validators[round]
    weights: DynArray[uint256, MAX_VALIDATORS] = staticcall rounds.weights_of(round, vals)
    quorum: bool = self._has_quorum(round, weights)
    minted: uint256 = 0
    if quorum:
        cons: DynArray[uint16, MAX_MINERS] = self._consensus_all(round, miners, vals, weights)
        for i: uint256 in range(len(miners), bound=MAX_MINERS):
            self.consensus[round][miners[i]] = cons[i]
        if len(vals) > 0 and len(miners) > 0:
            minted = extcall self.rewards.settle(round, miners, cons, vals, weights, self._agreements(round, miners, vals, cons))
    else:
        # fallback: every consensus stays 0 (the model is unchanged); no miner is
        # settled, so none is paid; validators share their pool by stake alone
        self.fallback[round] = True
        if len(vals) > 0 and len(miners) > 0:
            ones: DynArray[uint256, MAX_VALIDATORS] = []
            for v: address in vals:
                ones.append(ONE)
            minted = extcall self.rewards.settle(round, [], [], vals, weights, ones)
    log Finalized(round=round, minted=minted, miners=len(miners), validators=len(vals), fallback=not quorum)


@view
@external
def revealed_validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    """
    @notice Validators that revealed scores in `round`, in reveal order.
    @param round The round.
    @return The validators.
    """
    return self.revealed_validators[round]


@view
@external
def scores_of(round: uint256, validator: address) -> DynArray[uint16, MAX_MINERS]:
    """
    @notice The scores `validator` revealed in `round`, in `miners_of(round)` order.
    @param round The round.
    @param validator The validator.
    @return The scores (empty when it did not reveal).
    """
    out: DynArray[uint16, MAX_MINERS] = []
    if not self.revealed[round][validator]:
        return out
    n: uint256 = len(staticcall rounds.miners_of(round))
    words: DynArray[uint256, SCORE_WORDS] = self.packed_scores[round][validator]
    for i: uint256 in range(n, bound=MAX_MINERS):
        out.append(self._unpack(words, i))
    return out


@pure
@external
def weighted_median(scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS]) -> uint16:
    """
    @notice The consensus rule, exposed for audits: the largest score w whose
            support (weight of the scores >= w) is more than half of the total
            weight, so exactly half the weight cannot raise a score.
    @param scores One score per validator.
    @param weights One weight per validator.
    @return The consensus score; 0 when the total weight is 0.
    """
    return self._weighted_median(scores, weights)


@view
@external
def score_commitment_hash(
    validator: address, round: uint256, miners: DynArray[address, MAX_MINERS],
    scores: DynArray[uint16, MAX_MINERS], witnesses: DynArray[bytes32, MAX_MINERS],
    challenge_sigs: Bytes[REVEAL_SIG_BYTES], salt: bytes32,
) -> bytes32:
    """
    @notice The commitment `commit_scores` expects, for clients to cross-check.
    @param validator The committing validator.
    @param round The round.
    @param miners Every miner that committed in `round`, ascending.
    @param scores One score per miner.
    @param witnesses One replay witness per miner.
    @param challenge_sigs One 64-byte challenge signature per miner, concatenated.
    @param salt A secret salt.
    @return The commitment.
    """
    return self._commitment(validator, round, miners, scores, witnesses, challenge_sigs, salt)


@view
@internal
def _commitment(
    validator: address, round: uint256, miners: DynArray[address, MAX_MINERS],
    scores: DynArray[uint16, MAX_MINERS], witnesses: DynArray[bytes32, MAX_MINERS],
    challenge_sigs: Bytes[REVEAL_SIG_BYTES], salt: bytes32,
) -> bytes32:
    """
    @dev keccak(abi_encode(domain, chain id, this, validator, round, miners, scores, witnesses, sigs, salt)).
    """
    return keccak256(abi_encode(SCORE_DOMAIN, chain.id, self, validator, round, miners, scores, witnesses, challenge_sigs, salt))


@view
@internal
def _has_quorum(round: uint256, weights: DynArray[uint256, MAX_VALIDATORS]) -> bool:
    """
    @dev Whether the revealed stake is more than 2/3 of the round's permitted stake.
    """
    revealed_weight: uint256 = 0
    for w: uint256 in weights:
        revealed_weight += w
    return revealed_weight * 3 > staticcall rounds.total_weight(round) * 2


@pure
@internal
def _pack(scores: DynArray[uint16, MAX_MINERS]) -> DynArray[uint256, SCORE_WORDS]:
    """
    @dev Packs 16 uint16 scores per word, low bits first.
    """
    words: DynArray[uint256, SCORE_WORDS] = []
    n: uint256 = len(scores)
    for w: uint256 in range(SCORE_WORDS):
        if w * 16 >= n:
            break
        acc: uint256 = 0
        for j: uint256 in range(16):
            i: uint256 = w * 16 + j
            if i >= n:
                break
            acc = acc | (convert(scores[i], uint256) << (16 * j))
        words.append(acc)
    return words


@pure
@internal
def _unpack(words: DynArray[uint256, SCORE_WORDS], i: uint256) -> uint16:
    """
    @dev Score `i` of a packed reveal.
    """
    return convert((words[i // 16] >> (16 * (i % 16))) & MASK16, uint16)


@pure
@internal
def _weighted_median(scores: DynArray[uint16, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS]) -> uint16:
    """
    @dev The largest score whose support is strictly more than half the total weight.
    """
    total: uint256 = 0
    for w: uint256 in weights:
        total += w
    if total == 0:
        return 0  # no weight: no score has support
    best: uint16 = 0
    for candidate: uint16 in scores:
        if candidate <= best:
            continue
        support: uint256 = 0
        for j: uint256 in range(len(scores), bound=MAX_VALIDATORS):
            if scores[j] >= candidate:
                support += weights[j]
        # strict: exactly half the weight is not a majority
        if support * 2 > total:
            best = candidate
    return best


@view
@internal
def _consensus_all(
    round: uint256, miners: DynArray[address, MAX_MINERS], vals: DynArray[address, MAX_VALIDATORS],
    weights: DynArray[uint256, MAX_VALIDATORS],
) -> DynArray[uint16, MAX_MINERS]:
    """
    @dev The weighted median of every miner's column of revealed scores; 0 for a
         miner confirmed as a cheat in `round` (its reward is forfeited).
    """
    words: DynArray[DynArray[uint256, SCORE_WORDS], MAX_VALIDATORS] = []
    for v: address in vals:
        words.append(self.packed_scores[round][v])
    out: DynArray[uint16, MAX_MINERS] = []
    for i: uint256 in range(len(miners), bound=MAX_MINERS):
        if staticcall self.rewards.forfeited(round, miners[i]):
            out.append(0)
            continue
        column: DynArray[uint16, MAX_VALIDATORS] = []
        for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
            column.append(self._unpack(words[j], i))
        out.append(self._weighted_median(column, weights))
    return out


@view
@internal
def _agreements(
    round: uint256, miners: DynArray[address, MAX_MINERS], vals: DynArray[address, MAX_VALIDATORS],
    cons: DynArray[uint16, MAX_MINERS],
) -> DynArray[uint256, MAX_VALIDATORS]:
    """
    @dev Each validator's agreement with consensus, sum(min)/sum(max) in 1e18
         fixed point: 1 when it matches consensus, lower both for scores clipped
         above consensus and for scores below it.
    """
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for v: address in vals:
        words: DynArray[uint256, SCORE_WORDS] = self.packed_scores[round][v]
        low: uint256 = 0
        high: uint256 = 0
        for i: uint256 in range(len(miners), bound=MAX_MINERS):
            s: uint256 = convert(self._unpack(words, i), uint256)
            c: uint256 = convert(cons[i], uint256)
            low += min(s, c)
            high += max(s, c)
        agreement: uint256 = ONE
        if high > 0:
            agreement = low * ONE // high
        out.append(agreement)
    return out
