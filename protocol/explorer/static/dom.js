"use strict";
// Building the page: elements from data, text only. Strings from the chain (multiaddrs,
// addresses) are set as text nodes, never parsed as markup.

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (!missing(value) && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child));
  return node;
}

// Cells carry `data-col` (the inspect key) and, for figures, `data-value`: the exact value
// the inspect JSON has (token amounts in base units), so what is shown can be checked. A
// token amount shows rounded, with the exact amount in its title (on hover).
const cells = {
  text: (col, value) => el("td", { "data-col": col }, missing(value) ? "—" : value),
  num: (col, value) => el("td", { "data-col": col, "data-value": value, class: "num" }, missing(value) ? "—" : value),
  tokens: (col, value) => el("td", { "data-col": col, "data-value": value, class: "num",
    title: missing(value) ? null : exactTokens(value) }, tokens(value)),
  score: (col, value) => el("td", { "data-col": col, "data-value": value, class: "num" }, score(value)),
  loss: (col, value) => el("td", { "data-col": col, "data-value": value, class: "num" }, loss(value)),
  time: (col, value) => el("td", { "data-col": col, "data-value": value }, localTime(value)),
  hash: (col, value, keep = 10) => el("td", { "data-col": col, "data-value": value, title: value, class: "mono" },
    short(value, keep)),
  yes: (col, value) => el("td", { "data-col": col, "data-value": String(Boolean(value)) }, yesNo(value)),
  address: (col, value) => el("td", { "data-col": col, "data-value": value, class: "mono" },
    value ? el("a", { href: `#node=${value}`, "data-node": value }, value) : "—"),
  round: (col, value) => el("td", { "data-col": col, "data-value": value, class: "num" },
    el("a", { href: `#round=${value}`, "data-round-link": value }, value)),
};

// A table: `columns` is a list of [heading, (row) => <td>]; each row's attributes from `rowAttrs`.
function table(id, columns, rows, rowAttrs = () => ({})) {
  const head = el("thead", {}, el("tr", {}, columns.map(([heading]) => el("th", {}, heading))));
  const body = el("tbody", {}, rows.map((row) => el("tr", rowAttrs(row), columns.map(([, cell]) => cell(row)))));
  return el("table", { id }, head, body);
}

// A two-column table of labelled figures: `pairs` is a list of [label, <td>]; the key of
// each figure goes on its row as `data-key`.
function keyValues(id, pairs) {
  const rows = pairs.map(([label, cell]) => el("tr", { "data-key": cell.dataset.col }, el("th", {}, label), cell));
  return el("table", { id, class: "kv" }, el("tbody", {}, rows));
}

function fill(id, ...children) {
  document.getElementById(id).replaceChildren(...children);
}

const note = (text) => el("p", { class: "note" }, text);
