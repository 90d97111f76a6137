# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain scores: commit-reveal of score vectors as calldata
@custom:contract-name scores
@license GNU Affero General Public License v3.0 only
@notice Validators commit `keccak(vector_root, salt)` during the scoring phase,
        then reveal the vector: a 4-byte entry (column, score) for each miner they
        scored nonzero, in one segment per 1,024 columns (`score_entries.vy`), the root of their
        replay witnesses and their held-out loss. The vector travels as calldata
        and in the `ScoresRevealed` event; only its root is stored, so a reveal
        costs the same storage for 10 miners or 10,000, its calldata grows with
        the validator's seats, not the network, and the revealed set and every vector are chain facts from which
        anyone rebuilds the round's result (`Results.vy`). The phase clock lives in
        the rounds contract, which this one asks before every step. Revert strings
        keep the pre-split "settlement: " prefix.
"""

from . import constants
from . import score_entries
from .interfaces import IRounds

SEGMENT_BYTES: constant(uint256) = constants.SEGMENT_BYTES
MAX_SEGMENTS: constant(uint256) = constants.MAX_SEGMENTS

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
    segments: DynArray[Bytes[SEGMENT_BYTES], MAX_SEGMENTS]
    columns: uint256
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
def reveal_scores(round: uint256, segments: DynArray[Bytes[SEGMENT_BYTES], MAX_SEGMENTS], witness_root: bytes32, heldout_loss: uint256, salt: bytes32):
    """
    @notice Reveals the caller's committed vector: one segment per 1,024 miners
            that committed in `round`, each its 4-byte entries (column, score) of
            the miners it scored nonzero (`score_entries.vy`), the root of its replay witnesses and its
            held-out loss (fixed point, 1e6 = 1.0). Stores only the vector's root.
            Stores the round's seed first if it is due and nobody has.
    @param round The round being revealed.
    @param segments The entries of each 1,024 columns: column then score, big-endian uint16s.
    @param witness_root Root of the validator's replay witnesses (audited off-chain).
    @param heldout_loss The validator's held-out loss of the next model, 1e6 = 1.0.
    @param salt The salt of the commitment.
    """
    columns: uint256 = extcall rounds.record_reveal(round, msg.sender)
    commitment: bytes32 = self.score_commitment[round][msg.sender]
    assert commitment != empty(bytes32), "settlement: no score commitment"
    assert self.vector_root[round][msg.sender] == empty(bytes32), "settlement: already revealed"
    assert len(segments) == score_entries._segment_count(columns), "settlement: one score segment per 1,024 committed miners"
    # hashed here, not in a helper: passing the segments on would copy 64 KiB of memory
    hashes: DynArray[bytes32, MAX_SEGMENTS] = []
    for segment: Bytes[SEGMENT_BYTES] in segments:
        hashes.append(keccak256(segment))
    root: bytes32 = self._vector_root(msg.sender, round, keccak256(abi_encode(hashes)), witness_root, heldout_loss)
    assert keccak256(abi_encode(root, salt)) == commitment, "settlement: reveal does not match commitment"
    self.vector_root[round][msg.sender] = root
    log ScoresRevealed(round=round, validator=msg.sender, segments=segments, columns=columns, witness_root=witness_root, heldout_loss=heldout_loss, vector_root=root)


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
    @param scores_hash keccak256(abi_encode(the keccak256 of each segment of the score entries)).
    @param witness_root Root of the replay witnesses.
    @param heldout_loss The held-out loss, 1e6 = 1.0.
    @return The vector root.
    """
    return self._vector_root(validator, round, scores_hash, witness_root, heldout_loss)


@view
@internal
def _vector_root(validator: address, round: uint256, scores_hash: bytes32, witness_root: bytes32, heldout_loss: uint256) -> bytes32:
    """
    @dev keccak(abi_encode(domain, chain id, this, validator, round, scores hash, witness root, loss)).
    """
    return keccak256(abi_encode(constants.VECTOR_TAG, chain.id, self, validator, round, scores_hash, witness_root, heldout_loss))
