"""Shared fixtures: ONE session-wide set of honest micro runs serves every adversary test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_fixtures():  # type: ignore[no-untyped-def]
    """Import tests/core/fixtures_training.py once, under one name, whatever the rootdir."""
    if "fixtures_training" not in sys.modules:
        path = Path(__file__).parents[1] / "core" / "fixtures_training.py"
        spec = importlib.util.spec_from_file_location("fixtures_training", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["fixtures_training"] = module
        spec.loader.exec_module(module)
    return sys.modules["fixtures_training"]


ft = _load_fixtures()
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
    from protocol.core.submission import honest

    return [honest(ft.task(i), ds, theta, None) for i in range(N_HONEST)]
