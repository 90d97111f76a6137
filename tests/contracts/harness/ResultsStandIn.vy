# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title results stand-in
@notice Test only: pending attempts and final roots set by the test; records
        the challenge contracts' rejects (IResults).
"""

from contracts.interfaces import IResults

implements: IResults

pending: public(HashMap[uint256, bytes32])
final_root: public(HashMap[uint256, bytes32])
challenge_window: public(uint256)
challengers: public(HashMap[address, bool])
rejected: public(HashMap[uint256, uint256])
reporter: public(HashMap[uint256, address])


@deploy
def __init__(window: uint256):
    self.challenge_window = window


@external
def allow(challenges: address):
    self.challengers[challenges] = True


@external
def set_pending(round: uint256, pending: bytes32):
    self.pending[round] = pending


@external
def set_final(round: uint256, root: bytes32):
    self.final_root[round] = root


@external
def reject(round: uint256, challenger: address):
    assert self.challengers[msg.sender], "results: only challenges"
    assert self.pending[round] != empty(bytes32), "results: nothing pending"
    self.pending[round] = empty(bytes32)
    self.rejected[round] += 1
    self.reporter[round] = challenger


@view
@external
def rejected_count(round: uint256) -> uint256:
    return self.rejected[round]


@pure
@external
def commitment_of(root: bytes32, non_signers_hash: bytes32, posted_time: uint256, attempt: uint256) -> bytes32:
    # the real contract's: keccak cut to its top 208 bits
    digest: uint256 = convert(keccak256(abi_encode(root, non_signers_hash, posted_time, attempt)), uint256)
    return convert(digest & ~(2**48 - 1), bytes32)
