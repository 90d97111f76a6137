"""What `veritrain inspect` shows: stable, JSON-ready dicts built from views and events."""

from __future__ import annotations

from typing import Any

from protocol.chain.client import ChainClient, Phase, ReportStatus, Role, reveals_from
from protocol.chain.events import read_events, read_many
from protocol.chain.round_timeline import round_closings
from protocol.chain.settlement_history import SettlementHistory
from protocol.core.errors import ConfigError
from protocol.core.settlement.class_checks import effective_classes
from protocol.core.settlement.fraud import FraudKind
from protocol.core.settlement.loss_scale import LOSS_SCALE


def _hex(value: bytes) -> str:
    return "0x" + bytes(value).hex()


def summary(client: ChainClient) -> dict[str, Any]:
    dep, read = client.deployment, client.read
    registered = read_events(client, "staking", "Registered")
    roles = {row["account"]: row["role"] for row in registered}
    return {
        "chain_id": dep.chain_id,
        "contracts": dep.contracts.model_dump(),
        "run_config_hash": "0x" + dep.run_config_hash.removeprefix("0x"),
        "started": client.started(),
        "current_round": client.current_round(),
        "miners": sum(1 for r in roles.values() if r == Role.MINER),
        "validators": sum(1 for r in roles.values() if r == Role.VALIDATOR),
        "eligible_miners": read.staking.eligible_miner_count(),
        "token": {
            "total_supply": read.token.total_supply(),
            "minted": read.rewards.total_minted(),
            "slashed": read.staking.total_slashed(),
        },
        "totals": {
            "staked": read.staking.total_staked(),
            "unbonding": read.staking.total_unbonding(),
            "claimed": read.rewards.total_claimed(),
            "unclaimed": read.rewards.total_minted() - read.rewards.total_claimed(),
            "report_bonds": read.disputes.total_bonds(),
        },
    }


def rounds(client: ChainClient) -> list[dict[str, Any]]:
    if not client.started():
        return []
    history = SettlementHistory(client)
    posts = _posts_by_round(client)
    out = []
    for r in range(client.current_round() + 1):
        info = client.round_info(r)
        settled = history.final(r)
        out.append({
            "round": r,
            "phase": Phase(client.phase(r)).name.lower(),
            "start_time": info["start_time"],
            "commits": info["commits"],
            "active_miners": info["active_miners"],
            "model_hash": _hex(client.read.rounds.model_hash(r)),
            "result": _result_status(client, r, posts.get(r, [])),
            "heldout_loss": settled.result.heldout_loss / LOSS_SCALE if settled else None,
            "minted": settled.result.minted if settled else None,
            "quorum": settled.result.quorum if settled else None,
            "fallback": client.fallback(r),  # ended without a final result: nothing minted, model unchanged
            "validators_revealed": sum(1 for v in client.validators_of(r) if client.read.scores.revealed(r, v))
            if info["start_time"] else 0,
        })
    return out


def round_detail(client: ChainClient, round_: int) -> dict[str, Any]:
    if not client.started() or round_ > client.current_round():
        raise ConfigError(f"round {round_} does not exist (current round: {client.current_round() if client.started() else 'none'})")
    info = client.round_info(round_)
    history = SettlementHistory(client)
    settled = history.final(round_)
    commits = sorted((row for row in read_events(client, "rounds", "UpdateCommitted") if row["round"] == round_),
                     key=lambda row: row["index"])
    miners = []
    inputs = settled.inputs if settled else (history.inputs(round_) if info["start_time"] else None)
    for row in commits:
        i = int(row["index"])
        res = settled.result if settled else None
        miners.append({"address": row["miner"], "column": i, "update_hash": _hex(row["update_hash"]),
                       "trace_root": _hex(row["trace_root"]),
                       "steps": int(row["steps"]),  # capacity-scaled work: inner steps committed (0: the run's H)
                       "hardware_class": _class_labels(client, effective_classes(
                           client.read.staking.hardware_classes(row["miner"]))),
                       # "exact": validators of its class checked it bit for bit; "tolerance": nobody held
                       # the class with enough stake, so every validator checked it within δ (discounted)
                       "check": ("exact" if inputs.exact_column(i) else "tolerance")
                       if inputs is not None and i < inputs.n else None,
                       "consensus": res.consensus[i] if res else None, "reward": res.pay[i] if res else None,
                       "reputation": res.reputation[i] if res else None,
                       "cumulative": res.cumulative[i] if res else None})
    reveals = reveals_from(read_events(client, "scores", "ScoresRevealed"), round_)
    validators = []
    for j, v in enumerate(client.validators_of(round_) if info["start_time"] else []):
        rev = reveals.get(v)
        validators.append({"address": v, "weight": client.read.rounds.validator_weight(round_, v),
                           "revealed": rev is not None, "scores": rev["scores"] if rev else [],
                           "heldout_loss": rev["heldout_loss"] / LOSS_SCALE if rev else None,
                           "witness_root": _hex(rev["witness_root"]) if rev else None,
                           "reward": settled.result.validator_credit[j] if settled else None,
                           "cumulative": settled.result.validator_cumulative[j] if settled else None})
    result_deadline = client.read.results.result_deadline(round_)
    return {
        "round": round_, "phase": Phase(client.phase(round_)).name.lower(),
        "seed": _hex(info["seed"]), "commit_deadline": info["commit_deadline"],
        "score_deadline": info["score_deadline"], "reveal_deadline": info["reveal_deadline"],
        "audit_deadline": info["audit_deadline"], "result_deadline": result_deadline,
        # when each phase closed (null while open): a phase closing early ends before its deadline
        "closed": round_closings(client, round_, info, result_deadline),
        "model_hash": _hex(client.read.rounds.model_hash(round_)),
        "next_model_hash": _hex(client.read.rounds.model_hash(round_ + 1)),
        "result": _result_status(client, round_, _posts_by_round(client).get(round_, [])),
        "heldout_loss": settled.result.heldout_loss / LOSS_SCALE if settled else None,
        "miners": miners, "validators": validators,
        "reports": [d for d in disputes(client) if d["round"] == round_],
    }


