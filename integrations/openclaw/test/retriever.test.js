// The `retriever` option against the real CLI ($DARWIN_MEMO_COMMAND, else
// `darwin-memo` on PATH; the tests fail without it), over the serve process and
// over one-shot commands: the plugin passes `--retriever NAME` on every ledger
// call, darwin-memo records it in a store on first use, and a store that recorded
// another retriever refuses the plugin's calls with a bad_input error the tools
// report. Only lexical is ever opened, so the embeddings extra is not needed.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { register } from "../index.js";
import { createFakeApi, findDarwinMemo, tempDir, text } from "../testing/harness.js";

const CLI = findDarwinMemo();

/** Run darwin-memo; its JSON object, error or not. */
function cli(...args) {
  try {
    return JSON.parse(execFileSync(CLI.command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }));
  } catch (err) {
    if (typeof err.stdout === "string" && err.stdout.trim()) return JSON.parse(err.stdout);
    throw err;
  }
}

let tmp;
beforeEach(() => {
  tmp = tempDir("oc-darwin-retriever-");
});
afterEach(() => tmp.cleanup());

const MODES = [
  ["serve", true],
  ["one-shot", false],
];

/** A registered plugin using `store` with the given retriever config. */
function plugin(store, retriever, serve) {
  assert.ok(CLI.command, CLI.problem);
  const config = { command: CLI.command, memoryPath: store, commandTimeoutMs: 60000 };
  if (retriever !== undefined) config.retriever = retriever;
  const api = createFakeApi({ pluginConfig: config, stateDir: tmp.dir });
  const rt = register(api, { serve });
  return { api, rt };
}

describe("the retriever option", () => {
  for (const [mode, serve] of MODES) {
    it(`a store recorded as lexical refuses retriever "hybrid", and the tools say why (${mode})`, async () => {
      const store = path.join(tmp.dir, "lessons.db");
      assert.ok(CLI.command, CLI.problem);
      assert.ok(cli("ledger", store, "--retriever", "lexical", "add", "Which port does the api use?", "8443.").entry_id);

      const { api, rt } = plugin(store, "hybrid", serve);
      try {
        const recall = await api.call("memory_recall", { query: "which port does the api use" }, { sessionKey: "s" });
        assert.equal(recall.details.error, true);
        assert.equal(recall.details.code, "bad_input");
        assert.match(text(recall), /searched with the lexical retriever, not hybrid/);
        const stored = await api.call("memory_store", { question: "Who owns billing?", answer: "Team Kappa." });
        assert.equal(stored.details.code, "bad_input");
        assert.match(text(stored), /not hybrid/);
        assert.equal(rt.ledger.serving, serve, "the refusal came through the mode under test");
      } finally {
        await api.stopServices();
      }
      // Refused before anything was written: still one entry, no ticket, still lexical.
      const stats = cli("ledger", store, "stats");
      assert.equal(stats.alive, 1);
      assert.equal(stats.pending_tickets, 0);
      assert.match(cli("ledger", store, "--retriever", "hybrid", "stats").error, /lexical retriever, not hybrid/);
    });

    it(`passes the configured retriever on every call, and darwin-memo records it (${mode})`, async () => {
      const store = path.join(tmp.dir, "memory.json");
      const { api, rt } = plugin(store, "lexical", serve);
      try {
        const stored = await api.call("memory_store", { question: "Which port does the api use?", answer: "8443." });
        assert.ok(stored.details.entryId, text(stored));
        const recall = await api.call("memory_recall", { query: "which port does the api use" }, { sessionKey: "s" });
        assert.match(text(recall), /8443/);
        assert.equal(rt.ledger.serving, serve);
        if (serve) assert.equal(rt.ledger.serve.starts, 1, "every call went to the one serve process");
      } finally {
        await api.stopServices();
      }
      // The plugin's first call recorded the choice in the store...
      assert.deepEqual(JSON.parse(readFileSync(store, "utf8")).retriever, { name: "lexical" });
      // ...which darwin-memo now holds every caller to.
      const refusal = cli("ledger", store, "--retriever", "hybrid", "stats");
      assert.equal(refusal.code, "bad_input");
      assert.match(refusal.error, /lexical retriever, not hybrid/);
    });

    it(`unset says nothing: the store's recorded choice applies, and a new store records none (${mode})`, async () => {
      const recorded = path.join(tmp.dir, "recorded.json");
      assert.ok(CLI.command, CLI.problem);
      cli("ledger", recorded, "--retriever", "lexical", "add", "Can I delete logs/?", "Only after thirty days.");
      const fresh = path.join(tmp.dir, "fresh.json");
      for (const store of [recorded, fresh]) {
        const { api } = plugin(store, undefined, serve);
        try {
          const stored = await api.call("memory_store", { question: "Which port does the api use?", answer: "8443." });
          assert.ok(stored.details.entryId, text(stored));
          assert.match(text(await api.call("memory_recall", { query: "which port does the api use" }, { sessionKey: "s" })), /8443/);
        } finally {
          await api.stopServices();
        }
      }
      assert.deepEqual(JSON.parse(readFileSync(recorded, "utf8")).retriever, { name: "lexical" });
      assert.equal(JSON.parse(readFileSync(fresh, "utf8")).retriever, undefined);
    });
  }
});
