import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { TicketBook } from "../src/tickets.js";
import { tempDir } from "../testing/harness.js";

describe("TicketBook", () => {
  let tmp;
  let file;
  beforeEach(() => {
    tmp = tempDir();
    file = path.join(tmp.dir, "memory", "darwin", "tickets.json");
  });
  afterEach(() => tmp.cleanup());

  it("starts empty and creates its directory on first write", async () => {
    const book = new TicketBook(file);
    assert.deepEqual((await book.read()).open, []);
    await book.update((b) => b.open.push({ ticket: "t1", session: "s" }));
    assert.deepEqual(JSON.parse(readFileSync(file, "utf8")).open, [{ ticket: "t1", session: "s" }]);
  });

  it("leaves no temporary or lock files behind", async () => {
    const book = new TicketBook(file);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => book.update((b) => b.open.push({ ticket: `t${i}` }))),
    );
    assert.deepEqual(readdirSync(path.dirname(file)), ["tickets.json"]);
  });

  it("loses no update when many run at once, even from two books on one file", async () => {
    const a = new TicketBook(file);
    const b = new TicketBook(file); // a second gateway process, as far as locking goes
    const writes = [];
    for (let i = 0; i < 60; i++) {
      const book = i % 2 ? a : b;
      writes.push(book.update(async (s) => {
        await new Promise((r) => setTimeout(r, Math.random() * 3));
        s.open.push({ ticket: `t${i}` });
      }));
    }
    await Promise.all(writes);
    const tickets = (await a.read()).open.map((t) => t.ticket).sort();
    assert.equal(tickets.length, 60);
    assert.equal(new Set(tickets).size, 60);
  });

  it("a failing update changes nothing and does not block the next", async () => {
    const book = new TicketBook(file);
    await book.update((b) => b.open.push({ ticket: "keep" }));
    await assert.rejects(book.update((b) => {
      b.open = [];
      throw new Error("boom");
    }), /boom/);
    await book.update((b) => b.open.push({ ticket: "next" }));
    assert.deepEqual((await book.read()).open.map((t) => t.ticket), ["keep", "next"]);
  });

  it("moves a corrupt book aside, logs it, and carries on", async () => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, "{ half a book");
    const errors = [];
    const book = new TicketBook(file, { logger: { error: (m) => errors.push(m) } });
    await book.update((b) => b.open.push({ ticket: "t" }));
    assert.equal(errors.length, 1);
    assert.ok(readdirSync(path.dirname(file)).some((n) => n.startsWith("tickets.json.corrupt-")));
    assert.deepEqual((await book.read()).open.map((t) => t.ticket), ["t"]);
  });

  it("drops malformed records on load", async () => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ open: [{ ticket: "ok" }, { nope: 1 }, null, "x"], outbox: "no" }));
    const book = await new TicketBook(file).read();
    assert.deepEqual(book.open, [{ ticket: "ok" }]);
    assert.deepEqual(book.outbox, []);
  });

  it("breaks the lock of a process that died holding it", async () => {
    mkdirSync(path.dirname(file), { recursive: true });
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
    writeFileSync(`${file}.lock`, `${dead.stdout} ${Date.now()} abcd`);
    const warnings = [];
    const book = new TicketBook(file, { logger: { warn: (m) => warnings.push(m) } });
    await book.update((b) => b.open.push({ ticket: "t" }));
    assert.match(warnings.join("\n"), /stale ticket-book lock/);
    assert.ok(!existsSync(`${file}.lock`));
  });

  it("waits for a live holder instead of breaking its lock", async () => {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(`${file}.lock`, `${process.pid} ${Date.now()} live`);
    const book = new TicketBook(file);
    let done = false;
    const pending = book.update((b) => b.open.push({ ticket: "t" })).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(done, false, "still waiting while the lock is held");
    unlinkSync(`${file}.lock`);
    await pending;
    assert.deepEqual((await book.read()).open.map((t) => t.ticket), ["t"]);
  });
});
