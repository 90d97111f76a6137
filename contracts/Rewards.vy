# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain rewards: emission, reputation, held-back rewards and claims
@custom:contract-name rewards
@license GNU Affero General Public License v3.0 only
@notice The only minter of the token. When the scores contract finalizes a round
        it hands over consensus scores and validator agreements; this contract
        updates miner reputation, mints the round's emission into claimable
        balances (a miner's reward is held back while a fraud report against it
        is open, and forfeited once one is confirmed; a validator confirmed lazy
        in a round gets no pay for it) and pays claims. Revert
        strings keep the pre-split "settlement: " prefix.
"""

from ethereum.ercs import IERC20
from . import constants
from .interfaces import IRewards
from .interfaces import IRounds
from .interfaces import IToken

implements: IRewards

MAX_VALIDATORS: constant(uint256) = constants.MAX_VALIDATORS
MAX_MINERS: constant(uint256) = constants.MAX_MINERS
BPS: constant(uint256) = constants.BPS

token: public(immutable(IERC20))
rounds: public(immutable(IRounds))
scores: public(immutable(address))
emission_per_round: public(immutable(uint256))
miner_share_bps: public(immutable(uint256))
deployer: immutable(address)

disputes: public(address)
reputation: public(HashMap[address, uint16])
claimable: public(HashMap[address, uint256])
claimed: public(HashMap[address, uint256])
held: public(HashMap[uint256, HashMap[address, uint256]])
open_reports: public(HashMap[uint256, HashMap[address, uint256]])
forfeited: public(HashMap[uint256, HashMap[address, bool]])
total_minted: public(uint256)
total_burned: public(uint256)
total_claimable: public(uint256)
total_held: public(uint256)


event MinerSettled:
    round: indexed(uint256)
    miner: indexed(address)
    consensus: uint16
    reward: uint256
    reputation: uint16
    held: bool

event ValidatorSettled:
    round: indexed(uint256)
    validator: indexed(address)
    agreement: uint256
    reward: uint256

event Claimed:
    account: indexed(address)
    amount: uint256

event RewardReleased:
    round: indexed(uint256)
    miner: indexed(address)
    amount: uint256

event RewardForfeited:
    round: indexed(uint256)
    miner: indexed(address)
    amount: uint256

event ReportFlag:
    round: indexed(uint256)
    miner: indexed(address)
    open_reports: uint256

event DisputesSet:
    disputes: address


@deploy
def __init__(token_: IERC20, rounds_: IRounds, scores_: address, emission_per_round_: uint256, miner_share_bps_: uint256):
    """
    @notice Fixes the emission: tokens minted per finalized round and the miners' share.
    @param token_ The token minted and paid out.
    @param rounds_ The round clock (asked whether a round is finalized).
    @param scores_ The only caller of `settle`.
    @param emission_per_round_ Tokens (wei) minted per round with revealed scores.
    @param miner_share_bps_ The miners' share of the emission; validators get the rest.
    """
    assert miner_share_bps_ <= BPS, "settlement: bad miner share"
    token = token_
    rounds = rounds_
    scores = scores_
    emission_per_round = emission_per_round_
    miner_share_bps = miner_share_bps_
    deployer = msg.sender


@external
def set_disputes(disputes_: address):
    """
    @notice Names the disputes contract, once, by the deployer.
    @param disputes_ The only caller of `report_opened` and `report_resolved`.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.disputes == empty(address), "settlement: disputes already set"
    assert disputes_ != empty(address), "settlement: zero address"
    self.disputes = disputes_
    log DisputesSet(disputes=disputes_)


@external
def settle(
    round: uint256, miners: DynArray[address, MAX_MINERS], cons: DynArray[uint16, MAX_MINERS],
    vals: DynArray[address, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS],
    agreements: DynArray[uint256, MAX_VALIDATORS],
) -> uint256:
    """
    @notice Pays a finalized round: miners by consensus score (held back while a
            report is open, never minted once forfeited), validators by stake times
            agreement (nothing for one whose dividends the round forfeited: a
            confirmed `lazy_validator` report), and mints the total to this contract.
            A fallback round passes no miners (none paid, reputations unchanged)
            and full agreement for every validator.
    @dev Only the scores contract may call this, from `finalize`.
    @param round The finalized round.
    @param miners Every miner that committed, ascending.
    @param cons The consensus score of each miner.
    @param vals The validators that revealed.
    @param weights The snapshotted stake of each validator.
    @param agreements Each validator's agreement with consensus (1e18 = full).
    @return The amount minted.
    """
    assert msg.sender == scores, "settlement: only scores"
    minted: uint256 = self._pay_miners(round, miners, cons)
    minted += self._pay_validators(round, vals, weights, agreements)
    if minted > 0:
        extcall IToken(token.address).mint(self, minted)
        self.total_minted += minted
    return minted


