import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { CliError, Ledger, runCli } from "../src/cli.js";
import { fakeCommand, readLines, setBehaviour, tempDir } from "../testing/harness.js";

const node = process.execPath;
const script = (code) => ["-e", code];

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("runCli", () => {
  it("parses the JSON object on stdout and passes stdin", async () => {
    const out = await runCli({
      command: node,
      args: script("let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.stringify({got:s})))"),
      input: "-rf \u00e9\n",
      timeoutMs: 5000,
    });
    assert.deepEqual(out, { got: "-rf \u00e9\n" });
  });

  it("takes the last JSON line after noise", async () => {
    const out = await runCli({
      command: node,
      args: script("console.log('warming up');console.log(JSON.stringify({ok:1}))"),
      timeoutMs: 5000,
    });
    assert.deepEqual(out, { ok: 1 });
  });

  it("turns the CLI's JSON error into a CliError with its code", async () => {
    await assert.rejects(
      runCli({
        command: node,
        args: script("console.log(JSON.stringify({error:'bad thing',code:'bad_input'}));process.exit(1)"),
        timeoutMs: 5000,
      }),
      (err) => err instanceof CliError && err.code === "bad_input" && !err.transient && err.message === "bad thing",
    );
  });

  it("reports a non-zero exit without JSON, with stderr", async () => {
    await assert.rejects(
      runCli({ command: node, args: script("console.error('Traceback: StoreLockedError');process.exit(1)"), timeoutMs: 5000 }),
      (err) => err.code === "exit" && err.transient && /StoreLockedError/.test(err.message),
    );
  });

  it("reports output that is not JSON", async () => {
    await assert.rejects(
      runCli({ command: node, args: script("console.log('hello')"), timeoutMs: 5000 }),
      (err) => err.code === "bad_output" && /hello/.test(err.message),
    );
  });

  it("says how to fix a missing executable", async () => {
    await assert.rejects(
      runCli({ command: "/nonexistent/darwin-memo", args: [], timeoutMs: 5000 }),
      (err) => err.code === "spawn" && err.transient && /"command"/.test(err.message),
    );
  });

  it("kills a child that runs past the limit, even one that ignores SIGTERM", async () => {
    let pid;
    const child = runCli({
      command: node,
      args: script("process.on('SIGTERM',()=>{});console.error(process.pid);setInterval(()=>{},1000)"),
      timeoutMs: 300,
    });
    await assert.rejects(child, (err) => {
      pid = Number.parseInt(err.stderr, 10);
      return err.code === "timeout" && err.transient && /within 300 ms/.test(err.message);
    });
    assert.ok(Number.isInteger(pid));
    for (let i = 0; i < 50 && pidAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(pidAlive(pid), false, "the child is dead");
  });
});

describe("Ledger argv", () => {
  let tmp;
  let ledger;
  let memoryPath;
  beforeEach(() => {
    tmp = tempDir();
    memoryPath = path.join(tmp.dir, "memory.json");
    ledger = new Ledger({ command: fakeCommand(tmp.dir), memoryPath, resourceScale: 2, timeoutMs: 10000 });
  });
  afterEach(() => tmp.cleanup());

  it("passes --scale on every call and text that starts with a dash safely", async () => {
    const { entry_id } = await ledger.add("-rf flags on rm?", "-- never without a path", "runbook");
    const d = await ledger.decide("-rf flags");
    await ledger.settle(d.ticket_id, -1, "-detail with a dash");
    await ledger.forget(entry_id);
    const calls = readLines(`${memoryPath}.calls.jsonl`);
    for (const c of calls) assert.deepEqual(c.argv.slice(0, 4), ["ledger", memoryPath, "--scale", "2"]);
    assert.deepEqual(calls[0].argv.slice(4), ["add", "--source=runbook", "--", "-rf flags on rm?", "-"]);
    assert.equal(calls[0].stdin, "-- never without a path");
    assert.deepEqual(calls[1].argv.slice(4), ["decide", "-"]);
    assert.equal(calls[1].stdin, "-rf flags");
    assert.deepEqual(calls[2].argv.slice(4), ["settle", "--detail=-detail with a dash", "--", d.ticket_id, "-1"]);
    assert.deepEqual(calls[3].argv.slice(4), ["forget", "--", entry_id]);
  });

  it("says nothing about the retriever unless one is configured, then passes it before the op", async () => {
    await ledger.stats();
    const named = new Ledger({
      command: fakeCommand(tmp.dir),
      memoryPath,
      resourceScale: 2,
      retriever: "hybrid",
      timeoutMs: 10000,
    });
    await named.stats();
    await named.decide("anything");
    const calls = readLines(`${memoryPath}.calls.jsonl`);
    const before = calls.filter((c) => c.argv.includes("--retriever"));
    assert.ok(calls.some((c) => c.op === "stats" && !c.argv.includes("--retriever")));
    assert.ok(before.length >= 2);
    for (const c of before) {
      assert.deepEqual(c.argv.slice(0, 6), ["ledger", memoryPath, "--scale", "2", "--retriever", "hybrid"]);
    }
    assert.deepEqual(named.serve.args, ["ledger", memoryPath, "--scale", "2", "--retriever", "hybrid", "serve"]);
    assert.deepEqual(ledger.serve.args, ["ledger", memoryPath, "--scale", "2", "serve"]);
  });

  it("retries a store that stays locked, then gives up with store_locked", async () => {
    setBehaviour(memoryPath, { tick: "locked" });
    await assert.rejects(ledger.tick(), (err) => err.code === "store_locked");
    assert.equal(readLines(`${memoryPath}.calls.jsonl`).length, 3);
  });

  it("runs at most four processes per store at once", async () => {
    // A command that notes how many copies of itself are running.
    const dir = path.join(tmp.dir, "running");
    mkdirSync(dir);
    const counter = path.join(tmp.dir, "counting.cjs");
    writeFileSync(
      counter,
      [
        "const fs = require('fs'), p = require('path');",
        "const d = process.env.RUNNING_DIR, me = p.join(d, String(process.pid));",
        "fs.writeFileSync(me, '');",
        "fs.appendFileSync(d + '.log', fs.readdirSync(d).length + '\\n');",
        "setTimeout(() => { fs.unlinkSync(me); console.log(JSON.stringify({ ok: true })); }, 300);",
      ].join("\n"),
    );
    const cmd = path.join(tmp.dir, "counting");
    writeFileSync(cmd, `#!/bin/sh\nexec "${node}" "${counter}"\n`);
    chmodSync(cmd, 0o755);
    const counting = new Ledger({
      command: cmd,
      memoryPath: path.join(tmp.dir, "counted.json"),
      resourceScale: 1,
      timeoutMs: 10000,
      env: { ...process.env, RUNNING_DIR: dir },
      serve: false, // one-shot processes are what this counts
    });
    const results = await Promise.all(Array.from({ length: 10 }, () => counting.stats()));
    assert.deepEqual(results[0], { ok: true });
    const seen = readFileSync(`${dir}.log`, "utf8").trim().split("\n").map(Number);
    assert.equal(seen.length, 10);
    assert.ok(Math.max(...seen) <= 4, `at most 4 at once, saw ${Math.max(...seen)}`);
    assert.ok(Math.max(...seen) >= 2, "but they do overlap");
  });
});
