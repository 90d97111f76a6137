"""`python -m benchmarks bls --quick`: every case answers as the reference does, and the JSON's shape."""

from __future__ import annotations

import json

from benchmarks import bls


def test_every_case_matches_the_reference_and_is_reported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "bls.json"
    assert bls.main(["--quick", "--json", str(out)]) == 0  # raises if an answer differs from py-evm's or py_ecc's
    figures = json.loads(out.read_text())["figures"]
    assert set(figures) == set(bls.cases())
    for f in figures.values():
        assert set(f) == {"reference_s", "veritrain_s", "ratio"} and f["reference_s"] > 0 and f["veritrain_s"] > 0
