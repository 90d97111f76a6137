"""What a person reads: token amounts exact or rounded for tables, chain times with the time left."""

from __future__ import annotations

from datetime import datetime

from protocol.cli.human import duration, rounded_tokens, tokens, when


def test_token_amounts_are_exact_never_rounded() -> None:
    assert tokens(11_488_367_600_000_000_000_000) == "11488.3676"
    assert tokens(1) == "0.000000000000000001"
    assert tokens(150 * 10**18) == "150"
    assert tokens(1_234_567 * 10**18 + 5 * 10**17, grouped=True) == "1,234,567.5"
    assert tokens(-10**18 // 2) == "-0.5"


def test_table_amounts_round_to_four_decimals_never_to_zero() -> None:
    assert rounded_tokens(1000 * 10**18 - 1) == "1000"  # 999.999999999999999999
    assert rounded_tokens(1000 * 10**18 - 1, grouped=True) == "1,000"
    assert rounded_tokens(11_488_367_600_000_000_000_000) == "11488.3676"  # 4 decimals stay as they are
    assert rounded_tokens(11_488_367_650_000_000_000_000) == "11488.3677"  # half away from zero
    assert rounded_tokens(11_488_367_649_999_999_999_999) == "11488.3676"
    assert rounded_tokens(50_000_000_000_000) == "0.0001"
    assert rounded_tokens(49_999_999_999_999) == rounded_tokens(1) == "<0.0001"  # nonzero never reads 0
    assert rounded_tokens(0) == "0"
    assert rounded_tokens(-(10**18) // 2 - 1) == "-0.5"


def test_durations_keep_the_two_largest_units() -> None:
    assert duration(252) == "4 min 12 s"
    assert duration(7_500) == "2 h 5 min"
    assert duration(3_600) == "1 h"
    assert duration(0) == "0 s"


def test_when_gives_the_local_time_and_how_far_it_is() -> None:
    ts = 1_796_113_857
    local = datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert when(ts, ts - 252) == f"{local} {datetime.fromtimestamp(ts).astimezone().strftime('%Z')} (in 4 min 12 s)"
    assert when(ts, ts + 90).endswith("(1 min 30 s ago)")
    assert when(ts, ts).endswith("(now)")
