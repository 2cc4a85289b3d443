// One long-lived `darwin-memo ledger FILE --scale S [--retriever NAME] serve` process.
//
// A one-shot darwin-memo call spends most of its time starting Python. `serve`
// starts it once: each request is one line on its stdin, the JSON array of the
// arguments after `ledger FILE`, and each reply is one line on its stdout, the
// JSON object the one-shot command prints, in the order of the requests. Every
// request is its own transaction in the store, committed before its reply, so an
// answered request is never lost.
//
// What this module adds around that:
//   - a handshake: the first line sent is `[]`. A darwin-memo with `serve` answers
//     it with a bad_input error; an older one answers the `serve` operation itself
//     with a usage error and exits. Then `available` turns false for good and every
//     request (this one and those queued behind it) throws ServeUnavailable, which
//     the caller answers by running the one-shot command instead.
//   - restarts: if the process dies, the next request starts a new one. Requests
//     it had not answered are sent again, once, to the new process (a settlement
//     that did land before the death is then refused by the ledger as already
//     settled: nothing is counted twice). A process that dies twice before
//     finishing its handshake also counts as "no serve here".
//   - a time limit per request, counted from when the request reaches the head of
//     the queue (serve answers one at a time). A request that runs over gets the
//     same timeout error as a one-shot call, and the process is killed.
//   - the child never keeps the gateway alive by itself: its pipes are unref'd
//     while no request waits, and it ends when its stdin closes (gateway exit).

import { spawn } from "node:child_process";

import { CliError } from "./cli.js";

const MAX_LINE_BYTES = 8 * 1024 * 1024;
const MAX_EARLY_DEATHS = 2;

/** Thrown when this darwin-memo has no working `serve`: use the one-shot command. */
export class ServeUnavailable extends Error {
  constructor(message) {
    super(message);
    this.name = "ServeUnavailable";
  }
}

export class ServeProcess {
  /**
   * `command`, `args` (ending in "serve"), `env`, `timeoutMs` (per request),
   * `logger` (optional).
   */
  constructor({ command, args, env = process.env, timeoutMs, logger }) {
    this.command = command;
    this.args = args;
    this.env = env;
    this.timeoutMs = timeoutMs;
    this.logger = logger;
    this.available = true;
    this.starts = 0;
    this.earlyDeaths = 0;
    this.child = null;
    this.queue = []; // sent, not yet answered, oldest first: { argv, resolve, reject, retried, handshake }
    this.buffer = "";
    this.timer = null;
    this.closed = false;
  }

  /** Send one request; resolves with the reply object, rejects with a CliError. */
  request(argv) {
    if (!this.available) return Promise.reject(new ServeUnavailable("darwin-memo serve is not available"));
    if (this.closed) return Promise.reject(new ServeUnavailable("the serve connection was closed"));
    return new Promise((resolve, reject) => {
      this.#send({ argv, resolve, reject, retried: false, handshake: false });
    });
  }

  /** End the process (it exits at end of input); pending requests are still answered. */
  close() {
    this.closed = true;
    if (this.child) {
      try {
        this.child.stdin.end();
      } catch {
        // already gone
      }
    }
  }

  /** The pid of the running process, or null (tests kill it). */
  get pid() {
    return this.child?.pid ?? null;
  }

