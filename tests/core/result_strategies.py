"""Hypothesis strategies for a round's settlement inputs, shared by the result tests."""

from __future__ import annotations

from hypothesis import strategies as st

from protocol.core.crypto.keccak import checksum_address, keccak256
from protocol.core.settlement.result_inputs import PrevEntry, Reveal, RoundInputs

ACCOUNTS = [checksum_address(keccak256(b"account %d" % k)[:20]) for k in range(80)]

# Few distinct values make ties, equal supports and zero columns common.
scores_st = st.one_of(st.sampled_from([0, 1, 2, 500, 65534, 65535]), st.integers(0, 65535))
weights_st = st.one_of(st.integers(0, 3), st.integers(0, 10**24))
losses_st = st.one_of(st.integers(0, 3), st.integers(0, 10**7))


@st.composite
def round_inputs(draw: st.DrawFn, max_miners: int = 6, max_validators: int = 5) -> RoundInputs:
    n = draw(st.integers(0, max_miners))
    v = draw(st.integers(0, max_validators))
    accounts = draw(st.permutations(ACCOUNTS))
    miners, validators = tuple(accounts[:n]), tuple(accounts[n:n + v])
    weights = tuple(draw(st.lists(weights_st, min_size=v, max_size=v)))
    revealed = [x for x in validators if draw(st.integers(0, 3)) > 0]  # most reveal: quorum is common
    reveals = {x: Reveal(tuple(draw(st.lists(scores_st, min_size=n, max_size=n))), draw(losses_st),
                         draw(st.binary(min_size=32, max_size=32))) for x in revealed}
    forfeited = frozenset(x for x in miners + validators if draw(st.integers(0, 7)) == 0)
    rnd = draw(st.integers(0, 50))
    prev = {x: PrevEntry(draw(st.integers(0, rnd - 1)), draw(st.integers(0, 1023)), draw(st.integers(0, 65535)),
                         draw(weights_st))
            for x in miners + validators if rnd > 0 and draw(st.booleans())}
    emission = draw(st.integers(0, 1000) if draw(st.integers(0, 3)) == 0 else st.integers(10**18, 10**24))
    share = draw(st.one_of(st.sampled_from([0, 5000, 10000]), st.integers(0, 10000)))
    classes: tuple[tuple[int, ...], tuple[int, ...], int] = ((), (), 0)
    if draw(st.booleans()):  # hardware classes: masks over 3 classes (0 = never set: class 0)
        classes = (tuple(draw(st.lists(st.sampled_from([0, 1, 2, 4]), min_size=n, max_size=n))),
                   tuple(draw(st.lists(st.integers(0, 7), min_size=v, max_size=v))),
                   draw(st.one_of(st.just(0), weights_st)))
    return RoundInputs(rnd, miners, validators, weights, reveals, forfeited, prev, emission, share, *classes)
