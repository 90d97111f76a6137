"""Which challenge proves a part of a posted result wrong, and its arguments.

A validator that disputes a pending root compares each part the signers showed (a leaf with its
path, the validator entries, the claims chunks; docs/PROTOCOL.md §11.9) with its own. For a part
that differs, each function here mirrors the contract's own check on what the validator knows
and returns a challenge only when the contract must uphold it, the cheapest that does: a history
or stale-pointer challenge for an account's link (no reveals), a column challenge only for what
is recomputed from the reveals. A part that differs only because a part below it is wrong (an
entry crediting a wrong root sum, a claim following a wrong leaf) gives nothing here: the part
below is challenged instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from protocol.chain.challenge_args import (
    NO_ENTRY,
    ZERO32,
    entries_arg,
    entry_at_arg,
    leaf_answer_args,
    reveals_arg,
)
from protocol.core.crypto.keccak import checksum_address
from protocol.core.settlement.claims_tree import (
    CLAIMS_CHUNK,
    chunk_count,
    chunk_summaries,
    claim_chunks,
    claim_leaf,
    claims_root,
)
from protocol.core.settlement.result_header import HEADER_WORD_NAMES, SettledRound
from protocol.core.settlement.result_tree import children_hash
from validator.posted_parts import PostedLeaf
from validator.tree_search import own_leaf

Finals = Callable[[int], SettledRound | None]  # final round q's settled result; None when q is not final
NO_HEADER = [ZERO32] * len(HEADER_WORD_NAMES)  # evidence a challenge ignores (a pointer to a round that is not final)
NO_LEAF: tuple = ((0,) * 6, [], ([], []))


@dataclass(frozen=True)
class Proof:
    """A challenge to send: its contract, function and arguments after the attempt's five."""

    contract: str
    function: str
    args: tuple
    what: str  # for the log: which part is wrong


def bad_prev(round_: int, prev: int, finals: Finals) -> bool:
    """A prev pointer naming a round not earlier than `round_`, or not final (challenge_base._bad_prev)."""
    return prev != 0 and (prev - 1 >= round_ or finals(prev - 1) is None)


def leaf_proof(own: SettledRound, leaf: PostedLeaf, root: tuple | None, finals: Finals) -> Proof | None:
    """A posted column leaf that differs from this validator's: a column challenge when its miner,
    its sums or a first entry differ (needs the posted root preimage `root`), else a stale
    pointer (it skips this validator's newer final entry) or its history."""
    i = leaf.position
    fields, sums = own_leaf(own, i)
    if (leaf.fields, leaf.sums) == (fields, sums):
        return None
    own_prev, own_prev_index = fields[4], fields[5]
    if leaf.fields[1] != fields[1] or leaf.sums != sums or (leaf.prev == 0 and own_prev == 0):
        if root is None:
            return None  # wait for the root preimage
        return Proof("column_challenges", "challenge_column", (*leaf.args(), root, reveals_arg(own.inputs, i)),
                     f"column {i}")
    if own_prev != 0 and (leaf.prev == 0 or leaf.prev < own_prev):
        other = finals(own_prev - 1)
        assert other is not None  # this validator's prev pointers name final rounds
        return Proof("account_challenges", "challenge_miner_stale",
                     (*leaf.args(), own_prev - 1, list(other.header.words()), own_prev_index,
                      *leaf_answer_args(other, own_prev_index)), f"column {i} prev")
    # the pointer names a round that is not final, or one not holding this miner, or the values
    # do not follow from it: every case left fails the link
    final = None if bad_prev(own.inputs.round, leaf.prev, finals) else finals(leaf.prev - 1)
    held = final is not None and leaf.fields[5] < final.inputs.n
    evidence = (list(final.header.words()) if final else NO_HEADER,
                *(leaf_answer_args(final, leaf.fields[5]) if held and final else NO_LEAF))
    return Proof("account_challenges", "challenge_miner_history", (*leaf.args(), *evidence), f"column {i} history")


def node_proof(own: SettledRound, leaf: PostedLeaf, level: int) -> Proof:
    """The parent at `level` + 1 on `leaf`'s path: its children agree with this validator's, its
    sums (known by their hash only) do not."""
    p = leaf.position >> (level + 1)
    left, right = own.tree.levels[level][2 * p], own.tree.levels[level][2 * p + 1]
    path = (list(leaf.siblings[level + 1:]), list(leaf.sums_hashes[level + 1:]))
    return Proof("tree_challenges", "challenge_node",
                 (level + 1, p, children_hash(left.hash, right.hash), leaf.sums_hashes[level], path,
                  left.hash, (left.body, list(left.sums)), right.hash, (right.body, list(right.sums))),
                 f"node {level + 1}/{p}")


def shape_proof(own: SettledRound, leaf: PostedLeaf, level: int) -> Proof:
    """The sibling at `level` on `leaf`'s path: nonempty over columns >= n, or empty over a column."""
    i = leaf.position
    s = (i >> level) ^ 1
    path = ([own.tree.levels[level][i >> level].hash, *leaf.siblings[level + 1:]], list(leaf.sums_hashes[level:]))
    return Proof("tree_challenges", "challenge_shape", (level, s, leaf.siblings[level], path), f"shape {level}/{s}")


