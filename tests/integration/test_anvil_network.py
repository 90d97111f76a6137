"""Miners and validators as separate OS processes, started through the CLI, on anvil: a lazy
miner among honest ones is reported, slashed and unpaid. (Three rounds of honest miners on the
same kind of network are asserted on tests/integration/test_faults.py's run, where miners 0 and
1 stay honest through every round.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.netutil import (
    PASSWORD,
    deploy_with_keys,
    micro_run_toml,
    reader,
    start_node,
    stop_all,
    wait_for,
)
from tests.integration.netutil import inspect as inspect_at

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
RUN_TOML = micro_run_toml("anvil-network", commit_duration=120)


def run_network(anvil, tmp: Path, rounds: int, cheats: list[str | None]) -> tuple[Path, list[str], list[str]]:
    n_miners, n_validators = len(cheats), 2
    dep, key_dirs, addresses = deploy_with_keys(anvil.url, tmp, n_miners + n_validators, RUN_TOML)
    procs, logs = [], []
    try:
        for i, cheat in enumerate(cheats):
            logs.append(tmp / f"miner{i}.log")
            extra = ["--stake", "150"] + (["--cheat", cheat] if cheat else [])
            procs.append(start_node("miner", anvil.url, dep, key_dirs[i], tmp / f"m{i}", rounds, extra, logs[-1]))
        for j in range(n_validators):
            logs.append(tmp / f"validator{j}.log")
            procs.append(start_node("validator", anvil.url, dep, key_dirs[n_miners + j], tmp / f"v{j}", rounds,
                                    ["--stake", "300"], logs[-1]))
        chain = reader(anvil.url, dep)
        staked = lambda: (chain.call("staking", "eligible_miner_count") == n_miners  # noqa: E731
                          and chain.call("staking", "validator_count") == n_validators)
        wait_for(staked, 240, "every node to register and stake", procs, logs)
        started = run_cli("start", "--rpc", anvil.url, "--deployment", str(dep), "--keys", str(key_dirs[0]),
                          env={"VERITRAIN_PASSWORD": PASSWORD})
        assert started.code == 0, started.stderr
        wait_for(lambda: chain.current_round() >= rounds, 240 * rounds, f"{rounds} rounds", procs, logs)
        wait_for(lambda: all(p.poll() is not None for p in procs), 180, "nodes to finish", procs, logs)
    finally:
        stop_all(procs)
    return dep, addresses[:n_miners], addresses[n_miners:]


def inspect(anvil, dep: Path, *view: str) -> dict:
    return inspect_at(anvil.url, dep, *view)


def test_lazy_miner_is_slashed_and_unpaid(anvil, tmp_path):
    dep, miners, _ = run_network(anvil, tmp_path, 2, [None, None, "lazy"])
    lazy = inspect(anvil, dep, "node", miners[2])
    assert lazy["slashed"] > 0
    assert lazy["claimable"] + lazy["claimed"] == 0
    assert all(r["consensus"] == 0 and r["reward"] == 0 for r in lazy["rounds"])
    disputes = inspect(anvil, dep, "disputes")
    assert any(d["miner"] == miners[2] and d["status"] == "confirmed" for d in disputes)
    assert not any(d["miner"] in miners[:2] and d["status"] == "confirmed" for d in disputes)
    for m in miners[:2]:
        honest = inspect(anvil, dep, "node", m)
        assert honest["slashed"] == 0 and honest["claimable"] > 0
