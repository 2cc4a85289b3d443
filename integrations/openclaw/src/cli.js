// Shelling out to `darwin-memo ledger FILE --scale S [--retriever NAME] OP ...`.
//
// Every ledger operation is one short-lived process that prints one JSON object.
// A failure is either that process's own JSON error ({"error", "code"}, non-zero
// exit), or something around it: the executable is missing, it ran past the
// time limit (we kill its whole process group), or it printed something that is
// not JSON (an older darwin-memo printed tracebacks). All of them become a
// CliError with a `code` and a `transient` flag: transient failures are worth
// retrying later, the others (bad input, usage) never will succeed.
//
// The store does its own locking, so calls may overlap; we still cap how many
// run at once per store so a burst of sessions does not start a crowd of Python
// interpreters on a small machine. The time limit covers the process, not the
// wait for a slot.

import { spawn } from "node:child_process";

import { ServeProcess, ServeUnavailable } from "./serve.js";

const MAX_OUTPUT_BYTES = 8 * 1024 * 1024;
const KILL_GRACE_MS = 1000;
const PERMANENT_CODES = new Set(["bad_input", "usage"]);
const MAX_PARALLEL_PER_STORE = 4;
const LOCKED_RETRIES = 2;

export class CliError extends Error {
  constructor(message, { code = "error", exitCode = null, stderr = "" } = {}) {
    super(message);
    this.name = "CliError";
    this.code = code;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }

  get transient() {
    return !PERMANENT_CODES.has(this.code);
  }
}

function tail(text, n = 400) {
  const t = String(text ?? "").trim();
  return t.length > n ? `...${t.slice(-n)}` : t;
}

function lastJsonObject(stdout) {
  const lines = stdout.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  for (let i = lines.length - 1; i >= 0; i--) {
    if (!lines[i].startsWith("{")) continue;
    try {
      const value = JSON.parse(lines[i]);
      if (value && typeof value === "object" && !Array.isArray(value)) return value;
    } catch {
      // not this line
    }
  }
  // Pretty-printed output (several lines): try the whole thing.
  try {
    const value = JSON.parse(stdout);
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  } catch {
    // not JSON at all
  }
  return null;
}

/**
 * Run one command; resolve with its JSON object or reject with a CliError.
 * `input` (a string) is written to stdin; the child is killed after `timeoutMs`.
 */
export function runCli({ command, args, input = null, timeoutMs, env = process.env }) {
  return new Promise((resolve, reject) => {
    const group = process.platform !== "win32";
    let child;
    try {
      child = spawn(command, args, {
        stdio: ["pipe", "pipe", "pipe"],
        env: { ...env, PYTHONIOENCODING: "utf-8", PYTHONUTF8: "1" },
        detached: group, // its own process group, so a timeout kills wrappers' children too
        windowsHide: true,
      });
    } catch (err) {
      reject(new CliError(`cannot start ${command}: ${err.message}`, { code: "spawn" }));
      return;
    }

    const out = [];
    const errs = [];
    let outBytes = 0;
    let done = false;
    let timer = null;

    const kill = (signal) => {
      try {
        if (group) process.kill(-child.pid, signal);
        else child.kill(signal);
      } catch {
        try {
          child.kill(signal);
        } catch {
          // already gone
        }
      }
    };
    const finish = (err, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(value);
    };
    const abort = (err) => {
      kill("SIGTERM");
      const hard = setTimeout(() => kill("SIGKILL"), KILL_GRACE_MS);
      hard.unref?.();
      child.once("exit", () => clearTimeout(hard));
      finish(err);
    };

    timer = setTimeout(() => {
      abort(
        new CliError(`${command} did not answer within ${timeoutMs} ms; it was killed`, {
          code: "timeout",
          stderr: Buffer.concat(errs).toString("utf8"),
        }),
      );
    }, timeoutMs);

    child.on("error", (err) => {
      const missing = err.code === "ENOENT";
      finish(
        new CliError(
          missing
            ? `darwin-memo command not found: ${command} (install darwin-memo or set the plugin's "command" to its absolute path)`
            : `cannot run ${command}: ${err.message}`,
          { code: "spawn" },
        ),
      );
    });
    child.stdout.on("data", (chunk) => {
      outBytes += chunk.length;
      if (outBytes > MAX_OUTPUT_BYTES) {
        abort(new CliError(`${command} printed more than ${MAX_OUTPUT_BYTES} bytes`, { code: "bad_output" }));
        return;
      }
      out.push(chunk);
    });
    child.stderr.on("data", (chunk) => {
      if (errs.reduce((n, c) => n + c.length, 0) < 64 * 1024) errs.push(chunk);
    });
    child.on("close", (exitCode, signal) => {
      const stdout = Buffer.concat(out).toString("utf8");
      const stderr = Buffer.concat(errs).toString("utf8");
      const obj = lastJsonObject(stdout);
      if (obj && typeof obj.error === "string") {
        finish(new CliError(obj.error, { code: obj.code || "error", exitCode, stderr }));
      } else if (exitCode !== 0) {
        const why = signal ? `was killed by ${signal}` : `exited with status ${exitCode}`;
        finish(
          new CliError(`${command} ${why}: ${tail(stderr || stdout) || "no output"}`, {
            code: "exit",
            exitCode,
            stderr,
          }),
        );
      } else if (!obj) {
        finish(
          new CliError(`${command} printed no JSON object: ${tail(stdout || stderr) || "no output"}`, {
            code: "bad_output",
            exitCode,
            stderr,
          }),
        );
      } else {
        finish(null, obj);
      }
    });

    child.stdin.on("error", () => {
      // EPIPE when the child exits without reading stdin; its exit status tells the story.
    });
    if (input !== null) child.stdin.end(input, "utf8");
    else child.stdin.end();
  });
}

