# pragma version ~=0.4.3
# pragma evm-version prague
"""
@title bls module harness
@notice Test double: exposes contracts/bls.vy's internal functions.
"""

from contracts import bls


@view
@external
def hash_to_g2(message: Bytes[64], dst: Bytes[64]) -> Bytes[256]:
    return bls._hash_to_g2(message, dst)


@view
@external
def g1_add(a: Bytes[128], b: Bytes[128]) -> Bytes[128]:
    return bls._g1_add(a, b)


@pure
@external
def g1_neg(a: Bytes[128]) -> Bytes[128]:
    return bls._g1_neg(a)


@pure
@external
def compress_g1(a: Bytes[128]) -> Bytes[48]:
    return bls._compress_g1(a)
