"use strict";
// Reading the API's JSON exactly, and the formats of the `inspect` tables
// (protocol/cli/inspect_render.py): tokens rounded as there (exact on hover), scores in
// [0, 1], local times.

const BIG_MARK = "#bigint#";
const TOKEN_UNIT = 10n ** 18n;
const SCORE_ONE = 65535;
const DISPLAY_DECIMALS = 4n; // as protocol/cli/human.py DISPLAY_DECIMALS (docs/OPERATORS.md §8)

// JSON.parse reads numbers as doubles, which drops digits of token amounts (base units up
// to ~1e27). Integer literals beyond 2^53 are read as BigInt instead: a scan outside string
// literals quotes them with a mark, and the reviver turns marked strings into BigInt.
function parseExact(text) {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      let j = i + 1;
      while (j < text.length && "0123456789.eE+-".includes(text[j])) j++;
      const literal = text.slice(i, j);
      const big = /^-?\d+$/.test(literal) && !Number.isSafeInteger(Number(literal));
      out += big ? `"${BIG_MARK}${literal}"` : literal;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return JSON.parse(out, (_key, value) =>
    typeof value === "string" && value.startsWith(BIG_MARK) ? BigInt(value.slice(BIG_MARK.length)) : value);
}

const missing = (value) => value === null || value === undefined;

// An exact token amount: whole tokens with thousands separators, then the significant
// decimals of the 18 (never through a float).
function exactTokens(amount) {
  if (missing(amount)) return "—";
  let units = BigInt(amount);
  const sign = units < 0n ? "-" : "";
  if (units < 0n) units = -units;
  const whole = (units / TOKEN_UNIT).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const frac = units % TOKEN_UNIT;
  if (frac === 0n) return sign + whole;
  return `${sign}${whole}.${frac.toString().padStart(18, "0").replace(/0+$/, "")}`;
}

// A token amount for reading, as `human.rounded_tokens`: 4 decimals, half away from zero, so
// 999.999999999999999999 reads 1,000; a nonzero amount that would round to 0 reads <0.0001.
function tokens(amount) {
  if (missing(amount)) return "—";
  let units = BigInt(amount);
  const sign = units < 0n ? "-" : "";
  if (units < 0n) units = -units;
  const step = TOKEN_UNIT / 10n ** DISPLAY_DECIMALS;
  const rounded = ((units + step / 2n) / step) * step;
  if (rounded === 0n && units !== 0n) return `${sign}<0.${"1".padStart(Number(DISPLAY_DECIMALS), "0")}`;
  return sign + exactTokens(rounded);
}

// A score or reputation (an integer in [0, 65535]) as a fraction, three decimals.
const score = (value) => (missing(value) ? "—" : (Number(value) / SCORE_ONE).toFixed(3));

// A held-out loss as the chain's fixed point gives it (shortest exact decimal).
const loss = (value) => (missing(value) ? "—" : String(value));

// A block time (unix seconds) as the viewer's local date and time.
const localTime = (seconds) => (missing(seconds) || Number(seconds) === 0
  ? "—" : new Date(Number(seconds) * 1000).toLocaleString());

const short = (hex, keep = 10) => (!hex ? "—" : hex.length <= keep + 4 ? hex : `${hex.slice(0, keep)}…`);

const yesNo = (flag) => (flag ? "yes" : "no");
