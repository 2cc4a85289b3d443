// End to end: the plugin's own shell-out code against the real darwin-memo CLI.
//
// The CLI is $DARWIN_MEMO_COMMAND, else `darwin-memo` on PATH. These tests fail,
// they do not skip, when it cannot be found: a green run must mean the plugin
// really drove the ledger.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { register } from "../index.js";
import { createFakeApi, findDarwinMemo, readJson, tempDir, text } from "../testing/harness.js";

const CLI = findDarwinMemo();
const credit = (delta, scale = 1) => 0.6 * Math.tanh(delta / scale);

function cli(...args) {
  return JSON.parse(execFileSync(CLI.command, args, { encoding: "utf8" }));
}

let tmp;
beforeEach(() => {
  tmp = tempDir("oc-darwin-e2e-");
});
afterEach(() => tmp.cleanup());

function gateway(config = {}) {
  assert.ok(CLI.command, CLI.problem);
  const api = createFakeApi({
    pluginConfig: { command: CLI.command, commandTimeoutMs: 60000, ...config },
    stateDir: tmp.dir,
  });
  const rt = register(api);
  return { api, rt };
}

const ticketsPath = () => path.join(tmp.dir, "memory", "darwin", "tickets.json");
const book = () => (existsSync(ticketsPath()) ? readJson(ticketsPath()) : { open: [], outbox: [] });
const why = (rt, id) => cli("why", rt.config.memoryPath, id, "--json");
const stats = (rt) => cli("ledger", rt.config.memoryPath, "stats");

async function addLesson(api, question, answer) {
  const res = await api.call("memory_store", { question, answer, source: "e2e" });
  assert.ok(res.details.entryId, text(res));
  return res.details.entryId;
}

