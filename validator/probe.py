"""Demanding one part of every posted result a validator agrees with: an availability probe.

Demands (docs/PROTOCOL.md §11.9) are otherwise made only against a root that is wrong. A
validator given a probe (the devnet's `--probe-demands`: its first honest validator) also demands
one part of each attempt it agrees with, cycling round by round through the columns, the root
preimage, the entries and the claims, and leaves the answer to the others: every run then shows the demand
and answer loop at its phase lengths. Each probe costs the prober the bond, which the answerer
takes. Not for production: an honest root needs no probe.
"""

from __future__ import annotations


def probe_position(round_: int, n: int) -> int:
    """The part probed in round `round_` of a result with n columns: a column, n (the root
    preimage, only for a nonempty tree), n + 1 (the entries), n + 2 (the claims chunk summaries)
    or n + 3 (the first claims chunk)."""
    parts = [*range(n), *([n] if n else []), n + 1, n + 2, n + 3]
    return parts[round_ % len(parts)]
