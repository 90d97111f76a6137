"""The kinds of fraud report: one definition for the verdict, the wire and the chain.

The integer values are the codes the Disputes contract stores (`report_fraud`'s `kind`);
the lowercase names are what logs, the report JSON and the `fraud_reported` gossip carry.
"""

from __future__ import annotations

from enum import IntEnum


class FraudKind(IntEnum):
    REPLAY = 1  # a replayed segment differs (segment index + both hashes)
    DERIVATION = 2  # leaf 0 or the update/carry does not follow
    UNAVAILABLE = 3  # a committed trace or checkpoint was not served
    LAZY_VALIDATOR = 4  # a validator's revealed replay witness (or its checkpoints) fails an audit
    WRONG_SCORE = 5  # a validator's revealed score of a miner (or its held-out loss) is not what it recomputes to
    AGGREGATE = 6  # a validator signed a wrong partial sum for a node of the aggregation tree it serves

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: object) -> FraudKind:
        """The kind a lowercase name stands for; ValueError for anything else."""
        if isinstance(label, cls):
            return label
        if not isinstance(label, str) or label != label.lower() or label.upper() not in cls.__members__:
            raise ValueError(f"unknown fraud kind {label!r}; expected one of {[k.label for k in cls]}")
        return cls[label.upper()]

    def __str__(self) -> str:  # log lines and JSON say "replay", not "1"
        return self.label

    def __format__(self, spec: str) -> str:
        return format(self.label, spec)
