# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain model attestation
@custom:contract-name attestation
@license GNU Affero General Public License v3.0 only
@notice Validators of a finalized round attest the aggregated model of the next
        round and its held-out loss; once validators holding a stake majority
        agree on a hash, it is recorded with the median of their losses and the
        rounds contract opens the next round on it. Revert strings keep the
        pre-split "settlement: " prefix.
"""

from . import constants
from .interfaces import IRounds

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS

rounds: public(immutable(IRounds))

heldout_loss: public(HashMap[uint256, uint256])
attested_by: public(HashMap[uint256, HashMap[address, bool]])
attest_weight: public(HashMap[uint256, HashMap[bytes32, uint256]])
attest_losses: HashMap[uint256, HashMap[bytes32, DynArray[uint256, MAX_VALIDATORS]]]


event ModelAttestation:
    round: indexed(uint256)
    validator: indexed(address)
    model_hash: bytes32
    heldout_loss: uint256

event ModelRecorded:
    round: indexed(uint256)
    model_hash: bytes32
    heldout_loss: uint256


@deploy
def __init__(rounds_: IRounds):
    """
    @notice Binds attestations to one round clock.
    @param rounds_ The rounds contract (validator snapshots; opens the attested round).
    """
    rounds = rounds_


@external
def attest_model(round: uint256, model_hash_: bytes32, heldout_loss_: uint256):
    """
    @notice A validator of round-1 attests the aggregated model of `round` and its
            held-out loss (fixed point, 1e6 = 1.0). Once validators holding a stake
            majority agree on a hash it is recorded with the median of their
            losses, and `round` opens. Late attestations are recorded but change nothing.
    @param round The round whose starting model is attested (> 0).
    @param model_hash_ Hash of the aggregated model.
    @param heldout_loss_ Its held-out loss, 1e6 = 1.0.
    """
    assert round > 0, "settlement: round 0 uses the genesis model"
    prev: uint256 = round - 1
    assert staticcall rounds.finalized(prev), "settlement: previous round not finalized"
    w: uint256 = staticcall rounds.validator_weight(prev, msg.sender)
    assert w > 0, "settlement: not a permitted validator"
    assert not self.attested_by[round][msg.sender], "settlement: already attested"
    assert model_hash_ != empty(bytes32), "settlement: empty model hash"
    self.attested_by[round][msg.sender] = True
    self.attest_weight[round][model_hash_] += w
    self.attest_losses[round][model_hash_].append(heldout_loss_)
    log ModelAttestation(round=round, validator=msg.sender, model_hash=model_hash_, heldout_loss=heldout_loss_)
    if self.attest_weight[round][model_hash_] * 2 > staticcall rounds.total_weight(prev):
        if staticcall rounds.model_hash(round) == empty(bytes32):
            loss: uint256 = self._median(self.attest_losses[round][model_hash_])
            self.heldout_loss[round] = loss
            log ModelRecorded(round=round, model_hash=model_hash_, heldout_loss=loss)
            extcall rounds.open_round(round, model_hash_)


@pure
@internal
def _median(values: DynArray[uint256, MAX_VALIDATORS]) -> uint256:
    """
    @dev The lower median (insertion sort), so the result is one of the attested values.
    """
    xs: DynArray[uint256, MAX_VALIDATORS] = values
    n: uint256 = len(xs)
    for i: uint256 in range(1, MAX_VALIDATORS):
        if i >= n:
            break
        key: uint256 = xs[i]
        j: uint256 = i
        for _k: uint256 in range(MAX_VALIDATORS):
            if j == 0 or xs[j - 1] <= key:
                break
            xs[j] = xs[j - 1]
            j -= 1
        xs[j] = key
    return xs[(n - 1) // 2]
