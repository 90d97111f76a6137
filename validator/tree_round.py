"""One round's aggregation tree as a validator holds it (docs/PROTOCOL.md §13.9): the leaves, the
two drawn servers of each node, the nodes resolved so far, and the evidence against servers that
signed a wrong partial sum."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from protocol.core.aggregation.tree import TreeNode, depth
from protocol.core.aggregation.tree_servers import InputSize, servers

Key = tuple[int, int]  # (level, index) of an inner node


@dataclass(frozen=True)
class WrongPartial:
    """A server's signed claim of a node's hash that differs from the node's recomputed hash."""

    round: int
    node: Key
    position: int  # the node's place in the tree, bottom level first: the report's `segment`
    validator: str
    announced: bytes
    right: bytes
    claim_sig: bytes  # its node key's signature of the claim (partial_claim.py): the report's evidence


@dataclass
class RoundTree:
    """Round r's tree: its leaves (miners, address order), the two servers of each node, θ_r."""

    round: int
    fan_in: int
    leaves: list[str]
    servers: dict[Key, tuple[str, str]]  # (aggregator, checker), in tree order: children first
    depth: int
    state_blob: bytes  # θ_r, which every leaf is clipped by
    state_hash: bytes
    validators: int = 2  # how many the servers were drawn from
    started: float = 0.0  # trio time the tree started: a level-L node is awaited until L patiences after
    values: dict[Key, bytes] = field(default_factory=dict)  # resolved node -> its blob's hash (in the store)
    locks: dict[Key, trio.Lock] = field(default_factory=dict)
    recomputed: set[Key] = field(default_factory=set)  # nodes this validator does not serve but summed
    distrusted: set[Key] = field(default_factory=set)  # nodes it sums itself, whatever their servers agree on
    fetched: set[Key] = field(default_factory=set)  # nodes it took on its servers' agreement
    claimed: dict[Key, bytes] = field(default_factory=dict)  # agreed hashes of nodes it did not fetch
    announced: set[Key] = field(default_factory=set)  # nodes it served and claimed (its first claim binds)
    served: set[bytes] = field(default_factory=set)  # hashes of the blobs it served (a tampered one too)
    members: tuple[str, ...] = ()  # the validators the servers were drawn from (lowercase): the auditors
    dissents_heard: dict[str, int] = field(default_factory=dict)  # validator -> claims of nodes it does not serve
    claims_counted: int = 0  # of the round's claims, how many `dissents_heard` has counted

    @classmethod
    def draw(cls, r: int, fan_in: int, leaves: list[str], seed: bytes, validators: list[str], weights: list[int],
             state: tuple[bytes, bytes], size: InputSize) -> RoundTree:
        """The tree of `leaves` whose servers are drawn from `validators` (lowercase) by `weights`."""
        pairs = {key: (validators[a], validators[c])
                 for key, (a, c) in servers(seed, len(leaves), fan_in, weights, size).items()}
        return cls(r, fan_in, leaves, pairs, depth(len(leaves), fan_in), *state, len(validators), trio.current_time(),
                   members=tuple(validators))

    def node(self, key: Key) -> TreeNode:
        level, index = key
        below = len(self.leaves) if level == 1 else sum(1 for k in self.servers if k[0] == level - 1)
        return TreeNode(level, index, range(index * self.fan_in, min((index + 1) * self.fan_in, below)))

    def position(self, key: Key) -> int:
        return list(self.servers).index(key)

    def at(self, position: int) -> Key | None:
        keys = list(self.servers)
        return keys[position] if 0 <= position < len(keys) else None

    def ancestors(self, key: Key) -> list[Key]:
        """The nodes above `key`, up to the root: each sums what is below it."""
        level, index, out = key[0], key[1], []
        while level < self.depth:
            level, index = level + 1, index // self.fan_in
            out.append((level, index))
        return out

    def served_by(self, validator: str) -> list[Key]:
        """The nodes `validator` serves, bottom level first."""
        return [k for k, pair in self.servers.items() if validator in pair]


def name(key: Key) -> str:
    return f"{key[0]}.{key[1]}"  # level.index, for logs
