"""The challenger-only withholding cheat serves a faked checkpoint to everyone but its first
asker, which it refuses every time (a validator that asks again once the miner is up is still
refused, so its unavailable report stands and the voters, who are served, decide it)."""

from __future__ import annotations

from protocol.devnet.cheats import RefuseFirstAsker

CHALLENGER, VOTER = b"\x0c" * 20, b"\x0f" * 20


class _Store:
    def get_checkpoint(self, round_: int, trace_root: bytes, index: int, part: str = "all",
                       asker: bytes = b"") -> tuple[bytes, bytes]:
        return b"ckpt%d" % index, b"proof"


def test_first_asker_of_a_hidden_leaf_is_always_refused_and_other_askers_served():
    src = RefuseFirstAsker(_Store(), lambda r: frozenset({3, 4}) if r == 1 else frozenset())
    root = b"\x01" * 32
    assert src.get_checkpoint(1, root, 3, asker=CHALLENGER) is None
    assert src.get_checkpoint(1, root, 3, asker=VOTER) == (b"ckpt3", b"proof")
    assert src.get_checkpoint(1, root, 3, asker=CHALLENGER) is None  # its re-ask too
    assert src.get_checkpoint(1, root, 5, asker=CHALLENGER) == (b"ckpt5", b"proof")  # not faked: always served
    assert src.get_checkpoint(2, root, 3, asker=CHALLENGER) == (b"ckpt3", b"proof")  # another round hides nothing
