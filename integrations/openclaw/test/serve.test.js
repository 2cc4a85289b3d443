// The plugin's one `darwin-memo ledger FILE serve` process, against the real CLI
// ($DARWIN_MEMO_COMMAND, else `darwin-memo` on PATH; the tests fail without it):
// it carries every call, comes back after kill -9 without losing or doubling a
// settlement, and gives way to one-shot commands where darwin-memo has no serve.

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { register } from "../index.js";
import { Ledger } from "../src/cli.js";
import { createFakeApi, findDarwinMemo, tempDir, text } from "../testing/harness.js";

const CLI = findDarwinMemo();
const PLUGIN_ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

function cli(...args) {
  return JSON.parse(execFileSync(CLI.command, args, { encoding: "utf8" }));
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let tmp;
beforeEach(() => {
  tmp = tempDir("oc-darwin-serve-");
});
afterEach(() => tmp.cleanup());

function ledgerAt(store, extra = {}) {
  assert.ok(CLI.command, CLI.problem);
  return new Ledger({
    command: CLI.command,
    memoryPath: path.join(tmp.dir, store),
    resourceScale: 1,
    timeoutMs: 60000,
    ...extra,
  });
}

/** A darwin-memo from before `serve`: the operation is unknown, as argparse says it. */
function olderDarwinMemo() {
  const wrapper = path.join(tmp.dir, "old-darwin-memo");
  writeFileSync(
    wrapper,
    [
      "#!/bin/sh",
      'for a in "$@"; do last="$a"; done',
      'if [ "$last" = serve ]; then',
      `  echo '{"error": "argument OP: invalid choice: '"'serve'"' (choose from ...)", "code": "usage"}'`,
      "  exit 2",
      "fi",
      `exec "${CLI.command}" "$@"`,
      "",
    ].join("\n"),
  );
  chmodSync(wrapper, 0o755);
  return wrapper;
}

describe("the serve process", () => {
  for (const store of ["memory.db", "memory.json"]) {
    it(`one process answers every call (${store})`, async () => {
      const ledger = ledgerAt(store);
      try {
        const { entry_id } = await ledger.add("-rf flags on rm?", "-- never without a path", "runbook");
        assert.ok(entry_id);
        const d = await ledger.decide("-rf flags on rm");
        assert.match(d.answer, /^-- never without a path/);
        assert.deepEqual(await ledger.settle(d.ticket_id, -1, "-detail with a dash"), { settled: true });
        assert.equal((await ledger.stats()).pending_tickets, 0);
        const lone = await ledger.decide("-"); // "-" cannot travel inline: a one-shot call
        assert.equal(lone.silent, true);
        assert.equal(ledger.serving, true);
        assert.equal(ledger.serve.starts, 1);
        // What serve wrote, the one-shot command reads.
        const life = cli("why", ledger.memoryPath, entry_id, "--json");
        assert.equal(life.settlements.length, 1);
        assert.equal(life.settlements[0].detail, "-detail with a dash");
      } finally {
        ledger.close();
      }
    });
  }

  it("kill -9 mid-stream: every settlement lands exactly once and verify is clean", async () => {
    const ledger = ledgerAt("memory.db");
    try {
      const { entry_id } = await ledger.add("How do I rotate the TLS certificate?", "Run certs/rotate.sh.", "e2e");
      const tickets = [];
      for (let i = 0; i < 40; i++) tickets.push((await ledger.decide("rotate the TLS certificate")).ticket_id);
      assert.equal(new Set(tickets).size, 40);
      const pid = ledger.serve.pid;
      assert.ok(pid);

      // All forty settlements in flight at once; the process dies after the first reply.
      let killed = false;
      const settles = tickets.map((t, i) => {
        const p = ledger.settle(t, i % 4 ? 1 : -1, `run ${i}`);
        if (i === 0) {
          p.then(() => {
            process.kill(pid, "SIGKILL");
            killed = true;
          });
        }
        return p;
      });
      const results = await Promise.all(settles);
      assert.ok(killed);
      assert.equal(ledger.serve.starts, 2, "restarted once");
      // A settlement that landed just before the kill is refused as already settled
      // when it is sent again; everything else lands now.
      for (const r of results) assert.ok(r.settled === true || r.settled === false, JSON.stringify(r));
      assert.ok(results.filter((r) => r.settled).length >= 1);

      const stats = await ledger.stats();
      assert.equal(stats.pending_tickets, 0);
      const life = cli("why", ledger.memoryPath, entry_id, "--json");
      assert.deepEqual(life.settlements.map((s) => s.ticket).sort(), [...tickets].sort(), "each exactly once");
      const verify = cli("ledger", ledger.memoryPath, "verify");
      assert.equal(verify.ok, true, JSON.stringify(verify.problems));
    } finally {
      ledger.close();
    }
  });

  it("a serve process that died while idle is started again on the next call", async () => {
    const ledger = ledgerAt("memory.db");
    try {
      await ledger.add("Where do build artifacts go?", "Into dist/.", "e2e");
      const first = ledger.serve.pid;
      process.kill(first, "SIGKILL");
      await new Promise((r) => setTimeout(r, 200));
      const d = await ledger.decide("where do build artifacts go");
      assert.ok(d.ticket_id);
      assert.notEqual(ledger.serve.pid, first);
      assert.equal(ledger.serve.starts, 2);
    } finally {
      ledger.close();
    }
  });

  it("falls back to one-shot commands when darwin-memo has no serve", async () => {
    const ledger = ledgerAt("memory.db", { command: olderDarwinMemo() });
    const { entry_id } = await ledger.add("Can I delete logs/?", "Only after thirty days.", "e2e");
    const d = await ledger.decide("delete logs");
    assert.ok(d.ticket_id);
    assert.equal(ledger.serving, false);
    assert.deepEqual(await ledger.settle(d.ticket_id, 1, "ok"), { settled: true });
    assert.equal(cli("why", ledger.memoryPath, entry_id, "--json").settlements.length, 1);
    assert.equal(ledger.serve.starts, 1, "asked once, then never again");
  });

  it("through the plugin: a recall and its settlement over serve, and over one-shot", async () => {
    for (const command of [CLI.command, olderDarwinMemo()]) {
      const api = createFakeApi({ pluginConfig: { command, commandTimeoutMs: 60000 }, stateDir: tmp.dir });
      const rt = register(api);
      const stored = await api.call("memory_store", { question: "Which port does the api use?", answer: "8443." });
      const res = await api.call("memory_recall", { query: "which port does the api use" }, { sessionKey: "s" });
      assert.match(text(res), /8443/);
      await api.emit("agent_end", { success: true }, { sessionKey: "s" });
      const life = cli("why", rt.config.memoryPath, stored.details.entryId, "--json");
      assert.equal(life.settlements.length, 1);
      assert.equal(rt.ledger.serving, command === CLI.command);
      await api.stopServices();
    }
  });

  it("an idle serve process does not keep the gateway's Node process alive", async () => {
    assert.ok(CLI.command, CLI.problem);
    const script = [
      `import { Ledger } from ${JSON.stringify(path.join(PLUGIN_ROOT, "src", "cli.js"))};`,
      `const l = new Ledger({ command: ${JSON.stringify(CLI.command)}, memoryPath: ${JSON.stringify(path.join(tmp.dir, "m.db"))}, resourceScale: 1, timeoutMs: 60000 });`,
      "const s = await l.stats();",
      "console.log(JSON.stringify({ serving: l.serving, pid: l.serve.pid, store: s.store }));",
      "// no close(): the process must still end",
    ].join("\n");
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const code = await new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error("the Node process did not end within 20 s"));
      }, 20000);
      child.on("close", (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    assert.equal(code, 0);
    const got = JSON.parse(out);
    assert.equal(got.serving, true);
    assert.equal(got.store, "missing");
    // Its serve process saw end of input and left too.
    for (let i = 0; i < 50 && pidAlive(got.pid); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(pidAlive(got.pid), false);
  });
});
