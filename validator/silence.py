"""The hook through which a validator can be made to stay up but sit out settlement (devnet, tests).

A production validator runs with none and never imports one; the devnet's
`--silent-validators` hands the node an object of this shape
(protocol.devnet.silent_validator.SilentValidator). The node asks it before each duty below;
its checks and its score commitment always run (so the scoring phase still closes early), and
it keeps serving blobs and following rounds whatever it skips.
"""

from __future__ import annotations

from typing import Literal, Protocol

# report: file fraud reports on failed checks    reveal: reveal the committed scores
# audit: audit the other validators' witnesses    vote: vote on other validators' reports
# settle: the result phase (sign and gossip a BLS share, post, challenge, fall back)
Duty = Literal["report", "reveal", "audit", "vote", "settle"]


class ValidatorSilence(Protocol):
    @property
    def name(self) -> str:
        """What the logs and the devnet report call this behaviour."""
        ...

    def skips(self, duty: Duty) -> bool:
        """Whether the validator leaves `duty` undone; one that skips `settle` waits, without
        signing, until each round it played ended (final or fallback)."""
        ...