def _class_labels(client: ChainClient, mask: int) -> list[str]:
    """The permitted classes an on-chain class set names, as `cpu/avx2/1t/float32` labels from the
    deployed run config (bit i: class i); `class <i>` when the config does not list it."""
    listed = client.deployment.run_config.training.get("classes", [])
    out = []
    for i in range(mask.bit_length()):
        if mask >> i & 1:
            c = listed[i] if i < len(listed) else None
            out.append(f"{c.get('device', 'cpu')}/{c.get('cpu_capability', 'avx2')}/{c.get('threads', 1)}t/"
                       f"{c.get('dtype', 'float32')}" if isinstance(c, dict) else f"class {i}")
    return out


def node(client: ChainClient, address: str) -> dict[str, Any]:
    address = client.w3.to_checksum_address(address)
    staking, keys = client.read.staking, client.read.keys
    role = staking.role(address)
    slashes = [{"amount": row["amount"], "reporter": row["reporter"], "burned": row["burned"], "block": row["_block"]}
               for row in read_events(client, "staking", "Slashed") if row["account"] == address]
    history = SettlementHistory(client)
    latest = history.latest_entry(address)
    earned = latest[1].claim_of(address).amount if latest else 0
    rows = []
    for r in range(client.current_round() if client.started() else 0):
        settled = history.final(r)
        entry = settled.entry_of(address) if settled else None
        if settled is None or entry is None:
            continue
        if address in settled.inputs.miners:
            rows.append({"round": r, "consensus": settled.result.consensus[entry.index],
                         "reward": settled.result.pay[entry.index], "cumulative": entry.cumulative})
        else:
            rows.append({"round": r, "reward": settled.result.validator_credit[entry.index],
                         "cumulative": entry.cumulative})
    return {
        "address": address,
        "role": Role(role).name.lower() if role else None,
        "node_key": _hex(staking.node_key(address)),
        "bls_key": _hex(keys.bls_key(address)) if keys.has_bls_key(address) else None,
        "multiaddr": staking.multiaddr(address),
        "hardware_classes": _class_labels(client, staking.hardware_classes(address)),
        "token_balance": client.token_balance(address),
        "staked": staking.stake_of(address),
        "unbonding": staking.unbonding_of(address),
        "unbond_release_time": staking.unbond_release_time(address),
        "eligible": staking.eligible_role(address) != 0,
        "reputation": latest[1].entry_of(address).reputation if latest else 0,  # type: ignore[union-attr]
        "cumulative_earned": earned,
        "claimed": client.read.rewards.claimed(address),
        "claimable": earned - client.read.rewards.claimed(address),
        "open_reports": staking.open_reports_against(address),
        "slashed": sum(s["amount"] for s in slashes),
        "slashes": slashes,
        "rounds": rows,
    }


def _posts_by_round(client: ChainClient) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in read_events(client, "results", "ResultPosted"):
        out.setdefault(int(row["round"]), []).append(row)
    return out


def _result_status(client: ChainClient, round_: int, posts: list[dict[str, Any]]) -> dict[str, Any]:
    """Every posted root of the round with its status (pending, rejected, final) and its challenges."""
    final = client.read.results.final_root(round_)
    rejected = client.read.results.rejected_count(round_)
    kinds = [(c, e) for c in ("column_challenges", "tree_challenges", "account_challenges", "claims_challenges")
             for e in ("ChallengeUpheld", "ChallengeFailed")]
    logs = read_many(client, kinds)
    challenges = [row for (_, e), rows in logs.items() if e == "ChallengeUpheld" for row in rows if int(row["round"]) == round_]
    failed = [row for (_, e), rows in logs.items() if e == "ChallengeFailed" for row in rows if int(row["round"]) == round_]
    roots = []
    for row in posts:
        attempt, root = int(row["attempt"]), bytes(row["result_root"])
        status = "final" if root == final else "rejected" if attempt <= rejected else "pending"
        roots.append({"attempt": attempt, "root": _hex(root), "status": status, "posted_time": row["posted_time"],
                      "non_signers": list(row["non_signers"]), "poster": row["poster"]})
    return {"roots": roots, "final_root": _hex(final) if final != bytes(32) else None,
            "challenges_upheld": len(challenges), "challenges_failed": len(failed)}


def disputes(client: ChainClient) -> list[dict[str, Any]]:
    resolved = {row["report_id"]: row for row in read_events(client, "disputes", "FraudResolved")}
    out = []
    for rid in range(1, client.read.disputes.report_count() + 1):
        rep = client.report(rid)
        res = resolved.get(rid)
        out.append({
            "id": rid, "round": rep["round"], "miner": rep["miner"], "reporter": rep["reporter"],
            "kind": FraudKind(rep["kind"]).label, "segment": rep["segment"],
            "evidence_hash": _hex(rep["evidence_hash"]), "deadline": rep["deadline"],
            "status": ReportStatus(rep["status"]).name.lower(),
            "confirm_weight": rep["confirm_weight"], "reject_weight": rep["reject_weight"],
            "served_weight": rep["served_weight"], "votes": rep["votes"],
            "slashed": res["slashed"] if res else None, "bond_burned": res["bond_burned"] if res else None,
        })
    return out
