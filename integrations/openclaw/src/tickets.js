// The ticket book: which ledger tickets are open for which session, and which
// settlements still have to reach the ledger.
//
// It lives in <stateDir>/memory/darwin/tickets.json so tickets survive a gateway
// restart. Every change is a read-modify-write of the whole file, done
//   - one at a time inside this process (a promise chain per file), and
//   - under a lock file (tickets.json.lock, created exclusively) across processes,
// and written to a temporary file that is fsynced and renamed over the old one,
// so a crash leaves either the old book or the new one, never half of each.
//
// Shape (version 1):
//   open:   [{ ticket, session, openedAt, query }]           recall answered, run not over
//   outbox: [{ ticket, session, op, delta, detail, queuedAt,  settle/abandon owed to the ledger
//              attempts, nextAttemptAt, lastError }]
//   lastTickAt: ISO time of the last background tick claimed (or null)

import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";

const LOCK_STALE_MS = 30000;
const LOCK_WAIT_MS = 10000;

export class BookError extends Error {
  constructor(message) {
    super(message);
    this.name = "BookError";
  }
}

export function emptyBook() {
  return { version: 1, open: [], outbox: [], lastTickAt: null };
}

function normalise(raw) {
  const book = emptyBook();
  if (!raw || typeof raw !== "object") return book;
  const valid = (t) => t && typeof t === "object" && typeof t.ticket === "string" && t.ticket !== "";
  if (Array.isArray(raw.open)) book.open = raw.open.filter(valid);
  if (Array.isArray(raw.outbox)) book.outbox = raw.outbox.filter(valid);
  if (typeof raw.lastTickAt === "string") book.lastTickAt = raw.lastTickAt;
  return book;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function pidAlive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM"; // exists, owned by someone else
  }
}

export class TicketBook {
  constructor(file, { logger } = {}) {
    this.file = file;
    this.lockFile = `${file}.lock`;
    this.logger = logger;
    this.chain = Promise.resolve();
  }

  /** Read the book (no lock needed: writes are atomic renames). */
  async read() {
    return this.#load(false);
  }

  /**
   * Apply `fn(book)` (which mutates the book and may return a value) and save.
   * Changes are serialized in this process and locked across processes.
   */
  update(fn) {
    const run = this.chain.then(() => this.#locked(async () => {
      const book = await this.#load(true);
      const result = await fn(book);
      await this.#save(book);
      return result;
    }));
    this.chain = run.catch(() => {}); // one failed update must not block the next
    return run;
  }

  async #load(repair) {
    let text;
    try {
      text = await fs.readFile(this.file, "utf8");
    } catch (err) {
      if (err.code === "ENOENT") return emptyBook();
      throw err;
    }
    try {
      return normalise(JSON.parse(text));
    } catch {
      if (!repair) return emptyBook();
      // Keep the damaged file for a human; carry on with an empty book.
      const aside = `${this.file}.corrupt-${Date.now()}`;
      await fs.rename(this.file, aside).catch(() => {});
      this.logger?.error?.(`ticket book ${this.file} was not valid JSON; moved it to ${aside}`);
      return emptyBook();
    }
  }

  async #save(book) {
    await fs.mkdir(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
    const handle = await fs.open(tmp, "w", 0o600);
    try {
      await handle.writeFile(`${JSON.stringify(book, null, 2)}\n`, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.rename(tmp, this.file);
    } catch (err) {
      await fs.unlink(tmp).catch(() => {});
      throw err;
    }
  }

  async #locked(fn) {
    await fs.mkdir(path.dirname(this.file), { recursive: true });
    const deadline = Date.now() + LOCK_WAIT_MS;
    const token = `${process.pid} ${Date.now()} ${randomBytes(4).toString("hex")}`;
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      try {
        const handle = await fs.open(this.lockFile, "wx", 0o600);
        await handle.writeFile(token, "utf8");
        await handle.close();
        break;
      } catch (err) {
        if (err.code !== "EEXIST") throw err;
      }
      if (await this.#breakStaleLock()) continue;
      if (Date.now() > deadline) {
        throw new BookError(`ticket book is locked by another process (${this.lockFile})`);
      }
      await sleep(pause);
    }
    try {
      return await fn();
    } finally {
      // Remove the lock only if it is still ours.
      const now = await fs.readFile(this.lockFile, "utf8").catch(() => null);
      if (now === token) await fs.unlink(this.lockFile).catch(() => {});
    }
  }

  async #breakStaleLock() {
    let text;
    let stat;
    try {
      [text, stat] = await Promise.all([
        fs.readFile(this.lockFile, "utf8"),
        fs.stat(this.lockFile),
      ]);
    } catch {
      return true; // vanished between our open and now: try again at once
    }
    const pid = Number.parseInt(text.split(" ")[0], 10);
    const age = Date.now() - stat.mtimeMs;
    // A lock whose owner died, or one held far longer than any update takes.
    // (An empty file is a lock being written right now, unless it is old.)
    const dead = text !== "" && !pidAlive(pid);
    if (!dead && age < LOCK_STALE_MS) return false;
    // Someone else may have broken it and taken a fresh lock meanwhile: only
    // remove the very lock we judged stale.
    const again = await fs.readFile(this.lockFile, "utf8").catch(() => null);
    if (again !== text) return true;
    this.logger?.warn?.(`breaking stale ticket-book lock ${this.lockFile} (${text || "empty"})`);
    await fs.unlink(this.lockFile).catch(() => {});
    return true;
  }
}
