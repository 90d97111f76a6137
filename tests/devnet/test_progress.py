"""The devnet's progress lines on the embedded chain: each round's phase and who has acted in
it, read from the chain as the network moves; and the duration said up front."""

from __future__ import annotations

import hashlib

from protocol.chain.backend import connect, dev_account
from protocol.chain.client import ChainClient, Role
from protocol.chain.deploy import deploy
from protocol.chain.scripted import join_network
from protocol.config.run_config import RunConfig
from protocol.devnet.progress import ROUND_S, START_S, expected_line, phase_line


def test_the_line_counts_who_has_acted_in_each_phase() -> None:
    handle = connect(None)
    admin = ChainClient(handle, deploy(handle, dev_account(handle), RunConfig()), dev_account(handle))
    net = join_network(admin, 2, 1, lambda _line: None)
    accounts = {Role.MINER: [m.address for m in net.miners], Role.VALIDATOR: [v.address for v in net.validators]}
    admin.start()
    assert phase_line(admin, accounts, 0, 3) == "round 1/3 · commit · committed 0/2 miners"
    digest = hashlib.sha256(b"update").digest()
    net.miners[0].client.commit_update(0, digest, hashlib.sha256(digest).digest(), 30)
    assert phase_line(admin, accounts, 0, 3) == "round 1/3 · commit · committed 1/2 miners"
    net.miners[1].client.commit_update(0, digest, hashlib.sha256(digest).digest(), 30)
    # every miner committed: the commit phase closes early and the validators' turn begins
    assert phase_line(admin, accounts, 0, 3) == "round 1/3 · scoring · scored 0/1 validators"


def test_the_expected_duration_is_the_measured_one_and_the_bound_every_deadline() -> None:
    config = RunConfig()
    line = expected_line(config, "micro", 2)
    assert line.startswith(f"2 rounds of the micro model: about {START_S + 2 * ROUND_S['micro']} s on 2 idle cores")
    assert line.endswith(f"at most {(START_S + 2 * config.chain.round_span()) / 60:.0f} min (every phase to its "
                         "deadline)")
    assert expected_line(config, "gpt2", 1) == (f"1 round of the gpt2 model: at most "
                                                f"{(START_S + config.chain.round_span()) / 60:.0f} min (every phase "
                                                "to its deadline)")
