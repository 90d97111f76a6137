"""What a node reads of a round from the chain: the time, when the round opens, its model hash,
the miners' commits in column order with the compute each follows, and every validator's reveal
with its witness bundle (fetched from peers by its revealed hash). A mixin of `NodeContext`."""

from __future__ import annotations

import time
from typing import Any

import trio

from protocol.chain.client import ChainClient, reveals_from
from protocol.chain.events import EventLog
from protocol.config.run_setup import Setup
from protocol.core.proof.commitment import Commit
from protocol.core.proof.witness import NO_WITNESS
from protocol.core.proof.witness_bundle import SIG_BYTES, WitnessBundleError, decode_bundle
from protocol.core.train.compute_config import ComputeConfig, StepCountError
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.chain_port import ChainPort
from protocol.node.logs import kv
from protocol.node.metrics import NodeMetrics
from protocol.node.peer_blobs import PeerBlobs


class RoundReads(PeerBlobs):
    client: ChainClient
    port: ChainPort
    setup: Setup
    metrics: NodeMetrics
    current_round: int
    commit_log: EventLog
    reveal_log: EventLog
    _bundles: dict[tuple[int, str], list[tuple[bytes, bytes]]]  # (round, validator) -> its witness bundle

    async def chain_time(self) -> int:
        return await self.port(self.client.block_time, "latest")

    async def next_block_time(self) -> int:
        """When the next block will most likely be stamped. Chains that mine on demand
        (anvil) leave the latest timestamp behind while idle but stamp new blocks now, and
        a dev chain whose clock was moved ahead stamps them ahead of this machine's clock:
        the pending block says which, where the node serves one."""
        pending = await self.port(self.client.block_time, "pending")  # never before the latest block
        return max(pending or await self.chain_time(), int(time.time()))

    async def wait_round_open(self, round_: int) -> None:
        """Until `round_` is the current (or a past) round."""
        while True:
            if await self.port(self.client.started) and await self.port(self.client.current_round) >= round_:
                self.current_round = await self.port(self.client.current_round)
                self.metrics.set_round(self.current_round)
                return
            await trio.sleep(self.config.poll_s)

    async def model_hash(self, round_: int) -> bytes:
        return await self.port(self.port.read.rounds.model_hash, round_)

    async def commits(self, round_: int) -> dict[str, Commit]:
        """miner -> its commit (update hash, trace root, column, steps) for `round_`."""
        rows = await self.port(self.commit_log.rows)
        return {r["miner"]: Commit(bytes(r["update_hash"]), bytes(r["trace_root"]), int(r["index"]), int(r["steps"]))
                for r in rows if r["round"] == round_}

    def compute_for(self, commit: Commit) -> ComputeConfig:
        """The config `commit`'s trace, replay and challenges follow: the run's, with the miner's
        committed step count. StepCountError when the run does not allow that count."""
        return self.setup.compute.with_steps(commit.steps)

    def steps_allowed(self, commit: Commit) -> bool:
        """Whether `commit`'s step count is one the run allows (0 stands for H)."""
        return self.setup.compute.allows_steps(commit.steps)

    def challenge_compute(self, commit: Commit) -> ComputeConfig:
        """`compute_for`, or the run's own config when the committed step count is not allowed:
        challenges are drawn under it then, and the check fails as a derivation regardless."""
        try:
            return self.compute_for(commit)
        except StepCountError:
            return self.setup.compute

    async def columns(self, round_: int) -> list[str]:
        """The miners of `round_` in column (commit) order."""
        commits = await self.commits(round_)
        return sorted(commits, key=lambda m: commits[m].column)

    async def reveals(self, round_: int) -> dict[str, dict[str, Any]]:
        """Every validator's reveal of `round_` with its witness bundle: dict(miners, scores,
        witnesses, sigs, served), each list in column order. Reveals are read incrementally
        (audits and votes ask often); a bundle is fetched from the validator or any peer by its
        revealed content hash, and until it is, its witnesses read as NO_WITNESS (`served` False)."""
        columns = await self.columns(round_)
        out = {}
        for v, rev in reveals_from(await self.port(self.reveal_log.rows), round_).items():
            bundle = await self._bundle(round_, v, rev["witness_root"], len(columns))
            entries = bundle or [(NO_WITNESS, bytes(SIG_BYTES))] * len(columns)
            out[v] = {"miners": columns, "scores": rev["scores"], "witnesses": [w for w, _ in entries],
                      "sigs": [g for _, g in entries], "served": bundle is not None,
                      "heldout_loss": rev["heldout_loss"]}
        return out

    async def _bundle(self, round_: int, validator: str, root: bytes, columns: int) -> list[tuple[bytes, bytes]] | None:
        if (round_, validator) in self._bundles:
            return self._bundles[(round_, validator)]
        data = await self.fetch_blob(root, BlobKind.WITNESS_BUNDLE, first=validator)  # checked against the root
        if data is None:
            return None
        try:
            entries = decode_bundle(data, columns)
        except WitnessBundleError as exc:
            self.log.warning("malformed witness bundle %s", kv(round=round_, validator=validator, reason=exc))
            entries = [(NO_WITNESS, bytes(SIG_BYTES))] * columns  # auditors report it as unwitnessed
        self._bundles[(round_, validator)] = entries
        return entries

