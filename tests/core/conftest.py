from __future__ import annotations

import pytest
from fixtures_training import apply_test_profile, corpus, task, theta0

from protocol.core.hardware.replay_profile import ReplayProfile
from protocol.core.model.gpt import Params
from protocol.core.proof.submission import Submission, honest
from protocol.core.train.data import Dataset


@pytest.fixture(scope="session")
def profile() -> ReplayProfile:
    return apply_test_profile()


@pytest.fixture(scope="session")
def ds() -> Dataset:
    return corpus()


@pytest.fixture(scope="session")
def theta() -> Params:
    return theta0()


@pytest.fixture(scope="session")
def honest_sub(profile: ReplayProfile, ds: Dataset, theta: Params) -> Submission:
    """One honest micro round (H=6, k=2) for miner 0."""
    return honest(task(0), ds, theta, None)
