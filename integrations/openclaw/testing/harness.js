// Test support (not a test file): a fake OpenClaw plugin `api` that records what
// the plugin registers and lets a test call tools, fire hooks and run services,
// plus helpers for temporary state directories and the fake darwin-memo CLI.

import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

export function createFakeApi({ pluginConfig, stateDir, registrationMode = "full" } = {}) {
  const logs = [];
  const log = (level) => (msg) => logs.push({ level, msg });
  const api = {
    id: "openclaw-memory-darwin",
    name: "Memory (darwin-memo)",
    registrationMode,
    pluginConfig,
    runtime: { state: { resolveStateDir: () => stateDir } },
    logger: { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") },
    resolvePath: (p) => p,

    // What the plugin registered.
    logs,
    toolRegistrations: [],
    hooks: {},
    services: [],
    memoryCapabilities: [],

    registerTool(tool, opts) {
      this.toolRegistrations.push({ tool, opts });
    },
    on(name, handler, opts) {
      (this.hooks[name] ??= []).push({ handler, opts });
    },
    registerService(service) {
      this.services.push(service);
    },
    registerMemoryCapability(capability) {
      this.memoryCapabilities.push(capability);
    },

    // Driving the plugin the way the host would.
    tools(ctx = {}) {
      const out = {};
      for (const { tool } of this.toolRegistrations) {
        const made = typeof tool === "function" ? tool(ctx) : tool;
        for (const t of [made].flat().filter(Boolean)) out[t.name] = t;
      }
      return out;
    },
    async call(toolName, params, ctx = {}) {
      const tool = this.tools(ctx)[toolName];
      if (!tool) throw new Error(`no tool ${toolName}`);
      return tool.execute(`call-${Math.random().toString(16).slice(2)}`, params);
    },
    async emit(hookName, event, ctx = {}) {
      return Promise.all((this.hooks[hookName] ?? []).map(({ handler }) => handler(event, ctx)));
    },
    async startServices() {
      for (const s of this.services) await s.start({ stateDir, logger: this.logger, config: {} });
    },
    async stopServices() {
      for (const s of this.services) await s.stop?.({ stateDir, logger: this.logger, config: {} });
    },
    messages(level) {
      return logs.filter((l) => !level || l.level === level).map((l) => l.msg);
    },
  };
  return api;
}

/** A fresh temporary directory, removed by `cleanup()`. */
export function tempDir(prefix = "oc-darwin-") {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** An executable that runs the fake CLI with this Node (no PATH or shebang games). */
export function fakeCommand(dir) {
  const script = path.join(HERE, "fake-darwin-memo.mjs");
  const wrapper = path.join(dir, "fake-darwin-memo");
  writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`);
  chmodSync(wrapper, 0o755);
  return wrapper;
}

export function readJson(file) {
  return JSON.parse(readFileSync(file, "utf8"));
}

export function readLines(file) {
  try {
    return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  } catch (err) {
    if (err.code === "ENOENT") return [];
    throw err;
  }
}

export function setBehaviour(memoryPath, behaviour) {
  writeFileSync(`${memoryPath}.behaviour.json`, JSON.stringify(behaviour));
}

export function text(result) {
  return result.content.map((c) => c.text).join("\n");
}

/**
 * The real darwin-memo CLI: $DARWIN_MEMO_COMMAND, else `darwin-memo` on PATH.
 * Returns { command } or { problem } (tests that need it fail, never skip).
 */
export function findDarwinMemo() {
  const isExecutable = (p) => {
    try {
      accessSync(p, constants.X_OK);
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  const fromEnv = process.env.DARWIN_MEMO_COMMAND;
  if (fromEnv) {
    return isExecutable(fromEnv)
      ? { command: fromEnv }
      : { problem: `DARWIN_MEMO_COMMAND=${fromEnv} is not an executable file` };
  }
  const names = process.platform === "win32" ? ["darwin-memo.exe", "darwin-memo.cmd"] : ["darwin-memo"];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)) {
    for (const name of names) {
      if (isExecutable(path.join(dir, name))) return { command: path.join(dir, name) };
    }
  }
  return {
    problem:
      "the darwin-memo CLI was not found: set DARWIN_MEMO_COMMAND to its path or put it on PATH " +
      "(e.g. `pip install -e .` in the repository, then activate that environment)",
  };
}

