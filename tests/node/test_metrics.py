"""Node metrics, scraped over HTTP as Prometheus would, from real libp2p hosts moving a real blob."""

from __future__ import annotations

import dataclasses
import logging
import os
import urllib.request
from contextlib import AsyncExitStack

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from protocol.chain.client import Phase
from protocol.node.chain_port import ChainPort
from protocol.node.metrics import NodeMetrics
from protocol.node.metrics_server import MetricsPortUnavailable, MetricsServer, check_metrics_port
from protocol.p2p import (
    DirectoryBlobSource,
    MemoryCheckpointSource,
    P2PNode,
    RatePolicy,
    RegistryView,
)
from protocol.p2p.errors import RateLimited
from protocol.p2p.framing import BLOB_PROTOCOL_ID
from tests.conftest import run_cli
from tests.p2p.conftest import (
    CHAIN_ID,
    CONTRACT,
    RoundClock,
    announcement,
    entry_for,
    identity,
    p2p_config,
    wait_for_mesh,
)

BLOB = 3 * 1024 * 1024 + 17  # several chunks
# a request budget of 0.1/s (this stake and reputation double the base): one blob request,
# then refusals for ten seconds
ONE_REQUEST = RatePolicy(base_requests_per_s=0.05, burst_seconds=1.0)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample at http://127.0.0.1:port/metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def _scrape(port: int) -> dict:
    return await trio.to_thread.run_sync(scrape, port)


@pytest.mark.trio
async def test_a_scrape_shows_the_blob_bytes_gossip_bytes_and_drops_of_real_hosts(tmp_path):
    metrics = [NodeMetrics(), NodeMetrics()]
    regs = [RegistryView(CHAIN_ID, CONTRACT) for _ in range(2)]
    stores = [DirectoryBlobSource(tmp_path / f"store{i}") for i in range(2)]
    clock = RoundClock()
    cfg = dataclasses.replace(p2p_config(), rate_policy=ONE_REQUEST)
    nodes = [P2PNode(identity(i), cfg, regs[i], stores[i], MemoryCheckpointSource(), current_round=clock,
                     traffic=metrics[i]) for i in range(2)]
    with trio.fail_after(30), MetricsServer(metrics[0], "127.0.0.1", 0) as served0, \
            MetricsServer(metrics[1], "127.0.0.1", 0) as served1:
        async with AsyncExitStack() as stack:
            for node in nodes:
                await stack.enter_async_context(node.run())
            for reg in regs:
                for i in range(2):
                    reg.upsert(entry_for(i, nodes[i].listen_addr))
            server, client = nodes
            await client.connect(server.p2p_addr)
            before = [await _scrape(served0.port), await _scrape(served1.port)]

            h = stores[0].put(os.urandom(BLOB))
            await client.fetch_blob(server.identity.public_key, h, store=stores[1])
            with pytest.raises(RateLimited):  # the second request within the budget's refill
                await client.fetch_blob(server.identity.public_key, h)

            await wait_for_mesh(server, [client])
            body = announcement(0)
            await server.publish(clock.value, body)
            assert (await client.receive()).payload.body == body

            for m in metrics:
                m.set_peers(len(server.connected_peers()))
            metrics[1].set_round(7)
            metrics[1].set_phase(Phase.REVEAL)
            after = [await _scrape(served0.port), await _scrape(served1.port)]

    blob = {"protocol": BLOB_PROTOCOL_ID}
    served = sample(after[0], "veritrain_p2p_sent_bytes_total", **blob) - \
        sample(before[0], "veritrain_p2p_sent_bytes_total", **blob)
    fetched = sample(after[1], "veritrain_p2p_received_bytes_total", **blob) - \
        sample(before[1], "veritrain_p2p_received_bytes_total", **blob)
    assert served >= BLOB and fetched >= BLOB
    assert served < 2 * BLOB  # the refused request moved no blob bytes
    assert sample(after[1], "veritrain_p2p_sent_bytes_total", **blob) > 0  # the requests themselves
    # the announcement went out over the meshsub protocol the hosts negotiated
    gossip_out = {k: v for k, v in after[0].items() if k[0] == "veritrain_p2p_sent_bytes_total"
                  and dict(k[1])["protocol"].startswith("/meshsub/")}
    gossip_in = {k: v for k, v in after[1].items() if k[0] == "veritrain_p2p_received_bytes_total"
                 and dict(k[1])["protocol"].startswith("/meshsub/")}
    assert sum(gossip_out.values()) > len(body.model_dump_json()) and sum(gossip_in.values()) > 0
    assert sample(after[0], "veritrain_p2p_rate_limited_total", limit="request") == 1
    assert sample(after[1], "veritrain_p2p_rate_limited_total", limit="request") == 0
    assert sample(after[0], "veritrain_p2p_connected_peers") == 1
    assert sample(after[1], "veritrain_round") == 7
    assert sample(after[1], "veritrain_phase", veritrain_phase="reveal") == 1
    assert sample(after[1], "veritrain_phase", veritrain_phase="commit") == 0
    assert not metrics[0].exported and not metrics[1].exported  # both servers stopped


