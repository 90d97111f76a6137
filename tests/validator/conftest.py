"""Shared fixtures: ONE session-wide set of honest micro runs serves every adversary test."""

from __future__ import annotations

import fixtures_training as ft  # loaded by tests/conftest.py
import pytest

N_HONEST = 20  # issue 3: honest miners on >= 20 seeds are never flagged


@pytest.fixture(scope="session")
def profile():  # type: ignore[no-untyped-def]
    return ft.apply_test_profile()


@pytest.fixture(scope="session")
def ds():  # type: ignore[no-untyped-def]
    return ft.corpus()


@pytest.fixture(scope="session")
def theta():  # type: ignore[no-untyped-def]
    return ft.theta0()


@pytest.fixture(scope="session")
def honest_runs(profile, ds, theta):  # type: ignore[no-untyped-def]
    """Round-1 honest submissions of miners 0..19 (each its own seed, pages and batches)."""
    from protocol.core.proof.submission import honest

    return [honest(ft.task(i), ds, theta, None) for i in range(N_HONEST)]
