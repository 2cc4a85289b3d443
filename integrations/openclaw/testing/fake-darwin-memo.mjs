// A stand-in for `darwin-memo ledger FILE [--scale S] [--retriever NAME] OP ...` used by the unit
// tests: the same JSON shapes, a toy economy (credit = 0.6 * tanh(delta/scale)),
// word-overlap retrieval, and switches to misbehave. Not a test file itself.
//
// Next to the store FILE it keeps:
//   FILE.calls.jsonl     one line per call: {op, argv, stdin, pid}
//   FILE.behaviour.json  optional {"<op>": mode}; modes: "hang" (sleep forever),
//                        "hang-hard" (also ignore SIGTERM), "locked" (store_locked
//                        error), "bad-input" (bad_input error), "garbage" (not JSON),
//                        "crash" (traceback on stderr, exit 1)
//   FILE.pids            pids of calls that hung (the timeout test checks they died)

import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const argv = process.argv.slice(2);

function emit(obj, code = 0) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
  process.exit(code);
}

if (argv[0] !== "ledger") emit({ error: "fake supports only `ledger`", code: "usage" }, 2);
const file = argv[1];
let i = 2;
let scale = 1.0;
if (argv[i] === "--scale") {
  scale = Number(argv[i + 1]);
  i += 2;
}
if (argv[i] === "--retriever") i += 2; // recorded in calls.jsonl's argv; the toy search ignores it
const op = argv[i];
const rest = argv.slice(i + 1);
const opts = {};
const pos = [];
for (let j = 0; j < rest.length; j++) {
  const a = rest[j];
  if (a === "--") {
    pos.push(...rest.slice(j + 1));
    break;
  }
  const m = /^--([a-z-]+)=(.*)$/s.exec(a);
  if (m) opts[m[1]] = m[2];
  else pos.push(a);
}

// Like a darwin-memo older than `ledger serve`: the operation is unknown, so the
// plugin falls back to one process per call (this fake is one-shot only).
if (op === "serve") {
  emit({ error: "argument OP: invalid choice: 'serve' (choose from 'decide', 'settle', ...)", code: "usage" }, 2);
}

let stdin = null;
if (pos.includes("-")) stdin = fs.readFileSync(0, "utf8");
const arg = (k) => (pos[k] === "-" ? stdin : pos[k]);

fs.mkdirSync(path.dirname(file), { recursive: true });
fs.appendFileSync(`${file}.calls.jsonl`, `${JSON.stringify({ op, argv, stdin, pid: process.pid })}\n`);

let behaviour = {};
try {
  behaviour = JSON.parse(fs.readFileSync(`${file}.behaviour.json`, "utf8"));
} catch {
  // behave
}
const mode = behaviour[op];
if (mode === "hang" || mode === "hang-hard") {
  fs.appendFileSync(`${file}.pids`, `${process.pid}\n`);
  if (mode === "hang-hard") process.on("SIGTERM", () => {});
  setInterval(() => {}, 1000);
} else if (mode === "locked") {
  emit({ error: "store is locked by another process", code: "store_locked" }, 1);
} else if (mode === "bad-input") {
  emit({ error: "that input is not acceptable", code: "bad_input" }, 1);
} else if (mode === "garbage") {
  process.stdout.write("this is not json\n");
  process.exit(0);
} else if (mode === "crash") {
  process.stderr.write("Traceback (most recent call last):\n  StoreLockedError: busy\n");
  process.exit(1);
} else {
  setImmediate(main); // after the module (and its helpers) has loaded
}

function withLock(fn) {
  const lock = `${file}.fakelock`;
  const wait = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch {
      Atomics.wait(wait, 0, 0, 5);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmdirSync(lock);
  }
}

function load() {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch {
    return null;
  }
}

function save(state) {
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(state));
  fs.renameSync(`${file}.tmp`, file);
}

const words = (s) => new Set(String(s).toLowerCase().match(/[a-z0-9]{3,}/g) ?? []);

function main() {
  const out = withLock(() => {
    let state = load();
    if (!state) {
      if (op !== "add") return missing();
      state = { entries: {}, pending: {}, tick: 0 };
    }
    const r = apply(state);
    save(state);
    return r;
  });
  emit(out, out.error ? 1 : 0);
}

function missing() {
  const shapes = {
    decide: { answer: null, ticket_id: null, silent: true },
    settle: { settled: false },
    abandon: { abandoned: false },
    forget: { forgotten: false },
    tick: { tick: 0, population: 0, deaths: 0, merges: 0, pending: 0, expired: 0, total_energy: 0, upkeep_charged: 0 },
    stats: { alive: 0, graveyard: 0, pending_tickets: 0, total_energy: 0, energy_share_by_kind: {} },
  };
  return { ...(shapes[op] ?? {}), store: "missing" };
}

function apply(state) {
  switch (op) {
    case "add": {
      const id = randomBytes(6).toString("hex");
      state.entries[id] = {
        question: arg(0),
        answer: arg(1),
        source: opts.source ?? "agent",
        balance: 1.0,
        settlements: [],
      };
      return { entry_id: id };
    }
    case "decide": {
      const q = words(arg(0));
      for (const [id, e] of Object.entries(state.entries)) {
        if ([...words(e.question)].some((w) => q.has(w))) {
          const ticket = randomBytes(12).toString("hex");
          state.pending[ticket] = { entry: id };
          return { answer: `${e.answer}\n[fake annotation]`, ticket_id: ticket, silent: false };
        }
      }
      return { answer: null, ticket_id: null, silent: true };
    }
    case "settle": {
      const [ticket, deltaText] = [arg(0), arg(1)];
      const delta = Number(deltaText);
      if (!Number.isFinite(delta)) return { error: "delta must be a finite number", code: "bad_input" };
      const p = state.pending[ticket];
      if (!p) return { settled: false };
      delete state.pending[ticket];
      const e = state.entries[p.entry];
      if (e) {
        const credit = 0.6 * Math.tanh(delta / scale);
        e.balance += credit;
        e.settlements.push({ ticket, delta, credit, detail: opts.detail ?? "" });
      }
      return { settled: true };
    }
    case "abandon": {
      const ticket = arg(0);
      if (!state.pending[ticket]) return { abandoned: false };
      delete state.pending[ticket];
      return { abandoned: true };
    }
    case "forget": {
      const id = arg(0);
      if (Object.values(state.pending).some((p) => p.entry === id)) {
        return { forgotten: false, reason: "escrowed by a pending ticket" };
      }
      if (!state.entries[id]) return { forgotten: false };
      delete state.entries[id];
      return { forgotten: true };
    }
    case "tick": {
      state.tick += 1;
      const n = Object.keys(state.entries).length;
      return {
        tick: state.tick,
        population: n,
        deaths: 0,
        merges: 0,
        pending: Object.keys(state.pending).length,
        expired: 0,
        total_energy: n,
        upkeep_charged: 0,
      };
    }
    case "stats":
      return {
        alive: Object.keys(state.entries).length,
        graveyard: 0,
        pending_tickets: Object.keys(state.pending).length,
        total_energy: 0,
        energy_share_by_kind: {},
      };
    default:
      return { error: `unknown op ${op}`, code: "usage" };
  }
}