  #send(item) {
    if (!this.child) this.#start();
    if (!this.child) {
      item.reject(this.startError);
      return;
    }
    this.queue.push(item);
    this.#hold(true);
    try {
      this.child.stdin.write(`${JSON.stringify(item.argv)}\n`, "utf8");
    } catch {
      // The process is going away; its exit handler retries the queue.
    }
    if (this.queue.length === 1) this.#arm();
  }

  #start() {
    this.startError = null;
    let child;
    try {
      child = spawn(this.command, this.args, {
        stdio: ["pipe", "pipe", "pipe"],
        env: { ...this.env, PYTHONIOENCODING: "utf-8", PYTHONUTF8: "1" },
        windowsHide: true,
      });
    } catch (err) {
      this.startError = new CliError(`cannot start ${this.command}: ${err.message}`, { code: "spawn" });
      return;
    }
    this.child = child;
    this.starts += 1;
    this.buffer = "";
    this.stderrTail = "";
    child.stdin.on("error", () => {
      // EPIPE: the process died; the exit handler deals with it.
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.#onData(child, chunk));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-2000);
    });
    child.on("error", (err) => {
      if (this.child !== child) return;
      const missing = err.code === "ENOENT";
      this.#failAll(
        child,
        new CliError(
          missing
            ? `darwin-memo command not found: ${this.command} (install darwin-memo or set the plugin's "command" to its absolute path)`
            : `cannot run ${this.command}: ${err.message}`,
          { code: "spawn" },
        ),
      );
    });
    child.on("close", (code, signal) => this.#onExit(child, code, signal));
    // The handshake goes first: everything after it waits in the pipe.
    this.queue.push({ argv: [], handshake: true, resolve: () => {}, reject: () => {} });
    child.stdin.write("[]\n", "utf8");
    this.#arm();
  }

  #onData(child, chunk) {
    if (this.child !== child) return;
    this.buffer += chunk;
    if (this.buffer.length > MAX_LINE_BYTES && !this.buffer.includes("\n")) {
      const head = this.queue.shift();
      head?.reject(new CliError(`${this.command} serve printed a line over ${MAX_LINE_BYTES} bytes`, { code: "bad_output" }));
      this.buffer = "";
      this.#kill(child); // the exit handler sends the rest again
      return;
    }
    let nl;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line === "") continue;
      this.#onLine(child, line);
    }
  }

  #onLine(child, line) {
    const item = this.queue.shift();
    clearTimeout(this.timer);
    this.timer = null;
    if (!item) {
      this.logger?.warn?.(`darwin-memo serve printed a line nobody asked for: ${line.slice(0, 200)}`);
      return;
    }
    let obj = null;
    try {
      obj = JSON.parse(line);
    } catch {
      obj = null;
    }
    if (item.handshake) {
      if (!obj || obj.code !== "bad_input") {
        // An older darwin-memo answers the `serve` operation itself with a usage
        // error (and exits); anything but serve's answer to `[]` means no serve.
        this.#unavailable(`this darwin-memo has no working \`ledger serve\` (it said: ${line.slice(0, 200)})`);
        this.#kill(child);
        return;
      }
      this.earlyDeaths = 0;
    } else if (!obj || typeof obj !== "object" || Array.isArray(obj)) {
      item.reject(new CliError(`${this.command} serve printed something that is not a JSON object: ${line.slice(0, 200)}`, { code: "bad_output" }));
    } else if (typeof obj.error === "string") {
      item.reject(new CliError(obj.error, { code: obj.code || "error" }));
    } else {
      item.resolve(obj);
    }
    if (this.queue.length) this.#arm();
    else this.#hold(false);
  }

  #onExit(child, code, signal) {
    if (this.child !== child) return;
    this.child = null;
    clearTimeout(this.timer);
    this.timer = null;
    const pending = this.queue.splice(0);
    const handshakeUnanswered = pending.some((i) => i.handshake);
    if (handshakeUnanswered && this.available) {
      this.earlyDeaths += 1;
      if (this.earlyDeaths >= MAX_EARLY_DEATHS) {
        this.#unavailable(
          `darwin-memo serve exited ${signal ?? `with status ${code}`} before answering, ${this.earlyDeaths} times: ${this.stderrTail.trim().slice(-300) || "no output"}`,
        );
      }
    }
    const requests = pending.filter((i) => !i.handshake);
    if (!this.available || this.closed) {
      const why = new ServeUnavailable("darwin-memo serve is not available");
      for (const item of requests) item.reject(why);
      this.#hold(false);
      return;
    }
    if (requests.length) {
      this.logger?.warn?.(
        `darwin-memo serve exited ${signal ? `on ${signal}` : `with status ${code}`} with ${requests.length} request(s) unanswered; restarting it and sending them again once`,
      );
    }
    for (const item of requests) {
      if (item.retried) {
        item.reject(
          new CliError("darwin-memo serve died twice while this request was in flight", { code: "serve_died" }),
        );
      } else {
        item.retried = true;
        this.#send(item);
      }
    }
    if (!this.child) this.#hold(false);
  }

  #unavailable(why) {
    if (!this.available) return;
    this.available = false;
    // Not a fault: an older darwin-memo works, one process per call.
    this.logger?.info?.(`${why}; using one darwin-memo process per call instead`);
  }

  #failAll(child, err) {
    if (this.child === child) this.child = null;
    clearTimeout(this.timer);
    this.timer = null;
    for (const item of this.queue.splice(0)) item.reject(err);
    this.#hold(false);
  }

  #arm() {
    clearTimeout(this.timer);
    const child = this.child;
    this.timer = setTimeout(() => {
      if (this.child !== child || !this.queue.length) return;
      const head = this.queue.shift();
      if (head.handshake) {
        this.earlyDeaths += 1; // counted as a start that never answered
      } else {
        head.reject(
          new CliError(`${this.command} serve did not answer within ${this.timeoutMs} ms; it was killed`, {
            code: "timeout",
            stderr: this.stderrTail,
          }),
        );
      }
      this.#kill(child);
    }, this.timeoutMs);
  }

  #kill(child) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }

  // Keep the gateway's event loop alive only while a request waits for its reply.
  #hold(busy) {
    const child = this.child;
    if (!child) return;
    for (const handle of [child, child.stdin, child.stdout, child.stderr]) {
      try {
        if (busy) handle?.ref?.();
        else handle?.unref?.();
      } catch {
        // not a handle that can be (un)ref'd
      }
    }
    if (this.timer) {
      if (busy) this.timer.ref?.();
      else this.timer.unref?.();
    }
  }
}
