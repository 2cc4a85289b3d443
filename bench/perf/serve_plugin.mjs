// A recall and its settlement through the OpenClaw plugin's own code, over one
// `darwin-memo ledger STORE serve` process and over one-shot processes.
//
//     node bench/perf/serve_plugin.mjs STORE [RUNS]      (bench/perf/serve.py --plugin runs it)
//
// `darwin-memo` must be on PATH. Each run is memory_recall (decide, ticket filed in
// the plugin's book) then agent_end (settle, book updated), timed together, as a
// gateway does them; the host `api` is the test harness's stand-in. Prints one JSON
// object on its last line.

import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const { register } = await import(path.join(ROOT, "integrations/openclaw/index.js"));
const { createFakeApi, tempDir } = await import(path.join(ROOT, "integrations/openclaw/testing/harness.js"));

const [store, runsArg] = process.argv.slice(2);
const runs = Number(runsArg ?? 20);
const QUERIES = [
  "restart the api worker when the queue hangs",
  "is it safe to delete the logs of the worker",
  "why does the api time out after the deploy",
  "restart the web service after editing the config",
];

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(s.length * q))];
  return { runs: s.length, p50_ms: +at(0.5).toFixed(2), p90_ms: +at(0.9).toFixed(2), min_ms: +s[0].toFixed(2) };
}

async function measure(serve) {
  const tmp = tempDir("dm-serve-plugin-");
  try {
    const api = createFakeApi({
      pluginConfig: { command: "darwin-memo", memoryPath: store, commandTimeoutMs: 120000 },
      stateDir: tmp.dir,
    });
    const rt = register(api, { serve });
    await rt.ledger.stats(); // start-up (and serve's process) outside the timings
    const times = [];
    let tickets = 0;
    for (let i = 0; i < runs; i++) {
      const session = `bench-${serve}-${i}`;
      const t = performance.now();
      const res = await api.call("memory_recall", { query: QUERIES[i % QUERIES.length] }, { sessionKey: session });
      await api.emit("agent_end", { success: true, durationMs: 1 }, { sessionKey: session });
      times.push(performance.now() - t);
      if (res.details.ticketId) tickets += 1;
    }
    rt.ledger.close();
    return { ...stats(times), tickets_settled: tickets, serving: rt.ledger.serving };
  } finally {
    tmp.cleanup();
  }
}

const oneShot = await measure(false);
const served = await measure(true);
console.log(
  JSON.stringify({
    what: "memory_recall + agent_end through the plugin (decide, book, settle, book)",
    serve: served,
    one_shot: oneShot,
    speedup_p50: +(oneShot.p50_ms / served.p50_ms).toFixed(1),
  }),
);
