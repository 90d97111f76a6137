"""The global state θ of each round, equal to the model hash the chain attests: held in the
data dir, recomputed from the previous state and the round's result, or fetched from peers by
that hash. A mixin of `NodeContext`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import trio

from protocol.chain.settlement_history import SettlementHistory
from protocol.core.errors import VeritrainError
from protocol.core.settlement.result import compute_result
from protocol.core.wire.blob_caps import BlobKind
from protocol.node.global_model import genesis_blob, next_state, select_updates
from protocol.node.logs import kv
from protocol.node.round_reads import RoundReads
from protocol.node.stage_pipelines import whole_pipelines
from protocol.node.staged_model import next_staged_state
from protocol.node.staged_store import fetch_bundle, held_bundle, holds_bundle, keep_bundle
from protocol.node.worker_pool import AsyncWorker

if TYPE_CHECKING:
    from protocol.node.context import NodeContext

ZERO32 = b"\x00" * 32
STATE_PATIENCE_S = 60.0  # how long a node whose own state disagrees with the chain keeps asking peers
# under the aggregation tree: how long a node keeps asking for a certified state before summing every
# update itself (what the tree spares it); one fetch's 20 s ran out when peers were slow to answer
TREE_STATE_PATIENCE_S = 40.0


class StateMismatch(VeritrainError):
    """Raised when this node's aggregation of a round disagrees with the attested model hash."""


