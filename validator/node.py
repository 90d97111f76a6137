"""The validator role. Per round:

    close commits → seed → check every miner → report fraud → commit scores → reveal the
    vector (scores, witness root, held-out loss) → audit others' witnesses → compute the
    result from chain data, aggregate θ_{r+1}, sign both with BLS → post / finalize (result_flow)
Votes on other validators' reports and resolution run alongside (validator/disputes.py).
A devnet/test-only `silence` (validator/silence.py) makes it skip duties after its commitment.
Salts, scores, the witness bundle and the loss are journaled before `commit_scores`, so a
restarted validator reveals what it committed; the chain says which transactions already landed.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocol.chain.client import Phase
from protocol.core.aggregation.tree import NO_TREE
from protocol.core.crypto.hashing import blake3_hash
from protocol.core.errors import ConfigError, ContractRevert
from protocol.core.proof.witness import make_audit_seed
from protocol.core.proof.witness_bundle import SIG_BYTES, bundle_root, encode_bundle
from protocol.core.settlement.class_checks import CheckMode
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.loss_scale import fixed_loss
from protocol.core.settlement.score_vector import pack_segments, score_commitment, vector_root
from protocol.core.wire.messages import SignedGossip
from protocol.node import round_notes
from protocol.node.context import NodeContext
from protocol.node.global_model import state_heldout_loss
from protocol.node.global_state import StateMismatch
from protocol.node.logs import kv
from validator.absence import retire_absent
from validator.audit_claims import AuditResult
from validator.audits import audit_round, drawn_for, lazy_evidence, witness_of
from validator.cheat import ValidatorCheat
from validator.checks import MinerCheck, check_all, fetch_submissions
from validator.disputes import Disputes
from validator.late_submissions import fetch_late, recheck_unavailable
from validator.result_flow import ResultFlow
from validator.score_audits import comparable_loss, cross_check, loss_evidence, score_evidence
from validator.scoring import Usefulness, class_adjusted, score_seed
from validator.silence import Duty, ValidatorSilence
from validator.stage_round import stage_checks, stage_score_job
from validator.stage_scoring import scored_stage_miners
from validator.tree_aggregation import TreeAggregation, TreeUnavailable
from validator.tree_reports import file_wrong_partials
from validator.work import ScoreJob, scored_miners, usefulness_by_miner


class ValidatorNode(NodeContext):
    def __init__(self, *args: Any, cheat: ValidatorCheat | None = None, silence: ValidatorSilence | None = None,
                 probe: bool = False, tamper: Callable[[bytes], Awaitable[bytes]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cheat = cheat  # devnet and tests only; None for every production validator
        self.silence = silence  # devnet and tests only; None for every production validator
        if self.keys.bls is None:
            raise ConfigError("a validator needs a BLS key: create one with `veritrain keys new`")
        self.results = ResultFlow(self, self.keys.bls, probe,  # probe: devnet and tests only
                                  aggregation_root=self.aggregation_root_of)
        # a devnet/test-only `tamper` makes it serve wrong partial sums (protocol/devnet/lying_aggregator.py)
        self.tree = TreeAggregation(self, audits=self.client.deployment.run_config.chain.tree_audits, tamper=tamper)

    def skips(self, duty: Duty) -> bool:
        """Whether this node leaves `duty` undone (only ever under a devnet/test `silence`)."""
        return self.silence is not None and self.silence.skips(duty)

    def on_gossip(self, message: SignedGossip) -> None:
        if not self.skips("settle"):  # a node that never settles never aggregates shares: keep none
            self.results.on_share(message)
            self.tree.on_announce(message)

    async def compute_next(self, round_: int) -> tuple[bytes, bytes]:
        """θ_{round+1}: through the aggregation tree under `[training] fan_in` while the round is
        open (`tree_aggregation.py`), reporting servers caught lying; else as every node computes
        it (`GlobalState`)."""
        if not self.setup.spec.fan_in or await self.port(self.port.read.rounds.finalized, round_):
            return await super().compute_next(round_)
        tree = await self.tree.tree_for(round_)
        if tree is None:  # nothing to sum, or nobody to check a node: flat
            return await super().compute_next(round_)
        try:
            out = await self.tree.next_state(tree)
        except TreeUnavailable as exc:
            raise StateMismatch(str(exc)) from exc
        if not self.skips("report"):
            await file_wrong_partials(self, self.tree, round_)
        return out

    def aggregation_root_of(self, round_: int) -> bytes:
        """The header word committing to round `round_`'s tree nodes (0 where it was summed flat)."""
        tree = self.tree.trees.get(round_) if self.setup.spec.fan_in else None
        return NO_TREE if tree is None else self.tree.aggregation_root(tree)

    async def main(self, nursery: trio.Nursery) -> None:
        disputes = Disputes(self, votes=not self.skips("vote"), tree=self.tree)
        nursery.start_soon(disputes.run_forever)
        await self._rounds()
        window = self.client.deployment.run_config.chain.challenge_window
        await disputes.drain(max_wait_s=2 * window + 30)  # votes and resolutions of the last round

    async def _rounds(self) -> None:
        await self.wait_first_round()
        r, done = self.current_round, 0
        await round_notes.note_passed_rounds(self, r)  # rounds that ran while this node was down
        while self.config.max_rounds is None or done < self.config.max_rounds:
            await self.wait_round_open(r)
            await round_notes.note_fallen_behind(self, r, self.current_round)
            r = self.current_round
            round_notes.round_seen(self, r)
            if await self.port(self.port.read.rounds.validator_weight, r, self.address) == 0:
                self.log.info("no permit this round %s", kv(round=r))
            else:
                try:
                    await self.play_round(r)
                    await round_notes.note_round(self, r, down=False)  # e.g. no one revealed, or a fallback
                except StateMismatch as exc:  # θ_r is not to be had from anyone yet
                    self.log.warning("cannot get the round's model, skipping the round %s", kv(round=r, reason=exc))
            done += 1
            await self.wait_round_open(r + 1)
            round_notes.round_done(self, r)
            r += 1

    async def duties_in(self, round_: int) -> dict[str, bool]:
        read = self.port.read
        if await self.port(read.rounds.validator_weight, round_, self.address) == 0:
            return {}  # no permit: nothing was this validator's to do
        return {"commit": await self.port(read.scores.scores_committed, round_, self.address),
                "reveal": await self.port(read.scores.revealed, round_, self.address)}

    async def play_round(self, r: int) -> None:
        seed_block = await self._close_commits(r)
        commits = await self.commits(r)
        state = await self.state_for(r)
        modes = await self.classes.modes(r, commits, seed_block)
        self.log.info("verifying %s", kv(round=r, miners=len(commits), phase="scoring",
                                         **{mode.value: sum(m is mode for m in modes.values()) for mode in CheckMode}))
        if self.setup.spec.stages and self.cheat is not None:  # devnet and tests only
            checks, useful = await self.cheat.checks(self, r, commits, seed_block), None
        elif self.setup.spec.stages:  # a staged run: stage checks, pipelines scored whole (stage_round.py)
            checks, useful = await stage_checks(self, r, commits, seed_block, state, modes), None
        else:
            checks, useful = await self._checks(r, commits, seed_block, state, modes)
        await self._report(r, checks)
        await self._commit_scores(r, checks, state, seed_block, useful)
        await self._wait_phase(r, Phase.REVEAL)
        await self._reveal(r)
        await self._wait_phase(r, Phase.AUDIT)
        await self._audit(r, seed_block)
        await self._settle(r)
        await self._prune(r)

    async def _checks(self, r: int, commits: dict, seed_block: bytes, state: tuple[bytes, bytes],
                      modes: dict[str, CheckMode]) -> tuple[list[MinerCheck], dict[bytes, Usefulness] | None]:
        """Every miner checked as `modes` says, with the usefulness computed meanwhile."""
        # only the miners this validator checks: its class, and its seats when the run has committees
        assigned = {m: c for m, c in commits.items() if modes[m].checks}
        submissions = await fetch_submissions(self, r, assigned)
        # a miner restarting mid-round serves again soon (one that never reveals does not wait)
        if self.data.state.recall(r, "scores") is None and not self.skips("reveal"):
            submissions = await fetch_late(self, r, assigned, submissions)
        useful: dict[bytes, Usefulness] | None = None

        async def usefulness_ahead() -> None:
            # the costly half of scoring, on the worker while the checkpoints are fetched
            nonlocal useful
            entries = [(m, c.column, submissions[m][0], True, c.steps) for m, c in sorted(assigned.items())]
            useful = await self._work(usefulness_by_miner, self._score_job(r, state, seed_block, entries))

        async with trio.open_nursery() as nursery:
            if self.data.state.recall(r, "scores") is None:  # else a restart: the scores are journaled
                nursery.start_soon(usefulness_ahead)
            if self.cheat is None:
                checks = await check_all(self, r, commits, seed_block, state, submissions, modes)
                # a miner killed mid-check may be back soon; one that never reveals has no use for
                # its late submissions (and a retired one is no longer served)
                if self.data.state.recall(r, "scores") is None and not self.skips("reveal"):
                    checks = await recheck_unavailable(self, r, commits, seed_block, state, checks)
            else:
                checks = await self.cheat.checks(self, r, commits, seed_block)
        return checks, useful

    async def _close_commits(self, r: int) -> bytes:
        while await self.port.phase(r) == Phase.COMMIT:
            deadline = (await self.port(self.client.round_info, r))["commit_deadline"]
            if await self.next_block_time() >= deadline:
                await self.port.try_send(self.client.close_commit, r)
            await trio.sleep(self.config.poll_s)
        while (seed := (await self.port(self.client.round_info, r))["seed"]) == b"\x00" * 32:
            await self.port.try_send(self.client.store_seed, r)
            await trio.sleep(self.config.poll_s)
        return bytes(seed)

    async def _report(self, r: int, checks: list[MinerCheck]) -> None:
        """File a report for every failed check, whatever anyone else filed: each validator's
        evidence is judged on its own, and a filing of evidence already reported (same segment)
        joins that report as a confirming vote (docs/PROTOCOL.md §12.1)."""
        if self.skips("report"):
            return
        for c in checks:
            o = c.outcome
            if o.kind is None or await self.port(self.port.read.disputes.report_of, r, c.miner, self.address) != 0:
                continue
            if c.mode is CheckMode.TOLERANCE and o.kind is not FraudKind.DERIVATION:
                # a replay within no one's class is no evidence: the miner scores 0, unslashed
                self.log.info("tolerance check failed %s", kv(round=r, miner=c.miner, kind=o.kind, detail=o.detail))
                continue
            evidence = blake3_hash("evidence", (o.expected_hash or b""), (o.actual_hash or b""), o.detail.encode())
            # the challenged segment, always: voters replay it with both of its endpoints
            segment = o.segment if o.segment is not None else c.challenge.segments[0]
            await self._file(r, c.miner, o.kind, segment, bytes(evidence), c.challenge.signature)

    async def _file(self, r: int, accused: str, kind: FraudKind, segment: int, evidence: bytes, sig: bytes) -> None:
        try:
            rid = await self.port(self.client.report_fraud, r, accused, kind, segment, evidence, sig)
            self.metrics.report_filed(kind.label)
            self.log.warning("fraud reported %s", kv(round=r, accused=accused, kind=kind, report=rid))
        except ContractRevert as exc:
            self.log.info("report not filed %s", kv(round=r, accused=accused, reason=exc.reason))

    async def _audit(self, r: int, seed_block: bytes) -> None:
        """Replay a seeded sample of the other validators' witnesses; report the ones that fail."""
        if self.skips("audit"):
            return
        if not await self.port(self.port.read.scores.revealed, r, self.address):
            return  # only validators that revealed audit (and are audited)
        if not await self.port(self.port.read.scores.audited, r, self.address):
            chain = self.client.deployment.run_config.chain
            sample = 0 if self.cheat else chain.audit_sample
            for claim, result, kind in await audit_round(self, r, seed_block, sample, chain.auditors):
                evidence = lazy_evidence(claim, result) if kind is FraudKind.LAZY_VALIDATOR else score_evidence(claim, result)
                await self._file(r, claim.validator, kind, claim.index, bytes(evidence), claim.sig)
            if sample:
                await self._audit_losses(r, chain.auditors, seed_block)
                # a staged score is its pipeline's, split by work: not yet recomputed by auditors (§16.9)
                for claim, detail in [] if self.setup.spec.stages else await cross_check(self, r, seed_block):
                    self.log.info("audited %s", kv(round=r, validator=claim.validator, miner=claim.miner,
                                                   verdict="failed", kind=FraudKind.WRONG_SCORE, detail=detail))
                    await self._file(r, claim.validator, FraudKind.WRONG_SCORE, claim.index,
                                     score_evidence(claim, AuditResult(True, detail)), claim.sig)
            await self.port.try_send(self.client.audits_done, r)

    async def _audit_losses(self, r: int, auditors: int, seed_block: bytes) -> None:
        """Report each validator this one is drawn to audit whose revealed held-out loss differs
        from its own, when both run the same single class (validator/score_audits.py)."""
        entry = self.data.state.recall(r, "scores")
        if entry is None:
            return
        reveals = await self.reveals(r)
        drawn = await drawn_for(self, r, make_audit_seed(self.keys.identity, r, seed_block), list(reveals), auditors)
        for v in sorted(drawn):
            revealed = int(reveals[v]["heldout_loss"])
            if revealed != entry["loss"] and await comparable_loss(self, v):
                self.log.info("audited %s", kv(round=r, validator=v, verdict="failed", kind=FraudKind.WRONG_SCORE,
                                               detail=f"held-out loss {revealed}, recomputed {entry['loss']}"))
                await self._file(r, v, FraudKind.WRONG_SCORE, len(reveals[v]["miners"]),
                                 loss_evidence(revealed, entry["loss"]), bytes(SIG_BYTES))

    async def _settle(self, r: int) -> None:
        """Sign, post and finalize round `r`'s result, or, for a node that sits settlement out,
        only wait until the others ended the round."""
        if not self.skips("settle"):
            await self.results.settle(r)
            self.tree.forget_before(r + 1)
            await retire_absent(self, r)
            return
        self.log.info("not signing the result: waiting for the round to end %s", kv(round=r))
        await self._wait_phase(r, Phase.ENDED)  # final or fallen back, polled every poll_s

    async def _prune(self, r: int) -> None:
        """Free the checkpoints kept for voters and auditors of finalized rounds."""
        for q in self.data.state.checkpoint_rounds():
            if q <= r and await self.port(self.port.read.rounds.finalized, q):
                freed = await trio.to_thread.run_sync(self.data.drop_checkpoints, q)
                self.log.info("pruned checkpoints %s", kv(round=q, freed_mb=f"{freed / 1e6:.0f}"))

    def _score_job(self, r: int, state: tuple[bytes, bytes], seed_block: bytes,
                   entries: list[tuple[str, int, bytes | None, bool, int]]) -> ScoreJob:
        vseed = score_seed(seed_block)
        return ScoreJob(self.setup.spec, self.setup.run_seed, r, state[0], state[1], entries, bytes(vseed),
                        self.caps.update)

    async def _commit_scores(self, r: int, checks: list[MinerCheck], state: tuple[bytes, bytes],
                             seed_block: bytes, useful: dict[bytes, Usefulness] | None) -> None:
        if await self.port(self.port.read.scores.scores_committed, r, self.address):
            return
        entry = self.data.state.recall(r, "scores")
        if useful is not None and any(c.envelope is not None and bytes.fromhex(c.miner[2:]) not in useful
                                      for c in checks):
            useful = None  # a submission served only after the usefulness ran ahead: score all again
        if entry is None:
            by_miner = {c.miner: c for c in checks}
            scored = await self._scored(r, checks, state, seed_block, useful) if checks else {}
            zeroed = {m: why for m, (score, why) in scored.items() if score == 0}
            if zeroed:
                self.log.info("miners scored 0 %s", kv(round=r, why=zeroed))
            scores = class_adjusted({m: score for m, (score, _) in scored.items()},
                                    {c.miner: c.mode for c in checks}, self.setup.compute.tolerance_discount)
            if self.cheat is not None:  # devnet and tests only
                checked = {c.miner for c in checks if c.mode.checks}
                scores |= self.cheat.revealed({m: s for m, s in scores.items() if m in checked})
            columns = await self.columns(r)
            # an entry for each miner it checked only: the bundle grows with its seats, not the network
            bundle = encode_bundle({i: (witness_of(self, r, by_miner[m]), by_miner[m].challenge.signature)
                                    for i, m in enumerate(columns) if m in by_miner and by_miner[m].mode.checks})
            loss = await self._work(state_heldout_loss, self.setup.spec, self.setup.run_seed, state[0], state[1])
            entry = {"miners": columns, "scores": [scores.get(m, 0) for m in columns], "salt": os.urandom(32).hex(),
                     "witness_root": (await self.put_blob(bundle)).hex(), "loss": fixed_loss(loss)}
            assert bytes.fromhex(entry["witness_root"]) == bundle_root(bundle)
            self.data.state.record(r, "scores", entry)  # before the commitment: a restart must reveal it
        root = vector_root(self.client.handle.chain_id, self.client.scores.address, self.address, r, entry["scores"],
                           bytes.fromhex(entry["witness_root"]), entry["loss"])
        if await self.port.try_send(self.client.commit_scores, r, score_commitment(root, bytes.fromhex(entry["salt"]))):
            self.log.info("scores committed %s", kv(round=r, scores=dict(zip(entry["miners"], entry["scores"], strict=True))))

    async def _scored(self, r: int, checks: list[MinerCheck], state: tuple[bytes, bytes], seed_block: bytes,
                      useful: dict[bytes, Usefulness] | None) -> dict[str, tuple[int, str]]:
        """Each miner's score and why; in a staged run each pipeline's, split among its stages."""
        if self.setup.spec.stages:
            staged_job = await stage_score_job(self, r, await self.commits(r), checks, state,
                                               bytes(score_seed(seed_block)))
            staged: dict[str, tuple[int, str]] = await self._work(scored_stage_miners, staged_job)
            decided = {c.miner for c in checks if c.mode.checks}  # the others' columns are their deciders'
            return {m: v if m in decided else (0, "not checked") for m, v in staged.items()}
        job = self._score_job(r, state, seed_block, [(c.miner, c.order, c.envelope, c.outcome.kind is None, c.steps)
                                                     for c in checks])
        scored: dict[str, tuple[int, str]] = await self._work(scored_miners, job, useful)
        return scored

    async def _reveal(self, r: int) -> None:
        if self.skips("reveal"):
            self.log.info("not revealing the committed scores %s", kv(round=r))
            return
        entry = self.data.state.recall(r, "scores")
        if entry is None or await self.port(self.port.read.scores.revealed, r, self.address):
            return
        await self.port.try_send(self.client.reveal_scores, r, pack_segments(entry["scores"]),
                                 bytes.fromhex(entry["witness_root"]), entry["loss"], bytes.fromhex(entry["salt"]))

    async def _wait_phase(self, r: int, phase: Phase) -> None:
        while await self.port.phase(r) < phase:
            await trio.sleep(self.config.poll_s)
