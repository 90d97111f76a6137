"""`python -m benchmarks network-scale --quick`: its figures come from the real committee draw,
and a validator's checks stay flat with committees where today's grow with the network."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.network_scale import main
from protocol.core.settlement.result_inputs import MAX_VALIDATORS


def test_checks_per_validator_stay_flat_with_committees(tmp_path: Path) -> None:
    out = tmp_path / "ns.json"
    assert main(["--quick", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())["figures"]
    checks = figures["checks_per_validator"]
    assert [checks[n]["today"] for n in ("16", "100", "1024")] == [16, 100, 1024]  # every miner, today
    assert checks["1024"]["committee_median"] <= 1.5 * checks["100"]["committee_median"]  # flat in n
    assert checks["1024"]["committee_median"] <= 2 * 3 * 1024 / 64  # at most 2c * n / v seats each
    tiny = {n: figures["bytes_per_node"][n]["validator"]["tiny"] for n in ("100", "1024")}
    assert tiny["1024"]["today"] > 9 * tiny["100"]["today"]  # today: linear in the miners
    assert tiny["1024"]["committee"] <= 1.5 * tiny["100"]["committee"]
    # the aggregation tree (fan-in 4): its root is the flat sum and the reference's at every size,
    # a typical validator's and the largest node's bytes stay flat while the flat shape's grow
    assert figures["tree_equals_flat"] == {"16": True, "100": True, "1024": True}
    assert figures["tree_depth"] == {"16": 2, "100": 4, "1024": 5}
    roles = {n: figures["bytes_per_node"][n] for n in ("100", "1024")}
    for name in ("tiny", "llama-small"):
        tree = {n: roles[n]["validator_tree"][name] for n in roles}
        assert tree["1024"]["median"] <= 1.5 * tree["100"]["median"] and tree["1024"]["flat"] > 7 * tree["100"]["flat"]
        assert roles["1024"]["aggregator"][name] <= 1.5 * roles["100"]["aggregator"][name]
        assert roles["1024"]["miner"][name] == roles["100"]["miner"][name]


def test_round_gas_is_measured_within_the_contracts_bounds_and_null_beyond(tmp_path: Path) -> None:
    """Gas comes from a scripted round on the embedded chain; a size the contracts cannot hold is
    reported as such, never estimated."""
    from benchmarks.network_scale import round_gas

    beyond = f"4096x{2 * MAX_VALIDATORS}"
    gas = round_gas(["4x2", beyond])
    assert gas["round_gas_per_miner"][beyond] is None and gas["max_function_gas"][beyond] is None
    per_miner, most = gas["round_gas_per_miner"]["4x2"], gas["max_function_gas"]["4x2"]
    assert per_miner is not None and most is not None
    assert per_miner > 0 and 100_000 < most < 15_000_000  # its largest call: a column challenge
