"""Typed client for the settlement contracts. The only place (with deploy.py) that calls them."""

from __future__ import annotations

from enum import IntEnum
from functools import cached_property
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_typing import HexStr
from web3 import Web3
from web3.exceptions import Web3Exception

from contracts.build import load_all
from protocol.chain.backend import ChainHandle
from protocol.chain.deployment import Deployment
from protocol.chain.lean_contract import LeanContract
from protocol.chain.reader import ChainReader
from protocol.chain.tx import TxSender
from protocol.core.errors import ConfigError
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.score_vector import unpack_segments

MAX_UINT = 2**256 - 1


class Role(IntEnum):
    MINER = 1
    VALIDATOR = 2


class Vote(IntEnum):
    CONFIRM = 1
    REJECT = 2
    SERVED = 3


class Phase(IntEnum):
    NOT_OPEN = 0
    COMMIT = 1
    SCORING = 2
    REVEAL = 3
    AUDIT = 4  # validators replay a sample of each other's witnesses; reports may still be filed
    RESULT = 5  # the result is posted with its BLS certificate and may be challenged
    ENDED = 6  # its result is final (or the round fell back) and the next round is open


class ReportStatus(IntEnum):
    NONE = 0
    OPEN = 1
    CONFIRMED = 2
    REJECTED = 3
    VOID = 4


