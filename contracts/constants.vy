# pragma version ~=0.4.3
# SPDX-License-Identifier: AGPL-3.0-only
"""
@title veritrain shared sizes
@custom:contract-name constants
@license GNU Affero General Public License v3.0 only
@notice The bounds every contract and interface shares, declared once. Changing
        one changes the ABI of every contract that names it.
"""

# permitted validators per round (the K of top-K; also the bound of every validator list)
MAX_VALIDATORS: constant(uint256) = 64
# miners that may commit in one round (a reveal scores them all)
MAX_MINERS: constant(uint256) = 1024
# a revealed score vector: 2 bytes big-endian per miner, in commit order
SCORE_BYTES: constant(uint256) = 2 * MAX_MINERS
# hashed in segments of 128 scores, so a column challenge carries one segment per vector
SEGMENT_BYTES: constant(uint256) = 256
# validators holding at least the validator minimum stake (the staking registry's bound)
MAX_ELIGIBLE_VALIDATORS: constant(uint256) = 256
# an ed25519 signature (node-key bindings, challenge seeds)
ED25519_SIG_BYTES: constant(uint256) = 64
# EIP-2537 encodings: a G1 point (public key) and a G2 point (signature)
BLS_G1_BYTES: constant(uint256) = 128
BLS_G2_BYTES: constant(uint256) = 256
# header words of a round's result (see Results.vy)
HEADER_WORDS: constant(uint256) = 14
# hardware classes a run may permit: bit i of a class set is class i of `[[training.classes]]`
MAX_CLASSES: constant(uint256) = 16
# basis points: 10,000 = 100 %
BPS: constant(uint256) = 10_000
# 1.0 in 18-decimal fixed point (agreement factors)
ONE: constant(uint256) = 10**18
