"""The validator entries of a round's result (docs/PROTOCOL.md §11.5), committed by position.

One entry per round validator; validators_hash is the root of a Merkle tree over their hashes,
leaf j at position j, d = ceil(log2 v) levels, padded with zero leaves, each node keccak(left ‖
right). A challenge of an entry carries that entry and its d siblings, so its calldata and gas
grow with log v, not with the validators.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import ZERO_WORD, enc, tag
from protocol.core.settlement.result import RoundResult
from protocol.core.settlement.result_inputs import RoundInputs
from protocol.core.settlement.result_tree import tree_depth

VALIDATOR_DOMAIN = tag("veritrain/validator/v1")


def entry_hash(index: int, validator: str | int, credit: int, cumulative: int, prev: int, prev_index: int) -> bytes:
    """Validator entry `index` of a round (every round validator, revealed or not); `validator`
    as an address or as the word a challenge carries."""
    return keccak256(enc(VALIDATOR_DOMAIN, index, validator, credit, cumulative, prev, prev_index))


def validator_entries(inputs: RoundInputs, result: RoundResult) -> tuple[bytes, ...]:
    """The entries' hashes, by position in the round's validators."""
    entries = []
    for j, validator in enumerate(inputs.validators):
        prev, prev_index = inputs.prev_pointer(validator)
        entries.append(entry_hash(j, validator, result.validator_credit[j], result.validator_cumulative[j],
                                  prev, prev_index))
    return tuple(entries)


def _levels(hashes: Sequence[bytes]) -> list[list[bytes]]:
    level = list(hashes) + [ZERO_WORD] * ((1 << tree_depth(len(hashes))) - len(hashes))
    levels = [level]
    while len(level) > 1:
        level = [keccak256(level[k] + level[k + 1]) for k in range(0, len(level), 2)]
        levels.append(level)
    return levels


def validators_hash(hashes: Sequence[bytes]) -> bytes:
    """The root over the entries' hashes; zero for a round without validators."""
    return _levels(hashes)[-1][0] if hashes else ZERO_WORD


def entry_path(hashes: Sequence[bytes], j: int) -> list[bytes]:
    """Entry `j`'s siblings, from the leaves up."""
    if not 0 <= j < len(hashes):
        raise ResultError(f"no validator entry {j} among {len(hashes)}")
    return [level[(j >> k) ^ 1] for k, level in enumerate(_levels(hashes)[:-1])]


def verify_entry(leaf: bytes, j: int, path: Sequence[bytes], v: int, root: bytes) -> bool:
    """Whether `leaf` is entry `j` < `v` under `root` (result_math._verify_entry)."""
    if not 0 <= j < v or len(path) != tree_depth(v):
        return False
    current = leaf
    for k, sibling in enumerate(path):
        current = keccak256(current + sibling if (j >> k) & 1 == 0 else sibling + current)
    return current == root
