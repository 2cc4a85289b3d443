import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";

import plugin from "../index.js";
import { ConfigError, DEFAULTS, PLUGIN_ID, RETRIEVERS, resolveConfig, resolveStateDir } from "../src/config.js";
import { TOOL_NAMES } from "../src/tools.js";

const manifest = JSON.parse(readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"));
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

describe("manifest and package", () => {
  it("declares a memory plugin with the tools it registers", () => {
    assert.equal(manifest.id, PLUGIN_ID);
    assert.equal(manifest.kind, "memory");
    assert.deepEqual([...manifest.contracts.tools].sort(), [...TOOL_NAMES].sort());
    assert.equal(plugin.id, PLUGIN_ID);
    assert.equal(plugin.kind, "memory");
    assert.equal(typeof plugin.register, "function");
  });

  it("schema defaults are the code's defaults, and it knows every key", () => {
    const props = manifest.configSchema.properties;
    assert.equal(manifest.configSchema.additionalProperties, false);
    assert.deepEqual(Object.keys(props).sort(), Object.keys(DEFAULTS).sort());
    for (const [key, value] of Object.entries(DEFAULTS)) {
      if (value === null) assert.equal(props[key].default, undefined, key);
      else assert.equal(props[key].default, value, key);
    }
  });

  it("seed defaults: +1/-1, scale 1, 24 h tick, 15 s timeout", () => {
    assert.equal(DEFAULTS.command, "darwin-memo");
    assert.equal(DEFAULTS.resourceScale, 1.0);
    assert.equal(DEFAULTS.successDelta, 1.0);
    assert.equal(DEFAULTS.failureDelta, -1.0);
    assert.equal(DEFAULTS.tickIntervalHours, 24);
    assert.equal(DEFAULTS.commandTimeoutMs, 15000);
  });

  it("package.json is an ES module with no dependencies and points OpenClaw at index.js", () => {
    assert.equal(pkg.type, "module");
    assert.equal(pkg.dependencies, undefined);
    assert.equal(pkg.devDependencies, undefined);
    assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
    assert.equal(pkg.version, manifest.version);
  });
});

describe("resolveConfig", () => {
  const stateDir = path.join(path.sep, "state");

  it("fills every default and derives the paths from the state dir", () => {
    const { config, warnings } = resolveConfig(undefined, { stateDir });
    assert.equal(config.command, "darwin-memo");
    assert.equal(config.memoryPath, path.join(stateDir, "memory", "darwin", "memory.json"));
    assert.equal(config.ticketsPath, path.join(stateDir, "memory", "darwin", "tickets.json"));
    assert.equal(config.successDelta, 1);
    assert.equal(config.failureDelta, -1);
    assert.equal(config.commandTimeoutMs, 15000);
    assert.deepEqual(warnings, []);
    assert.ok(Object.isFrozen(config));
  });

  it("keeps given values and resolves ~ and relative paths", () => {
    const { config } = resolveConfig(
      {
        command: "~/venv/bin/darwin-memo",
        memoryPath: "mem/lessons.db",
        resourceScale: 2,
        successDelta: 2,
        failureDelta: -2,
        tickIntervalHours: 0,
        commandTimeoutMs: 500,
        maxTicketAgeHours: 1,
      },
      { stateDir },
    );
    assert.equal(config.command, path.join(homedir(), "venv", "bin", "darwin-memo"));
    assert.equal(config.memoryPath, path.join(stateDir, "mem", "lessons.db"));
    assert.equal(config.resourceScale, 2);
    assert.equal(config.tickIntervalHours, 0);
    assert.equal(config.commandTimeoutMs, 500);
  });

  it("retriever: unset says nothing (null); each documented name is kept", () => {
    assert.equal(resolveConfig({}, { stateDir }).config.retriever, null);
    for (const name of RETRIEVERS) assert.equal(resolveConfig({ retriever: name }, { stateDir }).config.retriever, name);
    assert.deepEqual(manifest.configSchema.properties.retriever.enum, [...RETRIEVERS]);
  });

  it("leaves a bare command name for PATH lookup", () => {
    const { config } = resolveConfig({ command: "darwin-memo" }, { stateDir });
    assert.equal(config.command, "darwin-memo");
  });

  const bad = [
    [{ command: "" }, /command/],
    [{ command: 3 }, /command/],
    [{ memoryPath: "  " }, /memoryPath/],
    [{ resourceScale: 0 }, /resourceScale/],
    [{ resourceScale: -1 }, /resourceScale/],
    [{ resourceScale: "1" }, /resourceScale/],
    [{ successDelta: Number.NaN }, /successDelta/],
    [{ failureDelta: Number.POSITIVE_INFINITY }, /failureDelta/],
    [{ failureDelta: "-1" }, /failureDelta/],
    [{ tickIntervalHours: null }, /tickIntervalHours/],
    [{ commandTimeoutMs: 50 }, /commandTimeoutMs/],
    [{ commandTimeoutMs: 1500.5 }, /commandTimeoutMs/],
    [{ commandTimeoutMs: 10_000_000 }, /commandTimeoutMs/],
    [{ maxTicketAgeHours: 0 }, /maxTicketAgeHours/],
    [{ retriever: "bm25" }, /retriever must be one of "lexical", "hybrid", "semantic" \(got "bm25"\)/],
    [{ retriever: "Hybrid" }, /retriever must be one of/],
    [{ retriever: "" }, /retriever must be one of/],
    [{ retriever: 1 }, /retriever must be one of/],
    [{ memoryPaht: "/x" }, /unknown key "memoryPaht"/],
    [[], /must be an object/],
    ["x", /must be an object/],
  ];
  for (const [raw, pattern] of bad) {
    it(`rejects ${JSON.stringify(raw)}`, () => {
      assert.throws(() => resolveConfig(raw, { stateDir }), (err) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, pattern);
        return true;
      });
    });
  }

  it("names every bad key at once", () => {
    assert.throws(
      () => resolveConfig({ resourceScale: 0, commandTimeoutMs: 1 }, { stateDir }),
      (err) => err.problems.length === 2,
    );
  });

  it("warns about deltas that do not reward success or punish failure", () => {
    assert.equal(resolveConfig({ successDelta: 0 }, { stateDir }).warnings.length, 1);
    assert.equal(resolveConfig({ failureDelta: 0.5 }, { stateDir }).warnings.length, 1);
    assert.match(resolveConfig({ successDelta: 3 }, { stateDir }).warnings[0], /asymmetric/);
  });

  it("state dir: host first, then $OPENCLAW_STATE_DIR, then ~/.openclaw", () => {
    const api = { runtime: { state: { resolveStateDir: () => "/from/host" } } };
    assert.equal(resolveStateDir(api, { OPENCLAW_STATE_DIR: "/from/env" }), "/from/host");
    assert.equal(resolveStateDir({}, { OPENCLAW_STATE_DIR: "/from/env" }), "/from/env");
    const broken = { runtime: { state: { resolveStateDir: () => { throw new Error("no"); } } } };
    assert.equal(resolveStateDir(broken, {}), path.join(homedir(), ".openclaw"));
  });
});