class GlobalState(RoundReads):
    history: SettlementHistory  # every round's result, rebuilt from chain data
    worker: AsyncWorker | None

    async def state_for(self, round_: int) -> tuple[bytes, bytes]:
        """(encoded θ_round, its model hash), equal to the attested hash of `round_`: a whole
        state's bytes, or a staged run's bundle of its stages (`pipeline/staged_bundle.py`).

        A node that holds the previous state recomputes this one and checks it against the
        chain; one that does not (it joined late, or lost its data dir), or whose result
        disagrees, fetches the attested state from peers: it is a blob addressed by the
        model hash. Recomputing from genesis is the last resort."""
        want = await self.model_hash(round_)
        if want == ZERO32:
            raise StateMismatch(f"round {round_} has no attested model yet")
        if (held := self._held_state(round_, want)) is not None:
            return held, want
        if self.setup.spec.fan_in and round_ > 0 and (fetched := await self._fetch_state(want, TREE_STATE_PATIENCE_S)):
            # under the aggregation tree a certified state is fetched by its hash, never re-summed
            # from every update (what the tree spares); recomputing stays the fallback
            self.log.info("global state fetched from peers %s", kv(round=round_, model=want.hex()[:12]))
            return await self._keep_state(round_, want, fetched), want
        # without the previous state, recomputing means replaying history: ask peers first
        can_compute = round_ == 0 or self._holds_state(round_ - 1)
        if can_compute:
            try:
                blob, got = await self._compute_state(round_)
            except StateMismatch as exc:
                self.log.warning("cannot recompute the global state %s", kv(round=round_, reason=exc))
                got = b""
            if got == want:
                return await self._keep_state(round_, want, blob), want
            if got:
                self.log.warning("computed model differs from the attested one %s",
                                 kv(round=round_, computed=got.hex()[:12], attested=want.hex()[:12]))
        # content-addressed: verified against `want`. A node whose own result differs keeps asking
        # (genesis and aggregation give the same bits on every class, so that takes a fault: a
        # damaged data dir after a restart, a bug): at a round's start its peers may not hold it yet
        patience = STATE_PATIENCE_S if can_compute and got else 0.0
        fetched = await self._fetch_state(want, patience)
        if fetched is not None:
            self.log.info("global state fetched from peers %s", kv(round=round_, model=want.hex()[:12]))
            return await self._keep_state(round_, want, fetched), want
        if can_compute:
            raise StateMismatch(f"round {round_}: no peer serves the attested model {want.hex()[:16]}…")
        self.log.warning("no peer serves the global state; recomputing from history %s", kv(round=round_))
        blob, got = await self._compute_state(round_)
        if got != want:
            raise StateMismatch(f"round {round_}: computed model {got.hex()[:16]}… but chain attests {want.hex()[:16]}…")
        return await self._keep_state(round_, want, blob), want

    async def _fetch_state(self, want: bytes, patience_s: float) -> bytes | None:
        """The attested state from peers, asked for again every poll for up to `patience_s`."""
        deadline, split = trio.current_time() + patience_s, self.setup.stage_split
        while True:
            if split is None:
                fetched = await self.fetch_blob(want, BlobKind.STATE)
            else:  # a staged run: the index by the model hash, then each stage by its own hash
                fetched = await fetch_bundle(self.fetch_blob, want, split)
            if fetched is not None or trio.current_time() >= deadline:
                return fetched
            await trio.sleep(self.config.poll_s)

    def _held_state(self, round_: int, want: bytes) -> bytes | None:
        rec = self.data.state.get(f"state:{round_}")
        if not rec or rec["hash"] != want.hex() or not self._holds_state(round_):
            return None
        if (split := self.setup.stage_split) is not None:
            return held_bundle(self.data.blobs, want, split)
        return self.data.blobs.read(bytes.fromhex(rec["blob"]))

    def _holds_state(self, round_: int) -> bool:
        """Whether this node keeps some state for `round_` (checked against the chain on use)."""
        rec = self.data.state.get(f"state:{round_}")
        if not rec:
            return False
        if (split := self.setup.stage_split) is not None:
            return holds_bundle(self.data.blobs, bytes.fromhex(rec["hash"]), split)
        return self.data.blobs.has(bytes.fromhex(rec["blob"]))

    async def _keep_state(self, round_: int, want: bytes, blob: bytes) -> bytes:
        """Hold `blob` as θ_round, served by its model hash `want` from now on (a staged run's
        bundle as its index and stage blobs, `staged_store.py`)."""
        if (split := self.setup.stage_split) is not None:
            await trio.to_thread.run_sync(keep_bundle, self.data.blobs, blob, split, want)
            self.data.state.set(f"state:{round_}", {"hash": want.hex(), "blob": want.hex()})
            return blob
        self.data.state.set(f"state:{round_}", {"hash": want.hex(), "blob": (await self.put_blob(blob)).hex()})
        return blob

    async def _compute_state(self, round_: int) -> tuple[bytes, bytes]:
        if round_ == 0:
            return await self._work(genesis_blob, self.setup.spec)  # type: ignore[no-any-return]
        return await self.compute_next(round_ - 1)  # type: ignore[no-any-return]

    async def consensus(self, round_: int) -> dict[str, int] | None:
        """Each miner's consensus score in `round_`, computed from chain data (the revealed
        vectors, once the round's reports resolved); None without the reveal quorum or after a
        fallback, when the model stays as it was."""
        if await self.port(self.port.read.rounds.finalized, round_) and await self.port(self.client.fallback, round_):
            return None
        inputs = await self.port(self.history.inputs, round_)
        result = compute_result(inputs)
        return dict(zip(inputs.miners, result.consensus, strict=True)) if result.quorum else None

    async def compute_next(self, round_: int) -> tuple[bytes, bytes]:
        """θ_{round+1} from round `round_`'s result: (blob, hash). Without the quorum (or
        after a fallback) it is θ_round itself."""
        state_blob, state_hash = await self.state_for(round_)
        consensus = await self.consensus(round_)
        if consensus is None:
            return state_blob, state_hash
        chosen = select_updates(self.setup.spec, consensus)  # by the run config's rule and top_g
        commits = await self.commits(round_)
        if self.setup.spec.stages:
            chosen = await whole_pipelines(cast("NodeContext", self), round_, chosen, commits)
        envelopes = []
        for miner in chosen:
            blob = await self.fetch_blob(commits[miner].update_hash, BlobKind.UPDATE, first=miner)
            if blob is None:
                raise StateMismatch(f"round {round_}: update of {miner} is unavailable from every peer")
            envelopes.append(blob)
        spec, seed = self.setup.spec, self.setup.run_seed
        if spec.stages:
            staged: tuple[bytes, bytes] = await self._work(next_staged_state, spec, seed, state_blob, state_hash,
                                                           envelopes, self.caps.update)
            return staged
        blob, new_hash, _ = await self._work(next_state, spec, seed, state_blob, state_hash, envelopes,
                                             self.caps.update, False)
        return blob, new_hash

    async def _work(self, fn: Any, *args: Any) -> Any:
        assert self.worker is not None, "worker not started"
        return await self.worker(fn, *args)