@external
def claim() -> uint256:
    """
    @notice Pays out the caller's claimable rewards.
    @return The amount paid.
    """
    amount: uint256 = self.claimable[msg.sender]
    assert amount > 0, "settlement: nothing to claim"
    self.claimable[msg.sender] = 0
    self.total_claimable -= amount
    self.claimed[msg.sender] += amount
    assert extcall token.transfer(msg.sender, amount, default_return_value=True), "settlement: transfer failed"
    log Claimed(account=msg.sender, amount=amount)
    return amount


@external
def report_opened(round: uint256, miner: address):
    """
    @notice Marks a report against `miner` in `round`: its reward is held back.
    @dev Only the disputes contract may call this.
    @param round The reported round.
    @param miner The accused: a miner, or a validator for a `lazy_validator` report.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    self.open_reports[round][miner] += 1
    log ReportFlag(round=round, miner=miner, open_reports=self.open_reports[round][miner])


@external
def report_resolved(round: uint256, miner: address, confirmed: bool):
    """
    @notice Ends a report: the first confirmed one forfeits the accused's reward for
            `round` (a miner's or a lazy validator's; burning it if `round` is already
            finalized, otherwise finalize never mints it); otherwise a held reward is
            released once no report is open.
    @dev Only the disputes contract may call this.
    @param round The reported round.
    @param miner The accused: a miner, or a validator for a `lazy_validator` report.
    @param confirmed Whether the report was confirmed.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    assert self.open_reports[round][miner] > 0, "settlement: no open report"
    self.open_reports[round][miner] -= 1
    log ReportFlag(round=round, miner=miner, open_reports=self.open_reports[round][miner])
    amount: uint256 = self.held[round][miner]
    if confirmed:
        if self.forfeited[round][miner]:
            return  # forfeited by an earlier confirmed report: nothing left to burn
        self.forfeited[round][miner] = True
        if staticcall rounds.finalized(round):
            # the reward was held at finalize; before finalize, finalize logs the forfeit
            if amount > 0:
                self.held[round][miner] = 0
                self.total_held -= amount
                self.total_burned += amount
                extcall IToken(token.address).burn(amount)
            log RewardForfeited(round=round, miner=miner, amount=amount)
    elif self.open_reports[round][miner] == 0 and amount > 0 and not self.forfeited[round][miner]:
        self.held[round][miner] = 0
        self.total_held -= amount
        self.claimable[miner] += amount
        self.total_claimable += amount
        log RewardReleased(round=round, miner=miner, amount=amount)


@internal
def _pay_miners(round: uint256, miners: DynArray[address, MAX_MINERS], cons: DynArray[uint16, MAX_MINERS]) -> uint256:
    """
    @dev Updates each miner's reputation and credits (or holds back, or forfeits)
         its share of the miners' pool, pro rata to consensus score.
    """
    pool: uint256 = emission_per_round * miner_share_bps // BPS
    total: uint256 = 0
    for c: uint16 in cons:
        total += convert(c, uint256)
    minted: uint256 = 0
    for i: uint256 in range(len(miners), bound=MAX_MINERS):
        m: address = miners[i]
        c: uint16 = cons[i]
        rep: uint16 = convert((9 * convert(self.reputation[m], uint256) + convert(c, uint256)) // 10, uint16)
        self.reputation[m] = rep
        reward: uint256 = 0
        if total > 0:
            reward = pool * convert(c, uint256) // total
        is_held: bool = False
        if self.forfeited[round][m]:
            log RewardForfeited(round=round, miner=m, amount=reward)
            reward = 0
        elif self.open_reports[round][m] > 0:
            self.held[round][m] = reward
            self.total_held += reward
            is_held = True
        else:
            self.claimable[m] += reward
            self.total_claimable += reward
        minted += reward
        log MinerSettled(round=round, miner=m, consensus=c, reward=reward, reputation=rep, held=is_held)
    return minted


@internal
def _pay_validators(
    round: uint256, vals: DynArray[address, MAX_VALIDATORS], weights: DynArray[uint256, MAX_VALIDATORS],
    agreements: DynArray[uint256, MAX_VALIDATORS],
) -> uint256:
    """
    @dev Credits the validators' pool pro rata to stake times agreement; a
         validator forfeited in `round` (confirmed lazy) has no share.
    """
    pool: uint256 = emission_per_round - emission_per_round * miner_share_bps // BPS
    shares: DynArray[uint256, MAX_VALIDATORS] = []
    total: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        share: uint256 = 0
        if not self.forfeited[round][vals[j]]:
            share = weights[j] * agreements[j]
        shares.append(share)
        total += share
    minted: uint256 = 0
    for j: uint256 in range(len(vals), bound=MAX_VALIDATORS):
        reward: uint256 = 0
        if total > 0:
            reward = pool * shares[j] // total
        self.claimable[vals[j]] += reward
        self.total_claimable += reward
        minted += reward
        log ValidatorSettled(round=round, validator=vals[j], agreement=agreements[j], reward=reward)
    return minted
