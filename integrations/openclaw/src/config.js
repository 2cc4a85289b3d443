// Plugin configuration: defaults, validation and path resolution.
//
// OpenClaw validates `plugins.entries.<id>.config` against the JSON Schema in
// openclaw.plugin.json before any plugin code runs. We validate again here, with
// the same rules, because the schema is not enforced by every loader (older hosts,
// tests, `openclaw plugins inspect`), and because a bad value must fail with a
// message that names the key. test/config.test.js keeps the two in step.

import { homedir } from "node:os";
import path from "node:path";

export const PLUGIN_ID = "openclaw-memory-darwin";

export const DEFAULTS = Object.freeze({
  command: "darwin-memo",
  memoryPath: null, // <stateDir>/memory/darwin/memory.json
  resourceScale: 1.0,
  successDelta: 1.0,
  failureDelta: -1.0,
  tickIntervalHours: 24,
  commandTimeoutMs: 15000,
  maxTicketAgeHours: 24,
  retriever: null, // say nothing: the store's recorded retriever (lexical if none) applies
});

/** The retriever names `darwin-memo ledger --retriever` accepts (docs/retrieval.md). */
export const RETRIEVERS = Object.freeze(["lexical", "hybrid", "semantic"]);

export const TIMEOUT_MIN_MS = 100;
export const TIMEOUT_MAX_MS = 600000;

export class ConfigError extends Error {
  constructor(problems) {
    super(`invalid ${PLUGIN_ID} config: ${problems.join("; ")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

// One checker per key: returns a problem string, or null when the value is fine.
const CHECKS = {
  command: (v) =>
    typeof v === "string" && v.trim() !== "" && !v.includes("\0")
      ? null
      : "command must be a non-empty string (a PATH name or an absolute path)",
  memoryPath: (v) =>
    typeof v === "string" && v.trim() !== "" && !v.includes("\0")
      ? null
      : "memoryPath must be a non-empty string",
  resourceScale: (v) => (isNumber(v) && v > 0 ? null : "resourceScale must be a number > 0"),
  successDelta: (v) => (isNumber(v) ? null : "successDelta must be a finite number"),
  failureDelta: (v) => (isNumber(v) ? null : "failureDelta must be a finite number"),
  tickIntervalHours: (v) =>
    isNumber(v) ? null : "tickIntervalHours must be a finite number (<= 0 disables the tick)",
  commandTimeoutMs: (v) =>
    Number.isInteger(v) && v >= TIMEOUT_MIN_MS && v <= TIMEOUT_MAX_MS
      ? null
      : `commandTimeoutMs must be a whole number from ${TIMEOUT_MIN_MS} to ${TIMEOUT_MAX_MS}`,
  maxTicketAgeHours: (v) => (isNumber(v) && v > 0 ? null : "maxTicketAgeHours must be a number > 0"),
  retriever: (v) =>
    RETRIEVERS.includes(v) ? null : `retriever must be one of ${RETRIEVERS.map((r) => JSON.stringify(r)).join(", ")}`,
};

/** The state directory: the host's answer, else $OPENCLAW_STATE_DIR, else ~/.openclaw. */
export function resolveStateDir(api, env = process.env) {
  try {
    const dir = api?.runtime?.state?.resolveStateDir?.();
    if (typeof dir === "string" && dir !== "") return dir;
  } catch {
    // fall through to the documented default
  }
  if (env.OPENCLAW_STATE_DIR) return env.OPENCLAW_STATE_DIR;
  return path.join(homedir(), ".openclaw");
}

function expandHome(p) {
  if (p === "~") return homedir();
  if (p.startsWith("~/") || p.startsWith("~\\")) return path.join(homedir(), p.slice(2));
  return p;
}

/**
 * Check raw config and fill in defaults. Throws ConfigError naming every bad key.
 * Returns { config, warnings }; config is frozen and carries absolute paths.
 */
export function resolveConfig(raw, { stateDir, resolvePath } = {}) {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError(["config must be an object"]);
  }
  const problems = [];
  for (const key of Object.keys(raw)) {
    if (!(key in CHECKS)) problems.push(`unknown key ${JSON.stringify(key)}`);
  }
  const merged = { ...DEFAULTS };
  for (const key of Object.keys(CHECKS)) {
    if (raw[key] === undefined) continue;
    const problem = CHECKS[key](raw[key]);
    if (problem) problems.push(`${problem} (got ${JSON.stringify(raw[key])})`);
    else merged[key] = typeof raw[key] === "string" ? raw[key].trim() : raw[key];
  }
  if (problems.length) throw new ConfigError(problems);

  const base = stateDir ?? resolveStateDir(undefined);
  const resolve = (p) => {
    let out = p;
    if (typeof resolvePath === "function") {
      try {
        out = resolvePath(p) || p;
      } catch {
        out = p;
      }
    }
    return path.resolve(base, expandHome(out));
  };
  const darwinDir = path.join(base, "memory", "darwin");
  merged.memoryPath = merged.memoryPath ? resolve(merged.memoryPath) : path.join(darwinDir, "memory.json");
  // A bare name is looked up on PATH by the OS; anything with a separator is a path.
  if (/[\\/]/.test(merged.command) || merged.command.startsWith("~")) {
    merged.command = resolve(merged.command);
  }
  merged.stateDir = base;
  merged.ticketsPath = path.join(darwinDir, "tickets.json");

  const warnings = [];
  if (merged.successDelta <= 0) {
    warnings.push(`successDelta is ${merged.successDelta}: successful runs will not pay recalled lessons`);
  }
  if (merged.failureDelta >= 0) {
    warnings.push(`failureDelta is ${merged.failureDelta}: failing runs will not cost recalled lessons`);
  }
  if (
    merged.successDelta > 0 &&
    merged.failureDelta < 0 &&
    merged.successDelta !== -merged.failureDelta
  ) {
    warnings.push(
      `successDelta ${merged.successDelta} and failureDelta ${merged.failureDelta} are asymmetric: ` +
        "the economy leans toward one outcome",
    );
  }
  return { config: Object.freeze(merged), warnings };
}
