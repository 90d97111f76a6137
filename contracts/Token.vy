# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain token
@custom:contract-name token
@license GNU Affero General Public License v3.0 only (builds on snekmate)
@notice ERC-20 used for both stake and rewards. A genesis allocation is minted
        once, in the constructor, to the holders named in the run config. The
        deploy script then makes the rewards contract the only minter and
        renounces ownership, so afterwards only the per-round emission (minted by
        `Rewards.pay_round` when `Results.finalize_result` makes a round's result
        final) can create tokens. Burns (slashes, rejected-report bonds, bonds of
        wrong challenges) go through snekmate's `burn`.
"""

from snekmate.auth import ownable
from snekmate.tokens import erc20

initializes: ownable
initializes: erc20[ownable := ownable]

exports: erc20.__interface__

MAX_GENESIS_HOLDERS: constant(uint256) = 128


event GenesisAllocation:
    holder: indexed(address)
    amount: uint256


@deploy
def __init__(holders: DynArray[address, MAX_GENESIS_HOLDERS], amounts: DynArray[uint256, MAX_GENESIS_HOLDERS]):
    """
    @notice Mints the genesis allocation. Ownership (and with it the right to name
            minters) stays with the deployer until it calls `renounce_ownership`.
    @param holders Genesis holders, one entry each.
    @param amounts Amount minted to the holder at the same index.
    """
    ownable.__init__()
    erc20.__init__("veritrain", "VTRN", 18, "veritrain", "1")
    assert len(holders) == len(amounts), "token: holders and amounts differ in length"
    for i: uint256 in range(len(holders), bound=MAX_GENESIS_HOLDERS):
        erc20._mint(holders[i], amounts[i])
        log GenesisAllocation(holder=holders[i], amount=amounts[i])
