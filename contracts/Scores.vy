# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain scores: commit-reveal of score vectors as calldata
@custom:contract-name scores
@license GNU Affero General Public License v3.0 only
@notice Validators commit `keccak(vector_root, salt)` during the scoring phase,
        then reveal the vector: one uint16 score per miner in commit order (2 bytes
        big-endian each), the root of their replay witnesses and their held-out
        loss. The vector travels as calldata and in the `ScoresRevealed` event; only
        its root is stored, so a reveal costs the same storage for 10 miners or
        1,000, and the revealed set and every vector are chain facts from which
        anyone rebuilds the round's result (`Results.vy`). The phase clock lives in
        the rounds contract, which this one asks before every step. Revert strings
        keep the pre-split "settlement: " prefix.
"""

from . import constants
from .interfaces import IRounds

SCORE_BYTES: constant(uint256) = constants.SCORE_BYTES
SEGMENT_BYTES: constant(uint256) = constants.SEGMENT_BYTES
SEGMENTS: constant(uint256) = SCORE_BYTES // SEGMENT_BYTES

rounds: public(immutable(IRounds))

# the commitment, overwritten by AUDITED once the validator finished its audits (a slot
# rewritten costs a quarter of a new one)
score_commitment: public(HashMap[uint256, HashMap[address, bytes32]])
AUDITED: constant(bytes32) = keccak256("veritrain/audits-done/v1")
# the revealed vector's root; empty while the validator has not revealed
vector_root: public(HashMap[uint256, HashMap[address, bytes32]])


event ScoresCommitted:
    round: indexed(uint256)
    validator: indexed(address)
    commitment: bytes32

event ScoresRevealed:
    round: indexed(uint256)
    validator: indexed(address)
    scores: Bytes[SCORE_BYTES]
    witness_root: bytes32
    heldout_loss: uint256
    vector_root: bytes32

event AuditsDone:
    round: indexed(uint256)
    validator: indexed(address)


@deploy
def __init__(rounds_: IRounds):
    """
    @notice Binds the scores to one round clock.
    @param rounds_ The rounds contract.
    """
    rounds = rounds_


@external
def commit_scores(round: uint256, commitment: bytes32):
    """
    @notice Commits `keccak(abi_encode(vector_root, salt))` during the scoring phase
            (`vector_root_of` computes the root).
    @param round The round being scored.
    @param commitment The commitment.
    """
    extcall rounds.record_score_commit(round, msg.sender)
    assert self.score_commitment[round][msg.sender] == empty(bytes32), "settlement: scores already committed"
    assert commitment != empty(bytes32) and commitment != AUDITED, "settlement: empty commitment"
    self.score_commitment[round][msg.sender] = commitment
    log ScoresCommitted(round=round, validator=msg.sender, commitment=commitment)


@external
def reveal_scores(round: uint256, scores: Bytes[SCORE_BYTES], witness_root: bytes32, heldout_loss: uint256, salt: bytes32):
    """
    @notice Reveals the caller's committed vector: 2 bytes per miner that committed
            in `round`, in commit order, the root of its replay witnesses and its
            held-out loss (fixed point, 1e6 = 1.0). Stores only the vector's root.
            Stores the round's seed first if it is due and nobody has.
    @param round The round being revealed.
    @param scores One big-endian uint16 score per committed miner, in commit order.
    @param witness_root Root of the validator's replay witnesses (audited off-chain).
    @param heldout_loss The validator's held-out loss of the next model, 1e6 = 1.0.
    @param salt The salt of the commitment.
    """
    columns: uint256 = extcall rounds.record_reveal(round, msg.sender)
    commitment: bytes32 = self.score_commitment[round][msg.sender]
    assert commitment != empty(bytes32), "settlement: no score commitment"
    assert self.vector_root[round][msg.sender] == empty(bytes32), "settlement: already revealed"
    assert len(scores) == 2 * columns, "settlement: one 2-byte score per committed miner"
    root: bytes32 = self._vector_root(msg.sender, round, self._scores_hash(scores), witness_root, heldout_loss)
    assert keccak256(abi_encode(root, salt)) == commitment, "settlement: reveal does not match commitment"
    self.vector_root[round][msg.sender] = root
    log ScoresRevealed(round=round, validator=msg.sender, scores=scores, witness_root=witness_root, heldout_loss=heldout_loss, vector_root=root)


@external
def audits_done(round: uint256):
    """
    @notice Says the caller, a validator that revealed in `round`, finished its
            witness audits; the audit phase closes once every validator that
            revealed said so (or at its deadline). Once per validator, during the audit phase.
    @param round The round being audited.
    """
    assert self.vector_root[round][msg.sender] != empty(bytes32), "settlement: scores not revealed"
    assert self.score_commitment[round][msg.sender] != AUDITED, "settlement: audits already done"
    extcall rounds.record_audit_done(round)
    self.score_commitment[round][msg.sender] = AUDITED
    log AuditsDone(round=round, validator=msg.sender)


@view
@external
def audited(round: uint256, validator: address) -> bool:
    """
    @notice Whether `validator` said it finished its audits of `round`.
    @param round The round.
    @param validator The validator.
    @return True once it did.
    """
    return self.score_commitment[round][validator] == AUDITED


@view
@external
def revealed(round: uint256, validator: address) -> bool:
    """
    @notice Whether `validator` revealed its scores in `round`.
    @param round The round.
    @param validator The validator.
    @return True once it revealed.
    """
    return self.vector_root[round][validator] != empty(bytes32)


@view
@external
def vector_root_of(validator: address, round: uint256, scores_hash: bytes32, witness_root: bytes32, heldout_loss: uint256) -> bytes32:
    """
    @notice The root `reveal_scores` computes, for clients to cross-check.
    @param validator The revealing validator.
    @param round The round.
    @param scores_hash keccak256(abi_encode(the keccak256 of each 256-byte segment of the packed scores)).
    @param witness_root Root of the replay witnesses.
    @param heldout_loss The held-out loss, 1e6 = 1.0.
    @return The vector root.
    """
    return self._vector_root(validator, round, scores_hash, witness_root, heldout_loss)


@pure
@internal
def _scores_hash(scores: Bytes[SCORE_BYTES]) -> bytes32:
    """
    @dev keccak(abi_encode(hashes of the 256-byte segments)): a column challenge then needs
         only one segment of each vector.
    """
    hashes: DynArray[bytes32, SEGMENTS] = []
    for k: uint256 in range(SEGMENTS):
        start: uint256 = k * SEGMENT_BYTES
        if start >= len(scores):
            break
        hashes.append(keccak256(slice(scores, start, min(SEGMENT_BYTES, len(scores) - start))))
    return keccak256(abi_encode(hashes))


@view
@internal
def _vector_root(validator: address, round: uint256, scores_hash: bytes32, witness_root: bytes32, heldout_loss: uint256) -> bytes32:
    """
    @dev keccak(abi_encode(domain, chain id, this, validator, round, scores hash, witness root, loss)).
    """
    return keccak256(abi_encode(constants.VECTOR_TAG, chain.id, self, validator, round, scores_hash, witness_root, heldout_loss))
