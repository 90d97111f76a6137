# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain rewards: emission, forfeits and Merkle cumulative claims
@custom:contract-name rewards
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice The only minter of the token. When a round's result is final the results
        contract mints the round's payout here and records the root of its claims
        tree, whose leaves are every paid account's cumulative earnings up to that
        round. `claim` pays, once, everything earned up to the round whose root it
        proves against; an account's cumulative never decreases, so any final
        round's root pays at most what is owed. The disputes contract marks an
        account whose report was confirmed as forfeited for the round, which the
        result then pays nothing. Nothing here loops over miners. Revert strings
        keep the pre-split "settlement: " prefix.
"""

from ethereum.ercs import IERC20
from snekmate.utils import merkle_proof_verification
from . import constants
from .interfaces import IRewards
from .interfaces import IToken

implements: IRewards

BPS: constant(uint256) = constants.BPS
PROOF_DEPTH: constant(uint256) = 32  # leaves per round are far below 2**32

token: public(immutable(IERC20))
emission_per_round: public(immutable(uint256))
miner_share_bps: public(immutable(uint256))
deployer: immutable(address)

disputes: public(address)
results: public(address)
open_reports: public(HashMap[uint256, HashMap[address, uint256]])
forfeited: public(HashMap[uint256, HashMap[address, bool]])
claims_root: public(HashMap[uint256, bytes32])
claimed: public(HashMap[address, uint256])
total_minted: public(uint256)


event RoundPaid:
    round: indexed(uint256)
    minted: uint256
    claims_root: bytes32

event Claimed:
    account: indexed(address)
    round: indexed(uint256)
    amount: uint256
    cumulative: uint256

event ReportFlag:
    round: indexed(uint256)
    account: indexed(address)
    open_reports: uint256

event RewardForfeited:
    round: indexed(uint256)
    account: indexed(address)

event Wired:
    disputes: address
    results: address


@deploy
def __init__(token_: IERC20, emission_per_round_: uint256, miner_share_bps_: uint256):
    """
    @notice Fixes the emission: tokens minted at most per round and the miners' share.
    @param token_ The token minted and paid out.
    @param emission_per_round_ Tokens (wei) a round may pay at most.
    @param miner_share_bps_ The miners' share of the emission; validators get the rest.
    """
    assert miner_share_bps_ <= BPS, "settlement: bad miner share"
    token = token_
    emission_per_round = emission_per_round_
    miner_share_bps = miner_share_bps_
    deployer = msg.sender


@external
def wire(disputes_: address, results_: address):
    """
    @notice Names the disputes and results contracts, once, by the deployer.
    @param disputes_ The only caller of `report_opened` and `report_resolved`.
    @param results_ The only caller of `pay_round`.
    """
    assert msg.sender == deployer, "settlement: only deployer"
    assert self.disputes == empty(address), "settlement: already wired"
    assert disputes_ != empty(address) and results_ != empty(address), "settlement: zero address"
    self.disputes = disputes_
    self.results = results_
    log Wired(disputes=disputes_, results=results_)


@external
def pay_round(round: uint256, minted: uint256, claims_root_: bytes32):
    """
    @notice Mints a final round's payout to this contract and records its claims root.
    @dev Only the results contract may call this, once per round, with `minted` at
         most the emission (the result's challenges check the amount itself).
    @param round The round whose result became final.
    @param minted The round's payout.
    @param claims_root_ Root of the round's cumulative-earnings tree.
    """
    assert msg.sender == self.results, "settlement: only results"
    assert self.claims_root[round] == empty(bytes32), "settlement: round already paid"
    assert minted <= emission_per_round, "settlement: payout above the emission"
    self.claims_root[round] = claims_root_
    if minted > 0:
        extcall IToken(token.address).mint(self, minted)
        self.total_minted += minted
    log RoundPaid(round=round, minted=minted, claims_root=claims_root_)


@external
def claim(round: uint256, cumulative: uint256, proof: DynArray[bytes32, PROOF_DEPTH]) -> uint256:
    """
    @notice Pays the caller everything it earned up to final round `round` that it
            has not claimed: `cumulative` minus what it claimed before.
    @param round A final round whose claims tree holds the caller's leaf (its latest).
    @param cumulative The caller's cumulative earnings in that leaf.
    @param proof The leaf's Merkle proof (sorted-pair keccak, OpenZeppelin layout).
    @return The amount paid.
    """
    root: bytes32 = self.claims_root[round]
    assert root != empty(bytes32), "settlement: round not paid"
    leaf: bytes32 = keccak256(abi_encode(keccak256(abi_encode(msg.sender, cumulative))))
    assert merkle_proof_verification._verify(proof, root, leaf), "settlement: invalid claim proof"
    before: uint256 = self.claimed[msg.sender]
    assert cumulative > before, "settlement: nothing to claim"
    amount: uint256 = cumulative - before
    self.claimed[msg.sender] = cumulative
    assert extcall token.transfer(msg.sender, amount, default_return_value=True), "settlement: transfer failed"
    log Claimed(account=msg.sender, round=round, amount=amount, cumulative=cumulative)
    return amount


@view
@external
def total_claimed() -> uint256:
    """
    @notice Everything claimed so far: what was minted less what this contract
            still holds (no counter, so a claim writes one slot less). Tokens sent
            here by anyone else only lower it, never below zero.
    @return The amount.
    """
    return self.total_minted - min(staticcall token.balanceOf(self), self.total_minted)


@external
def report_opened(round: uint256, account: address):
    """
    @notice Counts an open report against `account` in `round`.
    @dev Only the disputes contract may call this.
    @param round The reported round.
    @param account The accused: a miner, or a validator for a `lazy_validator` report.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    self.open_reports[round][account] += 1
    log ReportFlag(round=round, account=account, open_reports=self.open_reports[round][account])


@external
def report_resolved(round: uint256, account: address, confirmed: bool):
    """
    @notice Ends a report: a confirmed one forfeits the accused's pay for `round`.
            Reports resolve before the round's result may be posted, so the result
            already pays a forfeited account nothing.
    @dev Only the disputes contract may call this.
    @param round The reported round.
    @param account The accused.
    @param confirmed Whether the report was confirmed.
    """
    assert msg.sender == self.disputes, "settlement: only disputes"
    assert self.open_reports[round][account] > 0, "settlement: no open report"
    self.open_reports[round][account] -= 1
    log ReportFlag(round=round, account=account, open_reports=self.open_reports[round][account])
    if confirmed and not self.forfeited[round][account]:
        self.forfeited[round][account] = True
        log RewardForfeited(round=round, account=account)