def entries_proof(own: SettledRound, entries: list[tuple[int, ...]], root: tuple | None,
                  finals: Finals) -> Proof | None:
    """Posted validator entries that differ from this validator's: the entries challenge of the
    first one malformed against the posted root's sums (needs `root`), else a stale pointer or a
    history, each carrying the one entry with its path."""
    mine = entries_arg(own)
    if entries == mine or root is None:
        return None
    malformed = _first_malformed(own, entries, root, finals)
    if malformed is not None:
        return Proof("account_challenges", "challenge_validators", (entry_at_arg(entries, malformed), root),
                     f"validator entry {malformed}")
    for j, (e, m) in enumerate(zip(entries, mine, strict=True)):
        if e == m:
            continue
        if m[4] != 0 and (e[4] == 0 or e[4] < m[4]):
            other = finals(m[4] - 1)
            assert other is not None
            return Proof("account_challenges", "challenge_validator_stale",
                         (entry_at_arg(entries, j), m[4] - 1, list(other.header.words()),
                          entry_at_arg(entries_arg(other), m[5])), f"entry {j} prev")
        final = finals(e[4] - 1)
        assert final is not None  # not malformed: its pointer names an earlier final round
        prev = entries_arg(final)
        if e[5] >= len(prev) or prev[e[5]][1] != e[1] or e[3] != prev[e[5]][3] + e[2]:
            prev_at = entry_at_arg(prev, e[5]) if e[5] < len(prev) else NO_ENTRY
            return Proof("account_challenges", "challenge_validator_history",
                         (entry_at_arg(entries, j), list(final.header.words()), prev_at), f"entry {j} history")
    return None


def _first_malformed(own: SettledRound, entries: list[tuple[int, ...]], root: tuple, finals: Finals) -> int | None:
    """AccountChallenges.challenge_validators' check: the first entry that does not name its
    position and round validator, credit the root's sums, give a first entry's cumulative its
    credit or point to a final round (0 for any when the root's sums are not 2 + v)."""
    validators = own.inputs.validators
    sums = root[1] if root[0] != ZERO32 else [0] * (len(validators) + 2)
    if len(sums) != len(validators) + 2:
        return 0 if entries else None
    for j, (index, account, credit, cumulative, prev, prev_index) in enumerate(entries):
        if (index, account, credit) != (j, int(validators[j], 16), sums[2 + j]):
            return j
        if (prev == 0 and (cumulative, prev_index) != (credit, 0)) or bad_prev(own.inputs.round, prev, finals):
            return j
    return None


def claims_proof(own: SettledRound, summaries: list[bytes], chunks: Mapping[int, list[bytes]],
                 posted_claims_root: bytes, leaf_of: Callable[[int], tuple | None],
                 entries: list[tuple[int, ...]] | None) -> tuple[Proof | None, set[int]]:
    """Posted claims that differ from this validator's (`summaries`: per chunk its list hash and
    root; `chunks`: the posted chunks shown so far): the claims-root challenge when the chunk
    count or the root of the chunk roots is wrong, the chunk challenge when a chunk's length or
    root is, else a claim that does not follow from the posted column leaf (`leaf_of(k)`: (fields,
    sums, path) of the posted tree's leaf k, None while not shown) or validator entry. Also the
    positions still to demand (a claims chunk n + 3 + c, a column leaf, n + 1 for the entries)."""
    n, v = own.inputs.n, len(own.inputs.validators)
    if len(summaries) != 2 * chunk_count(n + v) or claims_root(summaries[1::2]) != posted_claims_root:
        return Proof("claims_challenges", "challenge_claims_root", (summaries,), "claims root"), set()
    mine, own_chunks = chunk_summaries(own.claim_leaves), claim_chunks(own.claim_leaves)
    wanted: set[int] = set()
    for c, own_chunk in enumerate(own_chunks):
        if summaries[2 * c:2 * c + 2] == mine[2 * c:2 * c + 2]:
            continue
        claims = chunks.get(c)
        if claims is None:
            wanted.add(n + 3 + c)
        elif len(claims) != len(own_chunk) or claims_root(claims) != summaries[2 * c + 1]:
            return Proof("claims_challenges", "challenge_claims_chunk", (summaries, c, claims), f"claims chunk {c}"), set()
        else:
            found = _wrong_claim(n, c, summaries, claims, own_chunk, leaf_of, entries, wanted)
            if found is not None:
                return found, set()
    return None, wanted


def _wrong_claim(n: int, c: int, summaries: list[bytes], claims: list[bytes], own_chunk: list[bytes],
                 leaf_of: Callable[[int], tuple | None], entries: list[tuple[int, ...]] | None,
                 wanted: set[int]) -> Proof | None:
    """The challenge of a claim of chunk `c` that its posted column leaf or validator entry
    contradicts; adds to `wanted` the leaves and entries still to demand."""
    for i, (claim, mine) in enumerate(zip(claims, own_chunk, strict=True)):
        k = c * CLAIMS_CHUNK + i
        if claim == mine:
            continue
        leaf = leaf_of(k) if k < n else None
        if k < n and leaf is None:
            wanted.add(k)
        elif leaf is not None and claim_leaf(_address(leaf[0][1]), leaf[0][3]) != claim:
            return Proof("claims_challenges", "challenge_miner_claim", (summaries, claims, *leaf), f"claim {k}")
        elif k >= n and entries is None:
            wanted.add(n + 1)
        elif k >= n and entries is not None and claim_leaf(_address(entries[k - n][1]), entries[k - n][3]) != claim:
            return Proof("claims_challenges", "challenge_validator_claim", (summaries, claims, entry_at_arg(entries, k - n)),
                         f"claim {k}")
    return None


def _address(word: int) -> str:
    return checksum_address(word.to_bytes(20, "big"))
