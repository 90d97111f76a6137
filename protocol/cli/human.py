"""What a person reads: chain times as local date and time with the time left, token amounts
exact or rounded for tables."""

from __future__ import annotations

from datetime import datetime

from protocol.config.run_config import TOKEN_UNIT


def tokens(amount: int, grouped: bool = False) -> str:
    """Base units as an exact decimal token amount: up to 18 decimals, trailing zeros trimmed
    (integer arithmetic only, so 11488.3676 never prints as 11488.4). `grouped` adds
    thousands separators to the whole part, for tables."""
    sign = "-" if amount < 0 else ""
    whole, frac = divmod(abs(amount), TOKEN_UNIT)
    text = f"{whole:,}" if grouped else str(whole)
    if frac:
        text += "." + f"{frac:018d}".rstrip("0")
    return sign + text


DISPLAY_DECIMALS = 4  # tables round here (docs/OPERATORS.md §8): 999.999999999999999999 reads 1000


def rounded_tokens(amount: int, grouped: bool = False, decimals: int = DISPLAY_DECIMALS) -> str:
    """Base units rounded to `decimals` decimals, half away from zero, trailing zeros trimmed
    (integer arithmetic, as `tokens`): a payout split by integer division reads `1000`, not
    `999.999999999999999999`. A nonzero amount that would round to 0 reads `<0.0001`, never 0."""
    step = TOKEN_UNIT // 10**decimals
    units = (abs(amount) + step // 2) // step * step
    sign = "-" if amount < 0 else ""
    if units == 0 and amount:
        return f"{sign}<{step / TOKEN_UNIT:.{decimals}f}"
    return sign + tokens(units, grouped)


def duration(seconds: int) -> str:
    """`4 min 12 s`, `2 h 5 min`, `3 d 4 h`: the two largest units, for a time left or past."""
    seconds = abs(int(seconds))
    units = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))
    parts: list[str] = []
    for name, size in units:
        count, seconds = divmod(seconds, size)
        if count or parts:
            parts.append(f"{count} {name}")
        if len(parts) == 2:
            break
    parts = [p for p in parts if not p.startswith("0 ")] or ["0 s"]
    return " ".join(parts)


def local_time(ts: int) -> str:
    """A Unix time as local date and time with its zone, e.g. `2026-12-02 15:07:13 UTC`."""
    return datetime.fromtimestamp(int(ts)).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def when(ts: int, now: int) -> str:
    """A chain time relative to the chain's `now`: `2026-12-02 15:11:25 UTC (in 4 min 12 s)`,
    `(3 min ago)` once past, `(now)` at it."""
    delta = int(ts) - int(now)
    relative = "now" if delta == 0 else f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"
    return f"{local_time(ts)} ({relative})"
