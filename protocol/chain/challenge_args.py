"""Calldata of a result challenge, built from a settled round (the posted tree's preimages).

A challenger that holds the posted tree (every node's body and sums, as `SettledRound` keeps
them) gets from here the arguments a challenge or an answer takes after the attempt's five
(round, header, non-signers hash, posted time, attempt): a column, a node, the root preimage,
the validator entries, the claims list, the reveals.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.core.crypto.keccak import keccak256
from protocol.core.errors import ResultError
from protocol.core.settlement.abi_words import list_hash
from protocol.core.settlement.claims_tree import chunk_summaries, claim_chunks
from protocol.core.settlement.entries_tree import entry_hash, entry_path
from protocol.core.settlement.result_header import SettledRound
from protocol.core.settlement.result_inputs import RoundInputs
from protocol.core.settlement.score_vector import SEGMENT_COLUMNS, segments_hash

ZERO32 = b"\x00" * 32


def column_args(settled: SettledRound, i: int) -> tuple:
    """(leaf fields, leaf sums, inclusion path, root preimage, reveals) of column `i`."""
    return (*leaf_answer_args(settled, i), root_arg(settled), reveals_arg(settled.inputs, i))


def attempt_of(post: dict) -> tuple:
    """(round, header, non-signers hash, posted time, attempt) of a `ResultPosted` row: the five
    arguments every challenge and demand of that attempt starts with."""
    return (int(post["round"]), [bytes(w) for w in post["header"]], list_hash([str(a) for a in post["non_signers"]]),
            int(post["posted_time"]), int(post["attempt"]))


def leaf_answer_args(settled: SettledRound, i: int) -> tuple:
    """(leaf fields, leaf sums, inclusion path) of column `i`: `TreeChallenges.answer_leaf`'s
    arguments after the attempt's five, and what every challenge of a leaf carries."""
    inputs, result, tree = settled.inputs, settled.result, settled.tree
    miner = inputs.miners[i]
    prev, prev_index = inputs.prev_pointer(miner)
    leaf = (i, int(miner, 16), result.reputation[i], result.cumulative[i], prev, prev_index)
    path = tree.inclusion_path(0, i)
    return (leaf, list(tree.levels[0][i].sums), ([s for s, _ in path], [h for _, h in path]))


def entries_arg(settled: SettledRound) -> list[tuple]:
    """Every validator entry's fields (j, account, credit, cumulative, prev, prev_index), as the
    `ValidatorsAnswered` event shows them (an entry challenge takes one, `entry_at_arg`)."""
    inputs, result = settled.inputs, settled.result
    return [(j, int(v, 16), result.validator_credit[j], result.validator_cumulative[j], *inputs.prev_pointer(v))
            for j, v in enumerate(inputs.validators)]


POINTER_SHIFT = 32  # an answered entry's prev pointer: prev above, prev_index in the low 32 bits


def answered_entries_arg(settled: SettledRound) -> list[tuple[int, int, int]]:
    """The validator entries as `answer_validators` takes them: (credit, cumulative, prev << 32 |
    prev_index) by position (the index and account are the position's)."""
    out = []
    for j, (_, _, credit, cumulative, prev, prev_index) in enumerate(entries_arg(settled)):
        if prev_index >> POINTER_SHIFT:
            raise ResultError(f"validator entry {j}: prev_index {prev_index} does not fit 32 bits")
        out.append((credit, cumulative, (prev << POINTER_SHIFT) | prev_index))
    return out


def entry_at_arg(entries: Sequence[Sequence[int]], j: int) -> tuple:
    """Entry `j` of a validators list (as `entries_arg` builds it or an answer shows it) with its
    path under the list's tree: the `EntryAt` (position, fields, siblings) an entry challenge
    carries."""
    return j, tuple(entries[j]), entry_path([entry_hash(*e) for e in entries], j)


NO_ENTRY: tuple = (0, (0,) * 6, [])  # an `EntryAt` a challenge ignores (a pointer past a round's validators)


def claims_arg(settled: SettledRound) -> list[bytes]:
    """The claims chunk summaries (per chunk of the claims list, miners in column order then
    validators: its list hash and root), as `answer_claims` and every claims challenge take them."""
    return chunk_summaries(settled.claim_leaves)


def claims_chunk_arg(settled: SettledRound, chunk: int) -> tuple[list[bytes], int, list[bytes]]:
    """(summaries, chunk, its claims): `answer_claims_chunk`'s and `challenge_claims_chunk`'s
    arguments after the attempt's five."""
    return claims_arg(settled), chunk, claim_chunks(settled.claim_leaves)[chunk]


def root_arg(settled: SettledRound) -> tuple[bytes, list[int]]:
    """The tree root's preimage (body, sums); (0, []) for an empty tree."""
    tree = settled.tree
    return (ZERO32, []) if tree.tree_root() == ZERO32 else _preimage(tree.root_preimage())


def node_arg(settled: SettledRound, level: int, index: int) -> tuple[bytes, bytes, list[int]]:
    """(hash, body, sums) of node (level, index) of the tree; (0, 0, []) for an empty one."""
    node = settled.tree.levels[level][index]
    return (node.hash, node.body, list(node.sums)) if not node.empty else (ZERO32, ZERO32, [])


def reveals_arg(inputs: RoundInputs, column: int) -> list[tuple]:
    """The reveals whose numbers count in `column` (its deciders that revealed), by position in
    `validators_of`, each cut to the column: (position, the segment of its score entries holding
    the column, all its segment hashes, witness root, held-out loss)."""
    weights = inputs.column_weights(column).weights
    out = []
    for j, v in enumerate(inputs.validators):
        r = inputs.reveals.get(v)
        if r is None or weights[j] == 0:
            continue
        segments = r.revealed_segments
        out.append((j, segments[column // SEGMENT_COLUMNS], [keccak256(seg) for seg in segments], r.witness_root,
                    r.heldout_loss))
    return out


def light_reveals_arg(inputs: RoundInputs) -> tuple:
    """Every round validator's reveal for a header challenge: H(scores), witness root and held-out
    loss (zeros for one that did not reveal)."""
    revealed = [inputs.reveals.get(v) for v in inputs.validators]
    return ([segments_hash(r.revealed_segments) if r else ZERO32 for r in revealed],
            [r.witness_root if r else ZERO32 for r in revealed],
            [r.heldout_loss if r else 0 for r in revealed])


def _preimage(preimage: tuple[bytes, tuple[int, ...]]) -> tuple[bytes, list[int]]:
    body, sums = preimage
    return (body, list(sums))
