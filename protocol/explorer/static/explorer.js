"use strict";
// The page's loop: poll /api/head; when a block has arrived, read the views again and redraw.
// The selected round and account live in the address (#round=N&node=0x...).

const POLL_MS = 2000;
const state = { block: null, round: null, node: null, stale: true };

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = parseExact(await response.text());
  if (!response.ok) throw new Error(body.error || `${path}: HTTP ${response.status}`);
  return body;
}

function readSelection() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.has("round")) state.round = Number(params.get("round"));
  if (params.has("node")) state.node = params.get("node");
  const merged = new URLSearchParams();  // a link sets one of the two; keep the other
  if (state.round !== null) merged.set("round", state.round);
  if (state.node !== null) merged.set("node", state.node);
  if (location.hash.slice(1) !== merged.toString()) history.replaceState(null, "", `#${merged}`);
}

// The round shown when none is picked: the newest with a result, else the current one.
function defaultRound(rounds) {
  const settled = rounds.filter((r) => r.result.final_root || r.fallback);
  const pick = settled.length ? settled[settled.length - 1] : rounds[rounds.length - 1];
  return pick ? Number(pick.round) : null;
}

async function drawRound(rounds, block) {
  const section = document.getElementById("round-detail");
  const round = state.round ?? defaultRound(rounds);
  if (round === null) {
    section.hidden = true;
    return;
  }
  document.getElementById("round-title").textContent = String(round);
  try {
    const [detail, votes] = await Promise.all([getJson(`/api/round/${round}`), getJson("/api/votes")]);
    fill("round-body", ...roundSections(detail.data), el("h3", {}, "Fraud reports"),
      disputesTable(detail.data.reports, votes.data, "round-reports"));
  } catch (error) {  // a round the chain has not opened (a 404): said here, the rest of the page stands
    fill("round-body", note(error.message));
  }
  section.hidden = false;
  Object.assign(section.dataset, { round, block });
}

async function drawNode(block) {
  const section = document.getElementById("node-detail");
  if (state.node === null) {
    section.hidden = true;
    return;
  }
  let address = state.node;
  try {
    const node = await getJson(`/api/node/${encodeURIComponent(state.node)}`);
    address = node.data.address;  // checksummed
    fill("node-body", ...nodeSections(node.data));
  } catch (error) {  // not an address (a 404): said here, the rest of the page stands
    fill("node-body", note(error.message));
  }
  document.getElementById("node-title").textContent = address;
  section.hidden = false;
  Object.assign(section.dataset, { address, block });
}

async function redraw(head) {
  const names = ["summary", "rounds", "nodes", "disputes", "votes"];
  const [summary, rounds, nodes, disputes, votes] = await Promise.all(names.map((n) => getJson(`/api/${n}`)));
  fill("summary-body", ...summaryTables(summary.data));
  fill("loss-chart", lossChart(rounds.data));
  const shownRound = state.round ?? defaultRound(rounds.data);
  fill("rounds-body", rounds.data.length ? roundsTable(rounds.data, shownRound) : note("The first round has not opened yet."));
  fill("nodes-body", nodes.data.length ? nodesTable(nodes.data) : note("No account has registered yet."));
  fill("disputes-body", disputesTable(disputes.data, votes.data));
  await Promise.all([drawRound(rounds.data, head.block), drawNode(head.block)]);
  const status = document.getElementById("status");
  status.textContent = `chain ${head.chain_id} · block ${head.block} (mined ${localTime(head.time)}) · `
    + `updated ${new Date().toLocaleTimeString()}`;
  status.dataset.block = head.block;
}

function showError(message) {
  const banner = document.getElementById("error");
  banner.hidden = message === null;
  banner.textContent = message ?? "";
  document.body.classList.toggle("stale", message !== null);
}

async function poll() {
  try {
    const head = await getJson("/api/head");
    if (state.stale || head.block !== state.block) {
      state.stale = false;
      await redraw(head);
      state.block = head.block;
    }
    showError(null);
  } catch (error) {
    state.stale = true;  // draw everything again once the chain answers
    showError(`${error.message} (retrying every ${POLL_MS / 1000} s)`);
  }
}

// One poll at a time: a click during a poll marks the page stale for the next one.
let running = null;
function refresh() {
  if (!running) running = poll().finally(() => { running = null; });
  return running;
}

async function loop() {
  await refresh();
  setTimeout(loop, POLL_MS);
}

window.addEventListener("hashchange", () => {
  readSelection();
  state.stale = true;
  refresh();  // show the selection now, not at the next poll
});

readSelection();
loop();
