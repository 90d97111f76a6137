"""The parts of a pending result its signers showed on demand, read from the answers' events.

A validator that disputes a posted root has never seen the posted tree or lists; what it knows
of them is what the demand answers carried (docs/PROTOCOL.md §11.9, Demands): column leaves with
their paths, the root's preimage, the validator entries, the claims chunk summaries and claims
chunks of one attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.chain.events import EventLog

ENTRY_FIELDS = ("index", "account", "credit", "cumulative", "prev", "prev_index")
EVENTS = ("Demanded", "LeafAnswered", "RootAnswered", "ValidatorsAnswered", "ClaimsAnswered", "ClaimsChunkAnswered")


@dataclass(frozen=True)
class PostedLeaf:
    """A `LeafAnswered` event: column `position` of the posted tree, its sums and its path."""

    position: int
    fields: tuple[int, ...]  # (index, miner, reputation, cumulative, prev, prev_index)
    sums: tuple[int, ...]
    siblings: tuple[bytes, ...]
    sums_hashes: tuple[bytes, ...]

    @classmethod
    def of_event(cls, row: Mapping) -> PostedLeaf:
        return cls(int(row["position"]), tuple(int(x) for x in row["fields"]), tuple(int(x) for x in row["sums"]),
                   tuple(bytes(s) for s in row["siblings"]), tuple(bytes(h) for h in row["sums_hashes"]))

    def args(self) -> tuple:
        """(leaf, sums, path) as the challenges of a column leaf take them."""
        return (self.fields, list(self.sums), (list(self.siblings), list(self.sums_hashes)))

    @property
    def prev(self) -> int:
        return self.fields[4]


@dataclass(frozen=True)
class PostedParts:
    """What the answers of one attempt showed so far (None: not answered yet)."""

    leaves: dict[int, PostedLeaf]
    root: tuple[bytes, list[int]] | None  # the tree root's (body, sums)
    entries: list[tuple[int, ...]] | None  # the validator entries' fields, as `entries_arg` builds them
    summaries: list[bytes] | None  # the claims chunks' (list hash, root), flat
    chunks: dict[int, list[bytes]]  # claims chunk c's claims
    answerers: dict[str, str]  # who answered: "leaf <i>", "root", "entries", "claims", "chunk <c>" -> address

    @classmethod
    def of_logs(cls, logs: Mapping[str, EventLog], r: int, attempt: int) -> PostedParts:
        def of(name: str) -> list:
            return [row for row in logs[name].rows() if (int(row["round"]), int(row["attempt"])) == (r, attempt)]

        leaves, roots, entries, claims = of("LeafAnswered"), of("RootAnswered"), of("ValidatorsAnswered"), of("ClaimsAnswered")
        chunks = of("ClaimsChunkAnswered")
        answerers = {f"leaf {a['position']}": str(a["answerer"]) for a in leaves}
        answerers |= {f"chunk {a['chunk']}": str(a["answerer"]) for a in chunks}
        answerers |= {name: str(rows[0]["answerer"]) for name, rows in
                      (("root", roots), ("entries", entries), ("claims", claims)) if rows}
        return cls({int(a["position"]): PostedLeaf.of_event(a) for a in leaves},
                   (bytes(roots[0]["body"]), [int(x) for x in roots[0]["sums"]]) if roots else None,
                   [entry_fields(e) for e in entries[0]["entries"]] if entries else None,
                   [bytes(c) for c in claims[0]["summaries"]] if claims else None,
                   {int(a["chunk"]): [bytes(c) for c in a["claims"]] for a in chunks}, answerers)

    def answerer_of(self, position: int, n: int) -> str | None:
        """Who answered the demand of `position` (None: nobody yet)."""
        name = {n: "root", n + 1: "entries", n + 2: "claims"}.get(position, f"leaf {position}")
        if position > n + 2:
            name = f"chunk {position - n - 3}"
        return self.answerers.get(name)

    def answered(self, n: int) -> set[int]:
        """The positions answered: columns, n (root), n + 1 (entries), n + 2 (claims summaries),
        n + 3 + c (claims chunk c)."""
        lists = {n + 1} if self.entries is not None else set()
        lists |= {n + 2} if self.summaries is not None else set()
        lists |= {n + 3 + c for c in self.chunks}
        return set(self.leaves) | ({n} if self.root is not None else set()) | lists


def entry_fields(entry: Mapping | tuple) -> tuple[int, ...]:
    """An entry of a `ValidatorsAnswered` event as its six fields, decoded as a dict or a tuple."""
    values = [entry[k] for k in ENTRY_FIELDS] if isinstance(entry, Mapping) else list(entry)
    return tuple(int(x) for x in values)