class ChainClient:
    """One account's view of one deployment. `account` may be None for read-only use."""

    def __init__(self, handle: ChainHandle, deployment: Deployment, account: LocalAccount | None = None,
                 sender: TxSender | None = None) -> None:
        self.handle, self.w3, self.deployment, self.account = handle, handle.w3, deployment, account
        self.sender = sender or TxSender(handle.w3)
        artifacts = load_all()  # shipped ABIs (contracts/artifacts): no compiler at start
        addrs = deployment.contracts
        def contract(address: str, artifact: str) -> LeanContract:
            return LeanContract(self.w3, Web3.to_checksum_address(address), artifacts[artifact].abi)

        self.token = contract(addrs.token, "Token")
        self.staking = contract(addrs.staking, "Staking")
        # `call(name, ...)` and events name one contract: keys (BLS keys), rounds (round clock,
        # update commits, seeds, validator snapshots, phases, model hashes), scores (score vectors
        # as calldata), results (certified results, challenge window, fallback), the three challenge contracts,
        # rewards (emission, forfeits, cumulative claims) and disputes
        self.keys = contract(addrs.keys, "BlsKeys")
        self.rounds = contract(addrs.rounds, "Rounds")
        self.scores = contract(addrs.scores, "Scores")
        self.rewards = contract(addrs.rewards, "Rewards")
        self.results = contract(addrs.results, "Results")
        self.column_challenges = contract(addrs.column_challenges, "ColumnChallenges")
        self.tree_challenges = contract(addrs.tree_challenges, "TreeChallenges")
        self.account_challenges = contract(addrs.account_challenges, "AccountChallenges")
        self.claims_challenges = contract(addrs.claims_challenges, "ClaimsChallenges")
        self.disputes = contract(addrs.disputes, "Disputes")

    def with_account(self, account: LocalAccount) -> ChainClient:
        """Same deployment and nonce tracker, another signer."""
        return ChainClient(self.handle, self.deployment, account, self.sender)

    @cached_property
    def read(self) -> ChainReader:
        """Typed reads of the contracts' getters (protocol/chain/reader/)."""
        return ChainReader(self)

    @property
    def address(self) -> str:
        return self._signer().address

    def check_deployment(self) -> None:
        """Refuse to run against a chain or contracts other than the deployment file's."""
        chain_id = self.handle.chain_id
        if chain_id != self.deployment.chain_id:
            raise ConfigError(f"chain id mismatch: node reports {chain_id}, deployment file says {self.deployment.chain_id}")
        for name in ("keys", "rounds", "scores", "rewards", "results", "column_challenges", "tree_challenges",
                     "account_challenges", "claims_challenges", "disputes"):
            if not self.w3.eth.get_code(Web3.to_checksum_address(getattr(self.deployment.contracts, name))):
                raise ConfigError(f"no {name} contract at the deployment file's address on this chain")
        self._check_sources()
        if self.deployment.run_config.config_hash().hex() != self.deployment.run_config_hash:
            raise ConfigError("the deployment file's run config does not hash to its run_config_hash: it was "
                              "edited after deploying; use the file `veritrain deploy` wrote")
        on_chain = self.rounds.functions.run_config_hash().call().hex()
        if on_chain != self.deployment.run_config_hash:
            raise ConfigError(f"run config hash mismatch: chain has {on_chain}, deployment file has {self.deployment.run_config_hash}")
        seats = self.column_challenges.functions.committee_size().call()
        if seats != self.deployment.run_config.chain.committee:  # nodes draw by the run config, the chain by this
            raise ConfigError(f"the column challenges were deployed with committees of {seats}, the run config "
                              f"says {self.deployment.run_config.chain.committee}: redeploy")

    def _check_sources(self) -> None:
        """This veritrain speaks to the contracts its shipped artifacts were built from: a
        deployment of other sources (an older or newer version's) needs that version."""
        from contracts.build import manifest

        here = manifest()["sources_hash"]
        if self.deployment.sources_hash != here:
            raise ConfigError(f"the deployment's contracts were built from other sources (sources hash "
                              f"{self.deployment.sources_hash[:12]}…, this veritrain's {here[:12]}…): run the "
                              "veritrain version that deployed them, or redeploy (docs/OPERATORS.md §10.3)")

    # ---- transactions -------------------------------------------------------------
    def _send(self, fn: Any) -> dict:
        return self.sender.send(fn, self._signer())

    def _signer(self) -> LocalAccount:
        if self.account is None:
            raise ConfigError("this action needs an account; the client is read-only")
        return self.account

    def send_eth(self, to: str, wei: int) -> dict:
        signer = self._signer()
        with self.sender._account_lock(signer.address):
            with self.sender._lock:
                nonce = self.sender._next_nonce(signer.address)
                tx: dict[str, Any] = {"to": to, "value": wei, "from": signer.address, "chainId": self.handle.chain_id,
                                      "gas": 21000, "nonce": nonce, **_fee_fields(self.w3)}
                tx_hash = self.w3.eth.send_raw_transaction(signer.sign_transaction(tx).raw_transaction)
                self.sender._nonces[signer.address] = nonce + 1
            return self.sender.wait(tx_hash)

    def transfer_tokens(self, to: str, amount: int) -> dict:
        return self._send(self.token.functions.transfer(to, amount))

    def register(self, role: Role, node_key: bytes, multiaddr: str, binding_sig: bytes) -> dict:
        return self._send(self.staking.functions.register(int(role), node_key, multiaddr, binding_sig))

    def set_hardware_classes(self, mask: int) -> dict:
        """Register the hardware classes this account runs (bit i: the run's permitted class i)."""
        return self._send(self.staking.functions.set_hardware_classes(mask))

    def stake(self, amount: int) -> dict:
        self._ensure_allowance(self.staking.address, amount)
        return self._send(self.staking.functions.stake(amount))

    def request_unbond(self, amount: int) -> dict:
        return self._send(self.staking.functions.request_unbond(amount))

    def withdraw(self) -> dict:
        return self._send(self.staking.functions.withdraw())

    def start(self) -> dict:
        return self._send(self.rounds.functions.start())

    def commit_update(self, round_: int, update_hash: bytes, trace_root: bytes, steps: int = 0) -> dict:
        """Commit an update trained for `steps` inner steps (0: the run's maximum H)."""
        return self._send(self.rounds.functions.commit_update(round_, update_hash, trace_root, steps))

    def close_commit(self, round_: int) -> dict:
        return self._send(self.rounds.functions.close_commit(round_))

    def store_seed(self, round_: int) -> dict:
        return self._send(self.rounds.functions.store_seed(round_))

    def commit_scores(self, round_: int, commitment: bytes) -> dict:
        return self._send(self.scores.functions.commit_scores(round_, commitment))

    def reveal_scores(self, round_: int, segments: list[bytes], witness_root: bytes, heldout_loss_micro: int,
                      salt: bytes) -> dict:
        """Reveal a score vector (`pack_segments`: an entry per miner scored nonzero), its witness root and held-out loss."""
        return self._send(self.scores.functions.reveal_scores(
            round_, segments, witness_root, heldout_loss_micro, salt))

    def register_bls(self, public_key_eip2537: bytes, pop_eip2537: bytes) -> dict:
        """Register this validator's BLS key (EIP-2537 G1) with its proof of possession (G2)."""
        return self._send(self.keys.functions.register(public_key_eip2537, pop_eip2537))

    def audits_done(self, round_: int) -> dict:
        """Say this validator finished its witness audits of `round_` (during the audit phase, once)."""
        return self._send(self.scores.functions.audits_done(round_))

    def post_result(self, header: list[bytes], signature: bytes, non_signers: list[str],
                    non_signer_keys: list[bytes]) -> dict:
        """Post a round's result header with the aggregate BLS signature of its root."""
        return self._send(self.results.functions.post_result(header, signature, non_signers, non_signer_keys))

    def finalize_result(self, header: list[bytes], non_signers_hash: bytes, posted_time: int, attempt: int) -> dict:
        return self._send(self.results.functions.finalize_result(header, non_signers_hash, posted_time, attempt))

    def fall_back(self, round_: int) -> dict:
        return self._send(self.results.functions.fall_back(round_))

    def approve(self, spender: str, amount: int) -> dict:
        return self._send(self.token.functions.approve(spender, amount))

    def challenge(self, contract: str, fn: str, *args: Any) -> dict:
        """Send a result challenge (`contract` is "column_challenges", "tree_challenges",
        "account_challenges" or "claims_challenges"); the bond must be approved to that contract."""
        return self._send(getattr(getattr(self, contract).functions, fn)(*args))

    def claim(self, round_: int, cumulative: int, proof: list[bytes]) -> dict:
        return self._send(self.rewards.functions.claim(round_, cumulative, proof))

    def report_fraud(self, round_: int, miner: str, kind: FraudKind, segment: int, evidence_hash: bytes,
                     challenge_sig: bytes) -> int:
        """File a report; for LAZY_VALIDATOR `miner` is the accused validator, `segment` the audited
        miner's index in `miners_of(round_)` and `challenge_sig` the accused's revealed sig for it."""
        # `report_bond` per other voter: at most every other validator of the round
        voters = len(self.rounds.functions.validators_of(round_).call())
        bond = self.disputes.functions.report_bond().call() * max(voters - 1, 1)
        self._ensure_allowance(self.disputes.address, bond)
        self._send(self.disputes.functions.report_fraud(round_, miner, int(kind), segment, evidence_hash, challenge_sig))
        return int(self.disputes.functions.report_of(round_, miner, self._signer().address).call())

    def vote_fraud(self, report_id: int, vote: Vote) -> dict:
        return self._send(self.disputes.functions.vote_fraud(report_id, int(vote)))

    def resolve_fraud(self, report_id: int) -> dict:
        return self._send(self.disputes.functions.resolve_fraud(report_id))

    def retire_absent(self, validator: str, witnesses: list[str]) -> dict:
        """End the eligibility of a validator absent from the last `absence_rounds` ended rounds;
        `witnesses`: per round, newest first, a validator that revealed in it."""
        return self._send(self.disputes.functions.retire_absent(validator, witnesses))

    def _ensure_allowance(self, spender: str, amount: int) -> None:
        owner = self._signer().address
        if self.token.functions.allowance(owner, spender).call() < amount:
            self._send(self.token.functions.approve(spender, MAX_UINT))

    # ---- views ----------------------------------------------------------------------
    def current_round(self) -> int:
        return int(self.rounds.functions.current_round().call())

    def started(self) -> bool:
        return bool(self.rounds.functions.started().call())

    def phase(self, round_: int, block: str = "latest") -> Phase:
        """The phase of `round_` at `block`. A node waiting for a phase asks "pending", the
        block its next transaction lands in: a chain that mines on demand (anvil) keeps the
        latest timestamp while idle, so a phase that ends by time alone (scoring, when a
        validator never commits) would never end at "latest" if no one sent a transaction."""
        fn = self.rounds.functions.phase(round_)
        if block != "latest":
            try:
                return Phase(fn.call(block_identifier=block))  # type: ignore[arg-type]
            except (Web3Exception, ValueError):
                pass  # a node that serves no pending block mines on its own clock
        return Phase(fn.call())

    def round_info(self, round_: int) -> dict[str, Any]:
        start, commits, active, closed_block, closed_time, seed = self.rounds.functions.round_info(round_).call()
        commit_dl, score_dl, reveal_dl, audit_dl = self.rounds.functions.deadlines(round_).call()
        return {"start_time": start, "commits": commits, "active_miners": active, "commit_closed_block": closed_block,
                "commit_closed_time": closed_time, "seed": seed, "commit_deadline": commit_dl,
                "score_deadline": score_dl, "reveal_deadline": reveal_dl, "audit_deadline": audit_dl}

    def fallback(self, round_: int) -> bool:
        """Whether `round_` ended without a final result (nothing minted, the model unchanged).
        A raw eth_call: web3 treats a function named `fallback` as the contract's fallback."""
        data = Web3.keccak(text="fallback(uint256)")[:4] + round_.to_bytes(32, "big")
        out = self.w3.eth.call({"to": self.results.address, "data": HexStr("0x" + data.hex())})
        return int.from_bytes(bytes(out), "big") != 0

    def reveals(self, round_: int) -> dict[str, dict[str, Any]]:
        """Every reveal of `round_` (`reveals_from` over all `ScoresRevealed` events)."""
        from protocol.chain.events import read_events  # events imports this module

        return reveals_from(read_events(self, "scores", "ScoresRevealed"), round_)

    def validators_of(self, round_: int) -> list[str]:
        return list(self.rounds.functions.validators_of(round_).call())

    def miners_of(self, round_: int) -> list[str]:
        """The miners that committed in `round_`, in commit (column) order, from `UpdateCommitted`."""
        from protocol.chain.events import read_events  # events imports this module

        return miners_from(read_events(self, "rounds", "UpdateCommitted"), round_)

    def block_time(self, block: str = "latest") -> int:
        """The timestamp of `block` ("latest", or "pending": the block the node would mine
        next); 0 when the node serves no pending block."""
        try:
            return int(self.w3.eth.get_block(block)["timestamp"])  # type: ignore[arg-type]
        except (Web3Exception, ValueError):
            if block == "latest":
                raise
            return 0

    def call(self, contract: str, fn: str, *args: Any) -> Any:
        """Read any public getter by name, e.g. call("staking", "staked", addr): for tests and
        one-off scripts; node code reads through the typed `read`."""
        return getattr(getattr(self, contract).functions, fn)(*args).call()

    def token_balance(self, address: str) -> int:
        return int(self.token.functions.balanceOf(address).call())

    def report(self, report_id: int) -> dict[str, Any]:
        fields = ("round", "miner", "reporter", "kind", "segment", "evidence_hash", "deadline", "status",
                  "confirm_weight", "reject_weight", "served_weight", "votes", "confirms_by_others", "rejects_by_others",
                  "voter_weight", "voter_count", "class_bound")
        return dict(zip(fields, self.disputes.functions.reports(report_id).call(), strict=True))


def reveals_from(rows: list[dict[str, Any]], round_: int) -> dict[str, dict[str, Any]]:
    """The reveals of `round_` among `ScoresRevealed` rows, keyed by checksum validator:
    dict(scores (one int per column, commit order: the sparse entries made dense), segments (as
    revealed), witness_root, heldout_loss)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["round"] != round_:
            continue
        out[Web3.to_checksum_address(row["validator"])] = {
            "scores": list(unpack_segments(segments := [bytes(seg) for seg in row["segments"]], int(row["columns"]))),
            "segments": segments,
            "witness_root": bytes(row["witness_root"]), "heldout_loss": int(row["heldout_loss"]),
        }
    return out


def miners_from(rows: list[dict[str, Any]], round_: int) -> list[str]:
    """The miners of `round_` among `UpdateCommitted` rows, in column (commit) order."""
    found = sorted((int(row["index"]), Web3.to_checksum_address(row["miner"])) for row in rows if row["round"] == round_)
    return [miner for _, miner in found]


def _fee_fields(w3: Any) -> dict[str, int]:
    base = w3.eth.get_block("latest").get("baseFeePerGas", 0) or 0
    tip = 10**9
    return {"maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip}
