"use strict";
// One function per section, each drawing one inspect view (the same keys as `inspect --json`).

const REPUTATION_NOTE = "reputation: a miner's moving average of its consensus scores, rep = (9·prev + c)/10 "
  + "(docs/PROTOCOL.md §11); it sets the miner's peer rate limits. Validators have none (—).";

// Reputation is a miner's alone: a validator's cell says so instead of a 0.
const reputation = (n) => (n.role === "miner" ? cells.score("reputation", n.reputation)
  : el("td", { "data-col": "reputation", "data-value": n.reputation, class: "num", title: "validators have no reputation" }, "—"));

// A round's phases in the order they ran, as `inspect round N`: when each closed, or its
// deadline while open (a phase that closed early did so before its deadline).
const phaseRows = (d) => ["commit", "score", "reveal", "audit", "result"].map((phase) => (d.closed[phase]
  ? [phase === "result" ? "ended" : `${phase} closed`, cells.time(`closed.${phase}`, d.closed[phase])]
  : [`${phase} deadline`, cells.time(`${phase}_deadline`, d[`${phase}_deadline`])]));

function summaryTables(s) {
  const deployment = keyValues("summary-deployment", [
    ["chain id", cells.num("chain_id", s.chain_id)],
    ["rounds contract", cells.hash("contracts.rounds", s.contracts.rounds, 42)],
    ["run config", cells.hash("run_config_hash", s.run_config_hash, 18)],
    ["started", cells.yes("started", s.started)],
    ["current round", cells.num("current_round", s.current_round)],
    ["miners", cells.num("miners", s.miners)],
    ["eligible miners", cells.num("eligible_miners", s.eligible_miners)],
    ["validators", cells.num("validators", s.validators)],
  ]);
  const money = keyValues("summary-tokens", [
    ["total supply", cells.tokens("token.total_supply", s.token.total_supply)],
    ["minted (emission)", cells.tokens("token.minted", s.token.minted)],
    ["slashed", cells.tokens("token.slashed", s.token.slashed)],
    ["staked", cells.tokens("totals.staked", s.totals.staked)],
    ["unbonding", cells.tokens("totals.unbonding", s.totals.unbonding)],
    ["claimed", cells.tokens("totals.claimed", s.totals.claimed)],
    ["minted, not yet claimed", cells.tokens("totals.unclaimed", s.totals.unclaimed)],
    ["report bonds", cells.tokens("totals.report_bonds", s.totals.report_bonds)],
  ]);
  const contracts = el("details", {}, el("summary", {}, "contracts"),
    table("summary-contracts", [["contract", (r) => cells.text("name", r[0])], ["address", (r) => cells.hash("address", r[1], 42)]],
      Object.entries(s.contracts)));
  return [deployment, money, contracts];
}

// The result of a round in a word: fallback, final <root>, or the status of its latest root.
function resultWord(result, fallback) {
  if (fallback) return "fallback";
  if (result.final_root) return `final ${short(result.final_root)}`;
  const statuses = result.roots.map((r) => r.status);
  return statuses.length ? statuses[statuses.length - 1] : "—";
}

function roundsTable(rows, selected) {
  const newestFirst = [...rows].sort((a, b) => Number(b.round) - Number(a.round));
  return table("rounds", [
    ["round", (r) => cells.round("round", r.round)],
    ["phase", (r) => cells.text("phase", r.phase)],
    ["started", (r) => cells.time("start_time", r.start_time)],
    ["commits", (r) => cells.num("commits", r.commits)],
    ["active", (r) => cells.num("active_miners", r.active_miners)],
    ["revealed", (r) => cells.num("validators_revealed", r.validators_revealed)],
    ["held-out loss", (r) => cells.loss("heldout_loss", r.heldout_loss)],
    ["minted", (r) => cells.tokens("minted", r.minted)],
    ["quorum", (r) => (missing(r.quorum) ? cells.text("quorum", null) : cells.yes("quorum", r.quorum))],
    ["model", (r) => cells.hash("model_hash", r.model_hash)],
    ["result", (r) => el("td", { "data-col": "result", "data-value": r.result.final_root }, resultWord(r.result, r.fallback))],
  ], newestFirst, (r) => ({ "data-round": r.round, class: Number(r.round) === selected ? "selected" : null }));
}

