"""Who is at fault for one boundary slot between two pipeline stages (issue 32, DESIGN.md §8.4),
torch-free.

Every tensor between stages has one slot (`boundary.Slot`), one sender (`slot.stage`) and one
receiver (`stage_slots.receiver_stage`). The sender signs the tensor's hash with its node key; the
receiver commits a hash as received (inside its segment's boundary root, in its trace) and keeps
the sender's signature of it. The rules, in the order they are applied:

1. **The sender's claim is the reference.** Its signed hash must verify under its node key;
   a claim that does not is evidence against nobody: `InvalidClaim` is raised.
2. **Equivocation: the sender alone.** If the receiver presents a second signature by the
   sender for the same slot, of a different hash, that verifies, the sender signed two
   tensors where one was due (`boundary.check_equivocation`): SENDER_EQUIVOCATED.
3. **Misreport: the receiver alone.** If the receiver committed a hash the sender is not shown
   to have signed for the slot (neither the sender's claim nor a valid signature the receiver
   presents), the receiver lied about what it received: RECEIVER_MISREPORTED. A signature it
   presents that does not verify does not help it. (With rule 2, both can hold at once.)
4. **Otherwise consistent.** What was signed as sent is what was committed as received. A wrong
   tensor both agree on (two colluding adjacent stages) is not found here: the sender's replay
   (`stage_replay`) finds it, since the sender did not compute what it signed.
5. **Withholding: the receiver alone.** The receiver must serve every tensor it received in a
   challenged segment; its sender may serve it instead. If neither serves a tensor whose hash
   is the committed one, the receiver WITHHELD it (it was bound to keep what it trained on).

An honest stage is never at fault: it signs one hash per slot it sends, commits the hash it was
sent and signed for each slot it receives, and keeps those tensors until the round settles.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.core.errors import SignatureError, VeritrainError
from protocol.core.pipeline.boundary import (
    NotEquivocation,
    Signed,
    Slot,
    check_equivocation,
    verify_boundary,
)
from protocol.core.pipeline.stage_slots import receiver_stage


class InvalidClaim(VeritrainError):
    """Raised when the sender's signed hash presented for a slot is not the sender's signature of
    it for that slot: it proves nothing about anyone (rule 1)."""


class Fault(enum.StrEnum):
    SENDER_EQUIVOCATED = "sender-equivocated"  # rule 2
    RECEIVER_MISREPORTED = "receiver-misreported"  # rule 3
    WITHHELD = "withheld"  # rule 5: the receiver


@dataclass(frozen=True)
class Attribution:
    slot: Slot
    faults: frozenset[Fault]  # empty: consistent

    @property
    def consistent(self) -> bool:
        return not self.faults

    @property
    def at_fault(self) -> tuple[int, ...]:
        """The stages at fault, in order: the ones to slash for this slot."""
        stages = {self.slot.stage if f is Fault.SENDER_EQUIVOCATED else receiver_stage(self.slot) for f in self.faults}
        return tuple(sorted(stages))


@dataclass(frozen=True)
class Domain:
    """Where boundary signatures are valid: the run's chain and staking contract."""

    chain_id: int
    contract: bytes  # 20 bytes


def attribute_slot(domain: Domain, sender_key: bytes, slot: Slot, sent: Signed, committed: bytes,
                   held: Signed | None = None) -> Attribution:
    """Rules 1 to 4 for `slot`: `sent` is the sender's signed hash, `committed` the hash the
    receiver committed as received, `held` the sender's signature the receiver presents (if any)."""
    try:
        verify_boundary(sender_key, sent.signature, domain.chain_id, domain.contract, slot, sent.tensor_hash)
    except SignatureError as exc:
        raise InvalidClaim(f"the sender's claim for {slot} does not verify: {exc}") from exc
    signed = {sent.tensor_hash}
    faults: set[Fault] = set()
    if held is not None and _equivocated(domain, sender_key, slot, sent, held):
        faults.add(Fault.SENDER_EQUIVOCATED)
        signed.add(held.tensor_hash)
    if committed not in signed:
        faults.add(Fault.RECEIVER_MISREPORTED)
    return Attribution(slot, frozenset(faults))


def _equivocated(domain: Domain, sender_key: bytes, slot: Slot, a: Signed, b: Signed) -> bool:
    try:
        check_equivocation(sender_key, domain.chain_id, domain.contract, slot, a, b)
    except NotEquivocation:
        return False  # the same hash, or not the sender's signature for this slot: no second claim
    return True


def attribute_serving(slot: Slot, committed: bytes, served: Sequence[bytes | None]) -> Attribution:
    """Rule 5 for `slot`: `served` holds the hash of what each source served for it (the receiver
    first, then the sender; None where nothing came)."""
    faults = frozenset() if committed in served else frozenset({Fault.WITHHELD})
    return Attribution(slot, faults)