// A small counting semaphore per store path, shared by every plugin instance in
// this process (a gateway that reloads the plugin keeps one queue).
const limiters = new Map();

function limiterFor(key) {
  let lim = limiters.get(key);
  if (!lim) {
    lim = { active: 0, waiting: [] };
    limiters.set(key, lim);
  }
  return lim;
}

async function withSlot(key, fn) {
  const lim = limiterFor(key);
  if (lim.active >= MAX_PARALLEL_PER_STORE) {
    await new Promise((resolve) => lim.waiting.push(resolve));
  } else {
    lim.active += 1;
  }
  try {
    return await fn();
  } finally {
    const next = lim.waiting.shift();
    if (next) next(); // hand the slot straight over
    else lim.active -= 1;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The ledger operations the plugin uses. Each goes to one long-lived
 * `darwin-memo ledger FILE --scale S [--retriever NAME] serve` process (src/serve.js) when that
 * darwin-memo has `serve`, else to a one-shot `darwin-memo ledger ...` process.
 */
export class Ledger {
  constructor({ command, memoryPath, resourceScale, retriever = null, timeoutMs, env, logger, serve = true }) {
    this.command = command;
    this.memoryPath = memoryPath;
    this.resourceScale = resourceScale;
    this.retriever = retriever;
    this.timeoutMs = timeoutMs;
    this.env = env;
    this.serve = serve
      ? new ServeProcess({
          command,
          args: [...this.storeArgs(), "serve"],
          env: env ?? process.env,
          timeoutMs,
          logger,
        })
      : null;
  }

  /**
   * `ledger FILE --scale S [--retriever NAME]`: what comes before OP on every call.
   * Without a retriever we say nothing, so the store's recorded choice applies; with
   * one, darwin-memo records it on first use and refuses a store that recorded
   * another (a bad_input error, which the caller sees).
   */
  storeArgs() {
    const args = ["ledger", this.memoryPath, "--scale", String(this.resourceScale)];
    if (this.retriever) args.push("--retriever", this.retriever);
    return args;
  }

  /** Whether calls currently go through `serve` (false after falling back). */
  get serving() {
    return this.serve !== null && this.serve.available;
  }

  /** Stop the serve process (it finishes what it was asked first). */
  close() {
    this.serve?.close();
  }

  /**
   * One operation. `opArgs` are the one-shot arguments after OP, where "-" stands
   * for `input` (sent on stdin); `serveArgs`, when given, are the same request
   * with the text inline (serve's stdin carries the requests).
   */
  async run(op, opArgs = [], input = null, serveArgs = null) {
    const args = [...this.storeArgs(), op, ...opArgs];
    const inline = input === null ? [op, ...opArgs] : serveArgs && [op, ...serveArgs];
    for (let attempt = 0; ; attempt++) {
      try {
        if (inline && this.serving && !this.serve.closed) {
          try {
            return await this.serve.request(inline);
          } catch (err) {
            if (!(err instanceof ServeUnavailable)) throw err;
            // no serve here (an older darwin-memo): the one-shot command below
          }
        }
        return await withSlot(this.memoryPath, () =>
          runCli({ command: this.command, args, input, timeoutMs: this.timeoutMs, env: this.env }),
        );
      } catch (err) {
        // Another process held the store past the CLI's own wait: try again shortly.
        if (err instanceof CliError && err.code === "store_locked" && attempt < LOCKED_RETRIES) {
          await sleep(250 * (attempt + 1));
          continue;
        }
        throw err;
      }
    }
  }

  /** The query travels on stdin (one-shot) or inline (serve): any text is safe. */
  decide(query) {
    return this.run("decide", ["-"], query, inlineText([], [query]));
  }

  add(question, answer, source) {
    return this.run("add", [`--source=${source}`, "--", question, "-"], answer, inlineText([`--source=${source}`], [question, answer]));
  }

  forget(entryId) {
    return this.run("forget", ["--", entryId]);
  }

  settle(ticket, delta, detail) {
    return this.run("settle", [`--detail=${detail}`, "--", ticket, String(delta)]);
  }

  abandon(ticket) {
    return this.run("abandon", ["--", ticket]);
  }

  tick() {
    return this.run("tick");
  }

  stats() {
    return this.run("stats");
  }
}

/**
 * A serve request carrying `texts` as operands after `options`, or null when a
 * text is exactly "-" (which darwin-memo reads as "stdin": only the one-shot
 * command can carry it).
 */
function inlineText(options, texts) {
  if (texts.some((t) => t === "-")) return null;
  // A text with no leading "-" needs no "--" (darwin-memo's fast path parses it).
  return texts.some((t) => t.startsWith("-")) ? [...options, "--", ...texts] : [...options, ...texts];
}
