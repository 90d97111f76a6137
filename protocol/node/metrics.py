"""A node's Prometheus metrics: one `NodeMetrics` per node, each in its own registry, so the
devnet and tests can run several nodes in one process without their numbers mixing.

A node always has one; only a node started with `--metrics-port` serves it (metrics_server.py),
so call sites never ask whether metrics are on. It is also the p2p layer's `Traffic` observer
(protocol/p2p/traffic.py), and `chain_retry` is the chain port's retry hook.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram

from protocol.chain.client import Phase

# a round's training takes seconds (tiny devnet models) to an hour (large ones)
TRAINING_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
# one miner's challenged segments replayed: sub-second to minutes
REPLAY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
PHASES = [p.name.lower() for p in Phase]


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.exported = False  # set while an HTTP server serves this registry
        reg = self.registry
        self.round = Gauge("veritrain_round", "The round this node is in", registry=reg)
        self.phase = Enum("veritrain_phase", "The phase of the current round, as the chain says",
                          states=PHASES, registry=reg)
        self.training = Histogram("veritrain_training_seconds", "Wall time of a miner's training in one round",
                                  buckets=TRAINING_BUCKETS, registry=reg)
        self.replay = Histogram("veritrain_replay_seconds", "Wall time of replaying one miner's challenged "
                                "segments (a validator's check or vote)", buckets=REPLAY_BUCKETS, registry=reg)
        self.received = Counter("veritrain_p2p_received_bytes", "Stream payload bytes received, per libp2p protocol",
                                ["protocol"], registry=reg)
        self.sent = Counter("veritrain_p2p_sent_bytes", "Stream payload bytes sent, per libp2p protocol",
                            ["protocol"], registry=reg)
        self.peers = Gauge("veritrain_p2p_connected_peers", "Peers with an open connection", registry=reg)
        self.drops = Counter("veritrain_p2p_rate_limited", "Peer requests or messages refused by a rate limit, "
                             "per limit (request, gossip, streams, busy)", ["limit"], registry=reg)
        self.checks = Counter("veritrain_checks", "Miner checks of this validator, per result (passed, failed)",
                              ["result"], registry=reg)
        self.reports = Counter("veritrain_reports_filed", "Fraud reports this validator filed on chain, per kind",
                               ["kind"], registry=reg)
        self.retries = Counter("veritrain_chain_retries", "Chain calls retried, per reason (error, unreachable)",
                               ["reason"], registry=reg)

    # ---- the round --------------------------------------------------------------------
    def set_round(self, round_: int) -> None:
        self.round.set(round_)

    def set_phase(self, phase: Phase) -> None:
        self.phase.state(phase.name.lower())

    def set_peers(self, count: int) -> None:
        self.peers.set(count)

    # ---- work -------------------------------------------------------------------------
    def observe_training(self, seconds: float) -> None:
        self.training.observe(seconds)

    def observe_replay(self, seconds: float) -> None:
        self.replay.observe(seconds)

    def check_done(self, passed: bool) -> None:
        self.checks.labels("passed" if passed else "failed").inc()

    def report_filed(self, kind: str) -> None:
        self.reports.labels(kind).inc()

    # ---- p2p (protocol.p2p.traffic.Traffic) and chain (ChainPort's retry hook) -------
    def bytes_in(self, protocol: str, nbytes: int) -> None:
        self.received.labels(protocol).inc(nbytes)

    def bytes_out(self, protocol: str, nbytes: int) -> None:
        self.sent.labels(protocol).inc(nbytes)

    def rate_limited(self, limit: str) -> None:
        self.drops.labels(limit).inc()

    def chain_retry(self, reason: str) -> None:
        self.retries.labels(reason).inc()
