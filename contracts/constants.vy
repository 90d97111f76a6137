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
MAX_VALIDATORS: constant(uint256) = 1024
# a permitted validator's member record (BlsKeys.member_at): its weight in the low 96 bits,
# its position among the round's validators in the next 16, the top 104 bits of keccak256
# of its BLS key (0: no key) above
MEMBER_INDEX_SHIFT: constant(uint256) = 96
MEMBER_KEY_SHIFT: constant(uint256) = 112
MEMBER_KEY_DROP: constant(uint256) = 152  # the key hash's low bits a record leaves out
# seats of a miner's check committee (Staking.committee_size; 0: no committees)
MAX_COMMITTEE: constant(uint256) = 16
# miners that may commit in one round
MAX_MINERS: constant(uint256) = 16384
# a revealed score vector is sparse: one 4-byte entry (column, score) per miner scored nonzero,
# in one segment per 1,024 columns (a column challenge carries one segment per vector)
ENTRY_BYTES: constant(uint256) = 4
SEGMENT_COLUMNS: constant(uint256) = 1024
SEGMENT_BYTES: constant(uint256) = ENTRY_BYTES * SEGMENT_COLUMNS
MAX_SEGMENTS: constant(uint256) = MAX_MINERS // SEGMENT_COLUMNS
# an ed25519 signature (node-key bindings, challenge seeds)
ED25519_SIG_BYTES: constant(uint256) = 64
# EIP-2537 encodings: a G1 point (public key) and a G2 point (signature)
BLS_G1_BYTES: constant(uint256) = 128
BLS_G2_BYTES: constant(uint256) = 256
# header words of a round's result, by position (docs/PROTOCOL.md §11, "Header and result root")
HEADER_WORDS: constant(uint256) = 15
H_TAG: constant(uint256) = 0
H_CHAIN_ID: constant(uint256) = 1
H_RESULTS: constant(uint256) = 2
H_RUN_CONFIG: constant(uint256) = 3
H_ROUND: constant(uint256) = 4
H_MODEL: constant(uint256) = 5
H_TREE_ROOT: constant(uint256) = 6
H_VALIDATORS: constant(uint256) = 7
H_CLAIMS_ROOT: constant(uint256) = 8
H_CLAIMS_LIST: constant(uint256) = 9
H_N: constant(uint256) = 10
H_MINTED: constant(uint256) = 11
H_LOSS: constant(uint256) = 12
H_QUORUM: constant(uint256) = 13
H_AGGREGATION: constant(uint256) = 14  # the aggregation tree's node hashes (0: summed flat)
# domain tags of a result root and a score vector root (docs/PROTOCOL.md §3)
RESULT_TAG: constant(bytes32) = keccak256("veritrain/result/v1")
VECTOR_TAG: constant(bytes32) = keccak256("veritrain/vector/v1")
# hardware classes a run may permit: bit i of a class set is class i of `[[training.classes]]`
MAX_CLASSES: constant(uint256) = 16
# basis points: 10,000 = 100 %
BPS: constant(uint256) = 10_000
# 1.0 in 18-decimal fixed point (agreement factors)
ONE: constant(uint256) = 10**18