function roundSections(d) {
  const facts = keyValues("round-facts", [
    ["phase", cells.text("phase", d.phase)],
    ["seed", cells.hash("seed", d.seed, 18)],
    ...phaseRows(d),
    ["model", cells.hash("model_hash", d.model_hash, 18)],
    ["next model", cells.hash("next_model_hash", d.next_model_hash, 18)],
    ["held-out loss", cells.loss("heldout_loss", d.heldout_loss)],
    ["final result root", cells.hash("result.final_root", d.result.final_root, 66)],
    ["challenges upheld / failed", cells.text("challenges",
      `${d.result.challenges_upheld} / ${d.result.challenges_failed}`)],
  ]);
  const roots = d.result.roots.length ? table("round-roots", [
    ["attempt", (r) => cells.num("attempt", r.attempt)],
    ["result root", (r) => cells.hash("root", r.root, 66)],
    ["status", (r) => cells.text("status", r.status)],
    ["posted", (r) => cells.time("posted_time", r.posted_time)],
    ["non-signers", (r) => cells.num("non_signers", r.non_signers.length)],
    ["poster", (r) => cells.address("poster", r.poster)],
  ], d.result.roots, (r) => ({ "data-attempt": r.attempt })) : note("No result posted yet.");
  const miners = table("round-miners", [
    ["column", (m) => cells.num("column", m.column)],
    ["miner", (m) => cells.address("address", m.address)],
    ["update", (m) => cells.hash("update_hash", m.update_hash)],
    ["steps", (m) => cells.text("steps", Number(m.steps) ? m.steps : "H")],
    ["class", (m) => cells.text("hardware_class", m.hardware_class.join(", ") || "—")],
    ["check", (m) => cells.text("check", m.check)],
    ["consensus", (m) => cells.score("consensus", m.consensus)],
    ["reward", (m) => cells.tokens("reward", m.reward)],
    ["reputation", (m) => cells.score("reputation", m.reputation)],
    ["cumulative", (m) => cells.tokens("cumulative", m.cumulative)],
  ], d.miners, (m) => ({ "data-address": m.address }));
  miners.prepend(el("caption", {}, REPUTATION_NOTE)); // a caption is a table's first child; CSS puts it below
  const validators = table("round-validators", [
    ["validator", (v) => cells.address("address", v.address)],
    ["stake weight", (v) => cells.tokens("weight", v.weight)],
    ["revealed", (v) => cells.yes("revealed", v.revealed)],
    ["held-out loss", (v) => cells.loss("heldout_loss", v.heldout_loss)],
    ["reward", (v) => cells.tokens("reward", v.reward)],
    ["cumulative", (v) => cells.tokens("cumulative", v.cumulative)],
    ["scores", (v) => el("td", { "data-col": "scores", "data-value": v.scores.join(" "), class: "mono" },
      v.scores.map(score).join(" ") || "—")],
  ], d.validators, (v) => ({ "data-address": v.address }));
  return [facts, el("h3", {}, "Result roots"), roots, el("h3", {}, "Miners"), miners,
    el("h3", {}, "Validators"), validators];
}

function nodesTable(rows) {
  const nodes = table("nodes", [
    ["account", (n) => cells.address("address", n.address)],
    ["role", (n) => cells.text("role", n.role)],
    ["staked", (n) => cells.tokens("staked", n.staked)],
    ["unbonding", (n) => cells.tokens("unbonding", n.unbonding)],
    ["balance", (n) => cells.tokens("token_balance", n.token_balance)],
    ["reputation", reputation],
    ["earned", (n) => cells.tokens("cumulative_earned", n.cumulative_earned)],
    ["claimed", (n) => cells.tokens("claimed", n.claimed)],
    ["claimable", (n) => cells.tokens("claimable", n.claimable)],
    ["slashed", (n) => cells.tokens("slashed", n.slashed)],
    ["open reports", (n) => cells.num("open_reports", n.open_reports)],
    ["eligible", (n) => cells.yes("eligible", n.eligible)],
  ], rows, (n) => ({ "data-address": n.address }));
  nodes.prepend(el("caption", {}, REPUTATION_NOTE));
  return nodes;
}

