# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title chain facts stand-in
@notice Test only: the rounds, scores and rewards views the challenge contracts
        read (IChainFacts, IVectorRoots, IForfeits), set directly by the test.
"""

from contracts import constants
from contracts.interfaces import IChainFacts
from contracts.interfaces import IForfeits
from contracts.interfaces import IVectorRoots

implements: IChainFacts
implements: IVectorRoots
implements: IForfeits

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS

commits: HashMap[uint256, uint256]
commit_index: public(HashMap[uint256, HashMap[address, uint256]])
validators: HashMap[uint256, DynArray[address, MAX_VALIDATORS]]
validator_weight: public(HashMap[uint256, HashMap[address, uint256]])
total_weight: public(HashMap[uint256, uint256])
model_hash: public(HashMap[uint256, bytes32])
seed: HashMap[uint256, bytes32]
run_config_hash: public(bytes32)
vector_root: public(HashMap[uint256, HashMap[address, bytes32]])
forfeited: public(HashMap[uint256, HashMap[address, bool]])
emission_per_round: public(uint256)
miner_share_bps: public(uint256)
# the staking views the column challenge reads (this contract stands in for Staking too)
hardware_classes: public(HashMap[address, uint256])
min_class_stake: public(uint256)


@external
def set_miners(round: uint256, miners: DynArray[address, 1024]):
    self.commits[round] = len(miners)
    for i: uint256 in range(len(miners), bound=1024):
        self.commit_index[round][miners[i]] = i + 1


@external
def set_validators(round: uint256, validators: DynArray[address, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS]):
    self.validators[round] = validators
    total: uint256 = 0
    for j: uint256 in range(len(validators), bound=MAX_VALIDATORS):
        self.validator_weight[round][validators[j]] = weights[j]
        total += weights[j]
    self.total_weight[round] = total


@external
def set_vector_root(round: uint256, validator: address, root: bytes32):
    self.vector_root[round][validator] = root


@external
def set_forfeited(round: uint256, account: address, forfeited: bool):
    self.forfeited[round][account] = forfeited


@external
def set_model(round: uint256, model: bytes32):
    self.model_hash[round] = model


@external
def set_seed(round: uint256, seed: bytes32):
    self.seed[round] = seed


@view
@external
def round_seed(round: uint256) -> bytes32:
    return self.seed[round]


@external
def set_economics(emission: uint256, miner_share_bps: uint256, run_config_hash: bytes32):
    self.emission_per_round = emission
    self.miner_share_bps = miner_share_bps
    self.run_config_hash = run_config_hash


@external
def set_classes(accounts: DynArray[address, 1088], masks: DynArray[uint256, 1088], min_class_stake: uint256):
    for i: uint256 in range(len(accounts), bound=1088):
        self.hardware_classes[accounts[i]] = masks[i]
    self.min_class_stake = min_class_stake


@view
@external
def staking() -> address:
    return self


@view
@external
def class_checkers(miner: address, validators_: DynArray[address, MAX_VALIDATORS]) -> DynArray[bool, MAX_VALIDATORS]:
    # Staking.class_checkers: entry j when validators_[j] holds the miner's class (unset: class 0)
    wanted: uint256 = max(self.hardware_classes[miner], 1)
    held: DynArray[bool, MAX_VALIDATORS] = []
    for v: address in validators_:
        held.append(max(self.hardware_classes[v], 1) & wanted != 0)
    return held


@view
@external
def round_info(round: uint256) -> (uint256, uint256, uint256, uint256, uint256, bytes32):
    return 0, self.commits[round], 0, 0, 0, self.seed[round]


@view
@external
def validators_of(round: uint256) -> DynArray[address, MAX_VALIDATORS]:
    return self.validators[round]


@view
@external
def validator_at(round: uint256, position: uint256) -> address:
    if position >= len(self.validators[round]):
        return empty(address)
    return self.validators[round][position]


@view
@external
def validator_count(round: uint256) -> uint256:
    return len(self.validators[round])


@view
@external
def weights_of(round: uint256, accounts: DynArray[address, MAX_VALIDATORS]) -> DynArray[uint256, MAX_VALIDATORS]:
    out: DynArray[uint256, MAX_VALIDATORS] = []
    for a: address in accounts:
        out.append(self.validator_weight[round][a])
    return out


@view
@external
def chain_id() -> uint256:
    return chain.id