def test_work_chain_and_check_metrics_are_exposed_per_node():
    one, other = NodeMetrics(), NodeMetrics()  # one process, two registries: nothing collides
    one.observe_training(42.0)
    one.observe_replay(1.5)
    one.check_done(passed=True)
    one.check_done(passed=False)
    one.check_done(passed=False)
    one.report_filed("replay")
    with MetricsServer(one, "127.0.0.1", 0) as a, MetricsServer(other, "127.0.0.1", 0) as b:
        got, untouched = scrape(a.port), scrape(b.port)
    assert sample(got, "veritrain_training_seconds_count") == 1 and sample(got, "veritrain_training_seconds_sum") == 42
    assert sample(got, "veritrain_training_seconds_bucket", le="60.0") == 1
    assert sample(got, "veritrain_training_seconds_bucket", le="30.0") == 0
    assert sample(got, "veritrain_replay_seconds_sum") == 1.5
    assert sample(got, "veritrain_checks_total", result="passed") == 1
    assert sample(got, "veritrain_checks_total", result="failed") == 2
    assert sample(got, "veritrain_reports_filed_total", kind="replay") == 1
    assert sample(untouched, "veritrain_checks_total", result="failed") == 0
    assert sample(untouched, "veritrain_training_seconds_count") == 0
    assert not one.exported  # the server stopped with the block


class _FlakyRpc:
    """A chain call whose endpoint is away once (connection refused), then answers."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionRefusedError("connection refused")
        return 12


@pytest.mark.trio
async def test_a_retried_chain_call_is_counted():
    metrics = NodeMetrics()
    port = ChainPort(None, logging.getLogger("veritrain.test-metrics"),  # type: ignore[arg-type]
                     on_retry=metrics.chain_retry)
    assert await port(_FlakyRpc()) == 12
    assert metrics.registry.get_sample_value("veritrain_chain_retries_total", {"reason": "unreachable"}) == 1
    assert metrics.registry.get_sample_value("veritrain_chain_retries_total", {"reason": "error"}) is None


def test_a_port_in_use_is_a_config_error():
    with MetricsServer(NodeMetrics(), "127.0.0.1", 0) as taken:
        with pytest.raises(MetricsPortUnavailable, match="cannot serve metrics on 127.0.0.1"):
            check_metrics_port("127.0.0.1", taken.port)
        with pytest.raises(MetricsPortUnavailable):
            MetricsServer(NodeMetrics(), "127.0.0.1", taken.port)


def test_miner_and_validator_help_list_the_metrics_and_log_options():
    for role in ("miner", "validator"):
        result = run_cli(role, "--help", timeout=60)
        assert result.code == 0, result.stderr
        for option in ("--metrics-port", "--metrics-host", "--log-format"):
            assert option in result.stdout, (role, option, result.stdout)
