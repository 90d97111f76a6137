"""What `veritrain inspect` shows: stable, JSON-ready dicts built from views and events."""

from __future__ import annotations

from typing import Any

from protocol.chain.client import ChainClient, Phase, ReportStatus, Role
from protocol.chain.events import read_events
from protocol.core.fraud import FraudKind

LOSS_SCALE = 1_000_000  # attested held-out losses are fixed point


def _hex(value: bytes) -> str:
    return "0x" + bytes(value).hex()


def summary(client: ChainClient) -> dict[str, Any]:
    dep, call = client.deployment, client.call
    registered = read_events(client, "staking", "Registered")
    roles = {row["account"]: row["role"] for row in registered}
    return {
        "chain_id": dep.chain_id,
        "contracts": dep.contracts.model_dump(),
        "run_config_hash": dep.run_config_hash,
        "started": client.started(),
        "current_round": client.current_round(),
        "miners": sum(1 for r in roles.values() if r == Role.MINER),
        "validators": sum(1 for r in roles.values() if r == Role.VALIDATOR),
        "eligible_miners": call("staking", "eligible_miner_count"),
        "token": {
            "total_supply": call("token", "totalSupply"),
            "minted": call("rewards", "total_minted"),
            "forfeited_burned": call("rewards", "total_burned"),
            "slashed": call("staking", "total_slashed"),
        },
        "totals": {
            "staked": call("staking", "total_staked"),
            "unbonding": call("staking", "total_unbonding"),
            "claimable": call("rewards", "total_claimable"),
            "held": call("rewards", "total_held"),
            "report_bonds": call("disputes", "total_bonds"),
        },
    }


def rounds(client: ChainClient) -> list[dict[str, Any]]:
    if not client.started():
        return []
    finalized = {row["round"]: row for row in read_events(client, "scores", "Finalized")}
    out = []
    for r in range(client.current_round() + 1):
        info = client.round_info(r)
        fin = finalized.get(r)
        out.append({
            "round": r,
            "phase": Phase(client.phase(r)).name.lower(),
            "start_time": info["start_time"],
            "commits": info["commits"],
            "active_miners": info["active_miners"],
            "model_hash": _hex(client.call("rounds", "model_hash", r)),
            "heldout_loss": client.call("attestation", "heldout_loss", r) / LOSS_SCALE if r > 0 else None,
            "minted": fin["minted"] if fin else None,
            "fallback": fin["fallback"] if fin else None,  # finalized without the reveal quorum
            "validators_revealed": fin["validators"] if fin else len(client.call("scores", "revealed_validators_of", r)),
        })
    return out


def round_detail(client: ChainClient, round_: int) -> dict[str, Any]:
    info = client.round_info(round_)
    settled = {row["miner"]: row for row in read_events(client, "rewards", "MinerSettled") if row["round"] == round_}
    paid = {row["validator"]: row for row in read_events(client, "rewards", "ValidatorSettled") if row["round"] == round_}
    commits = [row for row in read_events(client, "rounds", "UpdateCommitted") if row["round"] == round_]
    miners = []
    for row in commits:
        m = row["miner"]
        s = settled.get(m)
        miners.append({"address": m, "update_hash": _hex(row["update_hash"]), "trace_root": _hex(row["trace_root"]),
                       "consensus": s["consensus"] if s else None, "reward": s["reward"] if s else None,
                       "held": s["held"] if s else None, "reputation": s["reputation"] if s else None})
    validators = []
    for v in client.validators_of(round_) if info["start_time"] else []:
        p = paid.get(v)
        validators.append({"address": v, "weight": client.call("rounds", "validator_weight", round_, v),
                           "revealed": client.call("scores", "revealed", round_, v),
                           "agreement": p["agreement"] / 10**18 if p else None, "reward": p["reward"] if p else None,
                           "scores": list(client.call("scores", "scores_of", round_, v))})
    return {
        "round": round_, "phase": Phase(client.phase(round_)).name.lower(),
        "seed": _hex(info["seed"]), "commit_deadline": info["commit_deadline"],
        "score_deadline": info["score_deadline"], "reveal_deadline": info["reveal_deadline"],
        "audit_deadline": info["audit_deadline"],
        "model_hash": _hex(client.call("rounds", "model_hash", round_)),
        "next_model_hash": _hex(client.call("rounds", "model_hash", round_ + 1)),
        "next_heldout_loss": client.call("attestation", "heldout_loss", round_ + 1) / LOSS_SCALE,
        "miners": miners, "validators": validators,
        "reports": [d for d in disputes(client) if d["round"] == round_],
    }


def node(client: ChainClient, address: str) -> dict[str, Any]:
    address = client.w3.to_checksum_address(address)
    call = client.call
    role = call("staking", "role", address)
    slashes = [{"amount": row["amount"], "reporter": row["reporter"], "burned": row["burned"], "block": row["_block"]}
               for row in read_events(client, "staking", "Slashed") if row["account"] == address]
    history = [{"round": row["round"], "consensus": row["consensus"], "reward": row["reward"], "held": row["held"]}
               for row in read_events(client, "rewards", "MinerSettled") if row["miner"] == address]
    return {
        "address": address,
        "role": Role(role).name.lower() if role else None,
        "node_key": _hex(call("staking", "node_key", address)),
        "multiaddr": call("staking", "multiaddr", address),
        "token_balance": client.token_balance(address),
        "staked": call("staking", "staked", address),
        "unbonding": call("staking", "unbonding", address),
        "unbond_release_time": call("staking", "unbond_release_time", address),
        "eligible": call("staking", "eligible_role", address) != 0,
        "reputation": call("rewards", "reputation", address),
        "claimable": call("rewards", "claimable", address),
        "claimed": call("rewards", "claimed", address),
        "open_reports": call("staking", "open_reports", address),
        "slashed": sum(s["amount"] for s in slashes),
        "slashes": slashes,
        "rounds": history,
    }


def disputes(client: ChainClient) -> list[dict[str, Any]]:
    resolved = {row["report_id"]: row for row in read_events(client, "disputes", "FraudResolved")}
    out = []
    for rid in range(1, client.call("disputes", "report_count") + 1):
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
