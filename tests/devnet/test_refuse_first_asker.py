"""The challenger-only withholding cheat serves a faked checkpoint to everyone but its first asker."""

from __future__ import annotations

from protocol.devnet.cheats import RefuseFirstAsker


class _Store:
    def get_checkpoint(self, round_: int, trace_root: bytes, index: int, part: str = "all") -> tuple[bytes, bytes]:
        return b"ckpt%d" % index, b"proof"


def test_first_asker_of_a_hidden_leaf_is_refused_and_later_askers_served():
    src = RefuseFirstAsker(_Store(), lambda r: frozenset({3, 4}) if r == 1 else frozenset())
    root = b"\x01" * 32
    assert src.get_checkpoint(1, root, 3) is None  # the challenger
    assert src.get_checkpoint(1, root, 3) == (b"ckpt3", b"proof")  # a voter
    assert src.get_checkpoint(1, root, 5) == (b"ckpt5", b"proof")  # not faked: always served
    assert src.get_checkpoint(2, root, 3) == (b"ckpt3", b"proof")  # another round hides nothing