describe("with the real darwin-memo CLI", () => {
  it("finds the darwin-memo CLI", () => {
    assert.ok(CLI.command, CLI.problem);
    const version = execFileSync(CLI.command, ["--version"], { encoding: "utf8" });
    assert.match(version, /darwin-memo/);
  });

  it("a recall opens a ticket and agent_end settles it: the balance moves by the credit", async () => {
    const { api, rt } = gateway({ resourceScale: 2 });
    assert.equal(path.basename(rt.config.memoryPath), "memory.json");
    const id = await addLesson(
      api,
      "How should I deploy the billing service?",
      "Use the blue-green script deploy.sh; never kubectl apply directly.",
    );
    const before = why(rt, id).balance;

    const silent = await api.call("memory_recall", { query: "what colour is the office cat" }, { sessionKey: "s1" });
    assert.equal(silent.details.silent, true, text(silent));

    const res = await api.call("memory_recall", { query: "how do I deploy the billing service" }, { sessionKey: "s1" });
    assert.match(text(res), /blue-green script deploy\.sh/);
    const ticket = res.details.ticketId;
    assert.ok(ticket);
    assert.deepEqual(book().open.map((t) => [t.ticket, t.session]), [[ticket, "s1"]]);
    assert.equal(stats(rt).pending_tickets, 1);

    await api.emit("agent_end", { success: true, durationMs: 4200, messages: [] }, { sessionKey: "s1" });

    assert.deepEqual(book().open, []);
    assert.deepEqual(book().outbox, []);
    assert.equal(stats(rt).pending_tickets, 0);
    const life = why(rt, id);
    assert.equal(life.settlements.length, 1);
    const [s] = life.settlements;
    assert.equal(s.ticket, ticket);
    assert.equal(s.delta, 1);
    assert.equal(s.detail, "openclaw agent_end success=true durationMs=4200 error=none");
    assert.ok(Math.abs(s.credit - credit(1, 2)) < 1e-5, `credit ${s.credit}`);
    assert.ok(Math.abs(life.balance - (before + credit(1, 2))) < 1e-3, `balance ${life.balance}`);
  });

  it("a failing run charges the recalled lesson failureDelta", async () => {
    const { api, rt } = gateway();
    const id = await addLesson(api, "Can I delete files under logs/?", "Only after thirty days.");
    await api.call("memory_recall", { query: "delete files under logs" }, { sessionKey: "s1" });
    await api.emit("agent_end", { success: false, error: "exec failed" }, { sessionKey: "s1" });
    const life = why(rt, id);
    assert.equal(life.settlements.length, 1);
    assert.equal(life.settlements[0].delta, -1);
    assert.match(life.settlements[0].detail, /success=false .*error="exec failed"/);
    assert.ok(Math.abs(life.balance - (1 + credit(-1))) < 1e-3, `balance ${life.balance}`);
  });

  it("a ticket opened before a gateway restart is settled after it", async () => {
    const first = gateway();
    const id = await addLesson(first.api, "Which port does the api listen on?", "8443, behind the proxy.");
    await first.api.call("memory_recall", { query: "which port does the api listen on" }, { sessionKey: "s1" });
    const second = gateway();
    await second.api.emit("agent_end", { success: true }, { sessionKey: "s1" });
    assert.equal(why(second.rt, id).settlements.length, 1);
    assert.equal(stats(second.rt).pending_tickets, 0);
  });

  for (const store of ["memory.json", "memory.db"]) {
    it(`eight overlapping sessions recalling and ending at once lose nothing (${store})`, async () => {
      const { api, rt } = gateway({ memoryPath: path.join(tmp.dir, store) });
      const id = await addLesson(api, "How do I rotate the TLS certificate?", "Run certs/rotate.sh, then reload nginx.");
      const sessions = Array.from({ length: 8 }, (_, i) => `agent:main:session-${i}`);

      const recalls = await Promise.all(
        sessions.map((s) => api.call("memory_recall", { query: "rotate the TLS certificate" }, { sessionKey: s })),
      );
      const tickets = recalls.map((r) => r.details.ticketId);
      assert.equal(new Set(tickets).size, 8, JSON.stringify(recalls.map(text)));
      assert.equal(book().open.length, 8);
      assert.equal(stats(rt).pending_tickets, 8);

      await Promise.all(
        sessions.map((s, i) => api.emit("agent_end", { success: i % 4 !== 0, durationMs: i }, { sessionKey: s })),
      );

      assert.deepEqual(book().open, []);
      assert.deepEqual(book().outbox, []);
      assert.equal(stats(rt).pending_tickets, 0);
      const life = why(rt, id);
      assert.deepEqual(life.settlements.map((s) => s.ticket).sort(), [...tickets].sort());
      const total = life.settlements.reduce((sum, s) => sum + s.credit, 0);
      assert.ok(Math.abs(total - (6 * credit(1) + 2 * credit(-1))) < 1e-4, `credits ${total}`);
      assert.ok(Math.abs(life.balance - (1 + total)) < 1e-3, `balance ${life.balance}`);
    });
  }

  it("two gateways sharing a state directory lose nothing either", async () => {
    const a = gateway();
    const b = gateway();
    const id = await addLesson(a.api, "Where do build artifacts go?", "Into dist/, never into the repo root.");
    const runs = Array.from({ length: 8 }, (_, i) => ({ gw: i % 2 ? a : b, session: `s${i}` }));
    const recalls = await Promise.all(
      runs.map(({ gw, session }) => gw.api.call("memory_recall", { query: "where do build artifacts go" }, { sessionKey: session })),
    );
    assert.equal(new Set(recalls.map((r) => r.details.ticketId)).size, 8);
    assert.equal(book().open.length, 8);
    await Promise.all(runs.map(({ gw, session }) => gw.api.emit("agent_end", { success: true }, { sessionKey: session })));
    assert.deepEqual(book().open, []);
    assert.deepEqual(book().outbox, []);
    assert.equal(why(a.rt, id).settlements.length, 8);
  });

  it("the background tick runs `ledger tick` when due", async () => {
    let clock = Date.parse("2026-01-01T00:00:00Z");
    assert.ok(CLI.command, CLI.problem);
    const api = createFakeApi({
      pluginConfig: { command: CLI.command, commandTimeoutMs: 60000, tickIntervalHours: 1 },
      stateDir: tmp.dir,
    });
    const rt = register(api, { now: () => clock });
    await addLesson(api, "Is cache/ safe to delete?", "Yes; it is rebuilt on start.");
    await rt.upkeep.tickIfDue();
    clock += 2 * 3600 * 1000;
    await rt.upkeep.tickIfDue();
    assert.match(api.messages("info").join("\n"), /ledger tick 1: population 1, deaths 0/);
    assert.equal(cli("top", rt.config.memoryPath, "--json").tick, 1);
  });
});