function nodeSections(n) {
  const facts = keyValues("node-facts", [
    ["role", cells.text("role", n.role || "unregistered")],
    ["node key", cells.hash("node_key", n.node_key, 18)],
    ["BLS key", cells.hash("bls_key", n.bls_key, 18)],
    ["multiaddr", cells.text("multiaddr", n.multiaddr || "—")],
    ["hardware classes", cells.text("hardware_classes", n.hardware_classes.join(", ") || "—")],
    ["token balance", cells.tokens("token_balance", n.token_balance)],
    ["staked", cells.tokens("staked", n.staked)],
    ["unbonding", cells.tokens("unbonding", n.unbonding)],
    ["unbond release", cells.time("unbond_release_time", n.unbond_release_time)],
    ["eligible", cells.yes("eligible", n.eligible)],
    ["reputation", reputation(n)],
    ["earned (cumulative)", cells.tokens("cumulative_earned", n.cumulative_earned)],
    ["claimed", cells.tokens("claimed", n.claimed)],
    ["claimable", cells.tokens("claimable", n.claimable)],
    ["slashed", cells.tokens("slashed", n.slashed)],
    ["open reports", cells.num("open_reports", n.open_reports)],
  ]);
  const rounds = n.rounds.length ? table("node-rounds", [
    ["round", (r) => cells.round("round", r.round)],
    ["consensus", (r) => cells.score("consensus", r.consensus)],
    ["reward", (r) => cells.tokens("reward", r.reward)],
    ["cumulative", (r) => cells.tokens("cumulative", r.cumulative)],
  ], n.rounds, (r) => ({ "data-round": r.round })) : note("No entry in a final round yet.");
  const slashes = n.slashes.length ? table("node-slashes", [
    ["amount", (s) => cells.tokens("amount", s.amount)],
    ["burned", (s) => cells.tokens("burned", s.burned)],
    ["reporter", (s) => cells.address("reporter", s.reporter)],
    ["block", (s) => cells.num("block", s.block)],
  ], n.slashes) : note("Never slashed.");
  return [facts, el("h3", {}, "Rounds"), rounds, el("h3", {}, "Slashes"), slashes];
}

function disputesTable(rows, votes, id = "disputes") {
  if (!rows.length) return note("No fraud report filed.");
  const votesOf = (rid) => votes.filter((v) => Number(v.report_id) === Number(rid));
  return table(id, [
    ["id", (d) => cells.num("id", d.id)],
    ["round", (d) => cells.round("round", d.round)],
    ["miner", (d) => cells.address("miner", d.miner)],
    ["reporter", (d) => cells.address("reporter", d.reporter)],
    ["kind", (d) => cells.text("kind", d.kind)],
    ["segment", (d) => cells.num("segment", d.segment)],
    ["status", (d) => cells.text("status", d.status)],
    ["deadline", (d) => cells.time("deadline", d.deadline)],
    ["confirm / reject / served weight", (d) => el("td", { "data-col": "weights", class: "num" },
      `${tokens(d.confirm_weight)} / ${tokens(d.reject_weight)} / ${tokens(d.served_weight)}`)],
    ["votes", (d) => el("td", { "data-col": "votes", "data-value": d.votes }, el("ul", { class: "votes" },
      votesOf(d.id).map((v) => el("li", { "data-validator": v.validator, "data-vote": v.vote },
        `${v.vote} · `, el("a", { href: `#node=${v.validator}` }, short(v.validator, 12)), ` · ${tokens(v.weight)}`))))],
    ["slashed", (d) => cells.tokens("slashed", d.slashed)],
    ["bond burned", (d) => cells.tokens("bond_burned", d.bond_burned)],
  ], rows, (d) => ({ "data-id": d.id }));
}
