"""py-libp2p's closed-nursery error during host shutdown is dropped; anything else is kept."""

from __future__ import annotations

from protocol.p2p.node import without_shutdown_races

RACE = "Nursery is closed to new arrivals"


def test_a_lone_race_is_dropped() -> None:
    assert without_shutdown_races(RuntimeError(RACE)) is None
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [RuntimeError(RACE)]), RuntimeError(RACE)])
    assert without_shutdown_races(nested) is None


def test_other_errors_survive() -> None:
    other = RuntimeError("something else")
    assert without_shutdown_races(other) is other
    mixed = ExceptionGroup("outer", [RuntimeError(RACE), ValueError("real")])
    rest = without_shutdown_races(mixed)
    assert isinstance(rest, ExceptionGroup)
    assert [type(e) for e in rest.exceptions] == [ValueError]
