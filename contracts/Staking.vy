# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain staking and registry
@custom:contract-name staking
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice Registers miners and validators (Ethereum account <-> ed25519 node key),
        holds their stake, queues unbonding and applies slashes ordered by the
        disputes contract. The binding signature is only emitted: the EVM cannot
        check ed25519, so nodes verify it off-chain and let the first valid
        binding of a node key win (a uniqueness rule here would let a squatter
        with a bogus signature block a victim's key).
"""

from ethereum.ercs import IERC20
from snekmate.auth import ownable

initializes: ownable
exports: ownable.owner

from . import constants
from .interfaces import IBlsKeys
from .interfaces import IStaking
from .interfaces import IToken

implements: IStaking

ROLE_NONE: constant(uint8) = 0
ROLE_MINER: constant(uint8) = 1
ROLE_VALIDATOR: constant(uint8) = 2
MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS  # permits per round (K <= this)
BPS: constant(uint256) = constants.BPS
SIG_BYTES: constant(uint256) = constants.ED25519_SIG_BYTES

token: public(immutable(IERC20))
min_miner_stake: public(immutable(uint256))
min_validator_stake: public(immutable(uint256))
max_permits: public(immutable(uint256))
unbonding_delay: public(immutable(uint256))

disputes: public(address)
results: public(address)
# keeps the permitted set's log; told of every change to it (`_note_permit`)
keys: public(IBlsKeys)

role: public(HashMap[address, uint8])
node_key: public(HashMap[address, bytes32])
multiaddr: public(HashMap[address, String[256]])
staked: public(HashMap[address, uint256])
unbonding: public(HashMap[address, uint256])
unbond_release_time: public(HashMap[address, uint256])
# 1 = eligible miner, 2 = eligible validator; one slot so the rounds contract's commit check is cheap
eligible_role: public(HashMap[address, uint8])
eligible_miner_count: public(uint256)
# counts every time a miner becomes eligible: a counter, not a time, so it also orders
# transactions inside one block; rounds read it when they open
eligibility_clock: public(uint256)
# the clock value when the miner's current eligibility began (0 while not eligible): reset
# whenever its stake drops below the miner minimum, so a re-stake starts it afresh
eligible_since: public(HashMap[address, uint256])
open_reports: public(HashMap[address, uint256])
# the permitted validators, at most `max_permits`, each at a stable slot: an account joins
# when its stake first reaches the validator minimum (evicting the smallest when the set is
# full) and leaves (swap-and-pop) when it drops below, so free registrations cannot fill it
validators: public(DynArray[address, MAX_VALIDATORS])
validator_index: public(HashMap[address, uint256])  # 1 + position in `validators`; 0 when absent
total_staked: public(uint256)
total_unbonding: public(uint256)
total_slashed: public(uint256)
# the hardware classes each account runs: bit i = class i of the run config's permitted list
# (`[[training.classes]]`, fixed by the run config hash); a miner's set has one bit
hardware_classes: public(HashMap[address, uint256])
# True from an account's first stake on: its classes never change after, so every round it
# takes part in (and every later recomputation of one) reads the same set
classes_fixed: public(HashMap[address, bool])
# validator stake (wei) a class needs among a round's validators for exact checks of its
# miners; a class with less is checked by every validator in tolerance mode
min_class_stake: public(immutable(uint256))


event Registered:
    account: indexed(address)
    role: uint8
    node_key: bytes32
    multiaddr: String[256]
    binding_sig: Bytes[SIG_BYTES]

event HardwareClassesSet:
    account: indexed(address)
    classes: uint256

event Staked:
    account: indexed(address)
    amount: uint256
    total: uint256

event UnbondRequested:
    account: indexed(address)
    amount: uint256
    release_time: uint256

event Withdrawn:
    account: indexed(address)
    amount: uint256

event Slashed:
    account: indexed(address)
    amount: uint256
    reporter: indexed(address)
    reporter_reward: uint256
    burned: uint256

event Fined:
    account: indexed(address)
    amount: uint256

event ReportCountChanged:
    account: indexed(address)
    open_reports: uint256

event ValidatorSetChanged:
    account: indexed(address)
    added: bool
    size: uint256

event ValidatorRetired:
    account: indexed(address)

event ValidatorEvicted:
    account: indexed(address)
    stake: uint256
    by: indexed(address)

event Wired:
    disputes: address
    results: address
    keys: address


@deploy
def __init__(
    token_: IERC20, min_miner_stake_: uint256, min_validator_stake_: uint256,
    max_permits_: uint256, unbonding_delay_: uint256, min_class_stake_: uint256,
):
    """
    @notice Fixes the token and the staking parameters of the run config.
    @param token_ The stake token.
    @param min_miner_stake_ Minimum stake (wei) of an eligible miner.
    @param min_validator_stake_ Minimum stake (wei) of an eligible validator.
    @param max_permits_ K: only the top-K validators by stake hold a permit.
    @param unbonding_delay_ Seconds between `request_unbond` and `withdraw`.
    @param min_class_stake_ Validator stake (wei) a hardware class needs for exact checks.
    """
    ownable.__init__()
    assert min_miner_stake_ > 0 and min_validator_stake_ > 0, "staking: minimum stake must be positive"
    assert max_permits_ > 0 and max_permits_ <= MAX_VALIDATORS, "staking: bad permit count"
    token = token_
    min_miner_stake = min_miner_stake_
    min_validator_stake = min_validator_stake_
    max_permits = max_permits_
    unbonding_delay = unbonding_delay_
    min_class_stake = min_class_stake_


@external
def wire(disputes_: address, results_: address, keys_: IBlsKeys):
    """
    @notice Names the disputes, results and key contracts once, then renounces
            ownership so the wiring can never change.
    @param disputes_ The only caller of `report_opened` and `report_closed`; may `slash`.
    @param results_ May `slash` the signers of a rejected result.
    @param keys_ Keeps the permitted set's log (told of every change to it).
    """
    ownable._check_owner()
    assert disputes_ != empty(address) and results_ != empty(address), "staking: zero address"
    assert keys_.address != empty(address), "staking: zero address"
    self.disputes = disputes_
    self.results = results_
    self.keys = keys_
    ownable._transfer_ownership(empty(address))
    log Wired(disputes=disputes_, results=results_, keys=keys_.address)


@external
def register(role_: uint8, node_key_: bytes32, multiaddr_: String[256], binding_sig: Bytes[SIG_BYTES]):
    """
    @notice Registers the caller as a miner (1) or validator (2), or updates its
            node key and address. The role cannot change once set.
    @param role_ 1 miner, 2 validator.
    @param node_key_ ed25519 public key of the node (also its libp2p identity).
    @param multiaddr_ libp2p address peers dial.
    @param binding_sig ed25519 signature over (chain id, staking address, account); checked off-chain.
    """
    assert role_ == ROLE_MINER or role_ == ROLE_VALIDATOR, "staking: unknown role"
    assert node_key_ != empty(bytes32), "staking: empty node key"
    assert len(binding_sig) == SIG_BYTES, "staking: binding signature must be 64 bytes"
    current: uint8 = self.role[msg.sender]
    assert current == ROLE_NONE or current == role_, "staking: role is fixed"
    if current == ROLE_NONE:
        self.role[msg.sender] = role_
    self.node_key[msg.sender] = node_key_
    self.multiaddr[msg.sender] = multiaddr_
    log Registered(account=msg.sender, role=role_, node_key=node_key_, multiaddr=multiaddr_, binding_sig=binding_sig)


@external
def set_hardware_classes(classes: uint256):
    """
    @notice Registers the hardware classes the caller runs: a miner the one class it
            trains under, a validator the classes it replays exactly. Bit i stands for
            class i of the run config's permitted list; the run config hash on chain
            fixes that list, and nodes refuse a class it does not hold. The set is
            fixed from the first stake on (other hardware: another account), so no
            round's checks and no recomputation of a result depend on when it is read.
            An account that never sets one runs class 0.
    @param classes The class set, 1 to MAX_CLASSES bits (a miner: exactly one).
    """
    role_: uint8 = self.role[msg.sender]
    assert role_ != ROLE_NONE, "staking: not registered"
    assert not self.classes_fixed[msg.sender], "staking: classes are fixed once staked"
    assert classes != 0 and classes < 1 << constants.MAX_CLASSES, "staking: classes outside the permitted list"
    assert role_ != ROLE_MINER or classes & (classes - 1) == 0, "staking: a miner runs exactly one class"
    self.hardware_classes[msg.sender] = classes
    log HardwareClassesSet(account=msg.sender, classes=classes)


@external
def stake(amount: uint256):
    """
    @notice Moves `amount` tokens from the caller (after `approve`) into its stake.
            A validator whose stake first reaches the validator minimum joins
            `validators`, the permitted set of at most `max_permits`; when it is
            full, the newcomer's stake must exceed the smallest listed stake, and
            that validator (lowest stake, ties: higher address) is evicted: it
            keeps its tokens and may unbond, withdraw or be slashed as before, and
            rejoins only by staking again.
    @param amount Tokens (wei) to stake.
    """
    assert self.role[msg.sender] != ROLE_NONE, "staking: not registered"
    assert amount > 0, "staking: zero amount"
    assert extcall token.transferFrom(msg.sender, self, amount, default_return_value=True), "staking: transfer failed"
    self.staked[msg.sender] += amount
    self.total_staked += amount
    if not self.classes_fixed[msg.sender]:
        self.classes_fixed[msg.sender] = True
    self._refresh_eligibility(msg.sender, True)
    log Staked(account=msg.sender, amount=amount, total=self.staked[msg.sender])


@external
def request_unbond(amount: uint256):
    """
    @notice Queues `amount` of the caller's stake for withdrawal after the
            unbonding delay. Queued stake stays slashable; a new request adds to
            the queue and restarts the delay.
    @param amount Tokens (wei) to unbond.
    """
    assert amount > 0, "staking: zero amount"
    assert amount <= self.staked[msg.sender], "staking: insufficient stake"
    self.staked[msg.sender] -= amount
    self.total_staked -= amount
    self.unbonding[msg.sender] += amount
    self.total_unbonding += amount
    release: uint256 = block.timestamp + unbonding_delay
    self.unbond_release_time[msg.sender] = release
    self._refresh_eligibility(msg.sender, False)
    log UnbondRequested(account=msg.sender, amount=amount, release_time=release)


@external
def withdraw():
    """
    @notice Pays out the caller's queued stake once the delay has passed and no
            fraud report against the caller is unresolved.
    """
    amount: uint256 = self.unbonding[msg.sender]
    assert amount > 0, "staking: nothing to withdraw"
    assert block.timestamp >= self.unbond_release_time[msg.sender], "staking: still unbonding"
    assert self.open_reports[msg.sender] == 0, "staking: report pending"
    self.unbonding[msg.sender] = 0
    self.total_unbonding -= amount
    assert extcall token.transfer(msg.sender, amount, default_return_value=True), "staking: transfer failed"
    log Withdrawn(account=msg.sender, amount=amount)


@external
def slash(account: address, fraction_bps: uint256, reporter: address, reporter_share_bps: uint256) -> uint256:
    """
    @notice Slashes `fraction_bps` of the account's stake, taking bonded stake
            first and queued stake after. The reporter gets its share; the rest is burned.
    @dev Only the disputes contract (after a confirmed report) or the results
         contract (a signer of a rejected result) may call this.
    @param account The slashed account.
    @param fraction_bps Share of its bonded plus queued stake to slash.
    @param reporter Receives its share of the slash.
    @param reporter_share_bps The reporter's share; the rest is burned.
    @return The total amount slashed.
    """
    assert msg.sender == self.disputes or msg.sender == self.results, "staking: only disputes or results"
    assert fraction_bps <= BPS and reporter_share_bps <= BPS, "staking: bad fraction"
    amount: uint256 = (self.staked[account] + self.unbonding[account]) * fraction_bps // BPS
    self._take(account, amount)
    self.total_slashed += amount
    reward: uint256 = amount * reporter_share_bps // BPS
    burned: uint256 = amount - reward
    if reward > 0:
        assert extcall token.transfer(reporter, reward, default_return_value=True), "staking: transfer failed"
    if burned > 0:
        extcall IToken(token.address).burn(burned)
    log Slashed(account=account, amount=amount, reporter=reporter, reporter_reward=reward, burned=burned)
    return amount


@external
def fine(account: address, amount: uint256) -> uint256:
    """
    @notice Burns a fixed fee from the account's stake (bonded first, then queued), at
            most all of it: an accused that served late (Disputes).
    @dev Only the disputes contract may call this.
    @param account The fined account.
    @param amount The fee (wei).
    @return The amount burned.
    """
    assert msg.sender == self.disputes, "staking: only disputes"
    taken: uint256 = min(amount, self.staked[account] + self.unbonding[account])
    self._take(account, taken)
    if taken > 0:
        extcall IToken(token.address).burn(taken)
    log Fined(account=account, amount=taken)
    return taken


@internal
def _take(account: address, amount: uint256):
    """
    @dev Removes `amount` (at most the account's bonded plus queued stake) from the
         account, bonded stake first, and refreshes its eligibility.
    """
    bonded: uint256 = self.staked[account]
    from_bonded: uint256 = min(amount, bonded)
    from_queued: uint256 = amount - from_bonded
    self.staked[account] = bonded - from_bonded
    self.total_staked -= from_bonded
    self.unbonding[account] = self.unbonding[account] - from_queued
    self.total_unbonding -= from_queued
    self._refresh_eligibility(account, False)


@external
def report_opened(account: address):
    """
    @notice Counts an open fraud report against `account`; blocks its withdrawals.
    @dev Only the disputes contract may call this.
    @param account The reported account.
    """
    assert msg.sender == self.disputes, "staking: only disputes"
    self.open_reports[account] += 1
    log ReportCountChanged(account=account, open_reports=self.open_reports[account])


@external
def report_closed(account: address):
    """
    @notice Uncounts a resolved fraud report against `account`.
    @dev Only the disputes contract may call this.
    @param account The reported account.
    """
    assert msg.sender == self.disputes, "staking: only disputes"
    assert self.open_reports[account] > 0, "staking: no open report"
    self.open_reports[account] -= 1
    log ReportCountChanged(account=account, open_reports=self.open_reports[account])


@external
def retire(account: address):
    """
    @notice Ends an absent validator's eligibility: no permit from the next round on.
            It keeps its stake (it may unbond, or be slashed as before) and comes back
            by staking again, like an evicted validator.
    @dev Only the disputes contract may call this, from `retire_absent`.
    @param account The validator.
    """
    assert msg.sender == self.disputes, "staking: only disputes"
    assert self.eligible_role[account] == ROLE_VALIDATOR, "staking: not an eligible validator"
    self.eligible_role[account] = ROLE_NONE
    self._remove_validator(account)
    log ValidatorRetired(account=account)


@view
@external
def is_eligible_miner(account: address) -> bool:
    """
    @notice Whether `account` is a registered miner with at least the minimum stake.
    @param account The account.
    @return True when it is an eligible miner.
    """
    return self.eligible_role[account] == ROLE_MINER


@view
@external
def validator_count() -> uint256:
    """
    @notice Number of validators holding at least the validator minimum stake
            (the length of `validators`).
    @return The number of eligible validators.
    """
    return len(self.validators)


@view
@external
def class_checkers(miner: address, validators_: DynArray[address, MAX_VALIDATORS]) -> DynArray[bool, MAX_VALIDATORS]:
    """
    @notice Which of `validators_` hold `miner`'s hardware class and so may check it
            exactly: entry j stands for `validators_[j]`.
    @param miner The miner.
    @param validators_ The validators (a round's `validators_of`).
    @return One flag per validator.
    """
    wanted: uint256 = self._classes_of(miner)
    held: DynArray[bool, MAX_VALIDATORS] = []
    for v: address in validators_:
        held.append(self._classes_of(v) & wanted != 0)
    return held


@view
@internal
def _classes_of(account: address) -> uint256:
    """
    @dev The account's class set; class 0 when it never set one.
    """
    classes: uint256 = self.hardware_classes[account]
    if classes == 0:
        return 1
    return classes


@internal
def _refresh_eligibility(account: address, may_join: bool):
    """
    @dev Recomputes `account`'s eligible role from its role and stake, keeping the
         eligible-miner count, the miner's `eligible_since` and the `validators`
         list in step. Only `stake` passes `may_join`: an unbond or a slash only
         ever removes, so an evicted validator stays out (and a slash never reverts).
    """
    r: uint8 = self.role[account]
    new_role: uint8 = ROLE_NONE
    if r == ROLE_MINER and self.staked[account] >= min_miner_stake:
        new_role = ROLE_MINER
    elif r == ROLE_VALIDATOR and self.staked[account] >= min_validator_stake:
        new_role = ROLE_VALIDATOR
    old_role: uint8 = self.eligible_role[account]
    if old_role == ROLE_VALIDATOR and new_role == ROLE_VALIDATOR:
        self._note_permit(account)  # its weight changed
    if old_role == new_role or (old_role == ROLE_NONE and not may_join):
        return
    self.eligible_role[account] = new_role
    if old_role == ROLE_MINER:
        self.eligible_miner_count -= 1
        self.eligible_since[account] = 0
    elif old_role == ROLE_VALIDATOR:
        self._remove_validator(account)
    if new_role == ROLE_MINER:
        self.eligible_miner_count += 1
        clock: uint256 = self.eligibility_clock + 1
        self.eligibility_clock = clock
        self.eligible_since[account] = clock
    elif new_role == ROLE_VALIDATOR:
        if len(self.validators) == max_permits:
            self._evict_smallest(account)
        self.validators.append(account)
        self.validator_index[account] = len(self.validators)
        self._note_permit(account)
        log ValidatorSetChanged(account=account, added=True, size=len(self.validators))


@internal
def _evict_smallest(newcomer: address):
    """
    @dev Removes the smallest listed validator (lowest stake, ties: higher address)
         from the full `validators` list to make room for `newcomer`, whose stake
         must be larger. One pass over at most `max_permits` entries.
    """
    smallest: address = empty(address)
    low: uint256 = max_value(uint256)
    for v: address in self.validators:
        s: uint256 = self.staked[v]
        if s < low or (s == low and convert(v, uint256) > convert(smallest, uint256)):
            low = s
            smallest = v
    assert self.staked[newcomer] > low, "staking: validator set full, stake not above the smallest"
    self.eligible_role[smallest] = ROLE_NONE
    self._remove_validator(smallest)
    log ValidatorEvicted(account=smallest, stake=low, by=newcomer)


@internal
def _remove_validator(account: address):
    """
    @dev Removes `account` from `validators` (swap-and-pop).
    """
    # swap-and-pop: the last entry takes the leaving validator's place
    i: uint256 = self.validator_index[account] - 1
    last: address = self.validators.pop()
    self.validator_index[account] = 0
    extcall self.keys.note_validator(account, 0, 0)
    if last != account:
        self.validators[i] = last
        self.validator_index[last] = i + 1
        self._note_permit(last)
    log ValidatorSetChanged(account=account, added=False, size=len(self.validators))


@internal
def _note_permit(account: address):
    """
    @dev Tells the key registry a listed validator's slot and stake, as they are now.
    """
    extcall self.keys.note_validator(account, self.validator_index[account] - 1, self.staked[account])
