"""Drive a real OpenClaw host with the plugin installed and check the real store.

    python drive.py            (run by gateway.sh, which sets up everything first)

Environment (from gateway.sh): ``OPENCLAW`` (the openclaw executable), ``E2E_HOME``
(the temporary HOME OpenClaw runs in, plugin installed), ``E2E_WORK`` (scratch
folder), ``DARWIN_MEMO`` (the darwin-memo executable), ``PLUGIN_COPY`` (the copy of
integrations/openclaw that was installed). Python must be the interpreter of that
darwin-memo: the balances are read with its library, at full precision.

Steps, each checked on the store itself:

1. ``store:`` turn: ``memory_store`` adds an entry.
2. ``recall:`` turn: ``memory_recall`` opens a ticket; ``agent_end`` settles it with
   the run's outcome (success), and the deciding entry's balance moves by exactly
   ``0.6 * tanh(successDelta / resourceScale)``.
3. ``forget:`` turn: ``memory_forget`` buries the entry stored in step 1.
4. ``recall-then-fail:`` turn: the model fails after the recall; the run ends with
   ``success: false`` and the entry's balance moves by ``0.6 * tanh(failureDelta /
   resourceScale)``.
5. The gateway itself (``openclaw gateway run``): the plugin's service runs
   ``ledger tick``, through one ``darwin-memo ... serve`` child; stopping the
   gateway ends that child.

The last line printed is a one-line summary with the numbers.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from darwin_memo.ledger import Ledger

HERE = Path(__file__).resolve().parent
OPENCLAW = os.environ["OPENCLAW"]
HOME = Path(os.environ["E2E_HOME"])
WORK = Path(os.environ["E2E_WORK"])
DARWIN_MEMO = os.environ["DARWIN_MEMO"]
PLUGIN_ID = "openclaw-memory-darwin"
SCALE = 2.0
SUCCESS, FAILURE = 1.0, -1.0
STATE = HOME / ".openclaw"
STORE = STATE / "memory" / "darwin" / "memory.json"  # the plugin's default, under the state dir
BOOK = STATE / "memory" / "darwin" / "tickets.json"
TURN_TIMEOUT = 240

started: list[subprocess.Popen[bytes]] = []


def say(msg: str) -> None:
    print(f"[e2e] {msg}", flush=True)


def fail(msg: str) -> None:
    say(f"FAILED: {msg}")
    raise SystemExit(1)


def check(ok: bool, msg: str) -> None:
    if not ok:
        fail(msg)


def env() -> dict[str, str]:
    e = dict(os.environ, HOME=str(HOME), NO_COLOR="1", FORCE_COLOR="0")
    e.pop("OPENCLAW_STATE_DIR", None)
    return e


def openclaw(
    *args: str, timeout: int = TURN_TIMEOUT, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [OPENCLAW, *args], env=env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if ok and proc.returncode != 0:
        fail(f"openclaw {' '.join(args[:3])} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def darwin(*args: str) -> dict[str, Any]:
    out = subprocess.run([DARWIN_MEMO, *args], capture_output=True, text=True, check=False)
    return json.loads(out.stdout)


def energy(entry_id: str) -> float:
    """An entry's balance at full precision (the CLI rounds to 3 places)."""
    with Ledger.open(STORE, create=False) as ledger:
        entry = ledger.store.get(entry_id)
        check(entry is not None, f"entry {entry_id} is not alive")
        return float(entry.energy)


def model_calls() -> list[dict[str, Any]]:
    log = WORK / "model.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def tool_results(calls: list[dict[str, Any]], name: str) -> list[str]:
    """The text of every result of tool `name` OpenClaw sent back to the model."""
    out: list[str] = []
    for call in calls:
        msgs = call["body"].get("messages", [])
        ids = {
            tc["id"]
            for m in msgs
            if m.get("role") == "assistant"
            for tc in m.get("tool_calls") or []
            if tc["function"]["name"] == name
        }
        for m in msgs:
            if m.get("role") == "tool" and m.get("tool_call_id") in ids:
                c = m.get("content")
                out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


def turn(message: str, session: str, *, expect_ok: bool = True) -> subprocess.CompletedProcess[str]:
    t = time.monotonic()
    proc = openclaw(
        "agent",
        "--local",
        "--session-id",
        session,
        "-m",
        message,
        "--json",
        "--timeout",
        str(TURN_TIMEOUT - 30),
        ok=False,
    )
    say(f"turn {message.split(':')[0]!r} exited {proc.returncode} in {time.monotonic() - t:.1f} s")
    if expect_ok and proc.returncode != 0:
        fail(f"the turn failed:\n{proc.stderr[-3000:]}")
    return proc


def main() -> None:
    results: dict[str, Any] = {}
    t0 = time.monotonic()

    # The manifest, as the host reads it: enabled, tools and the conversation grant.
    inspect = openclaw("plugins", "inspect", PLUGIN_ID, "--runtime", "--json")
    report = json.loads(inspect.stdout[inspect.stdout.index("{") :])
    plugin = report["plugin"]
    check(
        plugin["status"] == "loaded" and plugin["enabled"],
        f"plugin not loaded: {plugin.get('status')}",
    )
    check(plugin.get("memorySlotSelected") is True, "the plugin does not hold the memory slot")
    check(
        sorted(plugin["toolNames"]) == ["memory_forget", "memory_recall", "memory_store"],
        f"tools: {plugin['toolNames']}",
    )
    hooks = [h.get("name") if isinstance(h, dict) else h for h in report.get("typedHooks", [])]
    check(
        "agent_end" in json.dumps(hooks),
        f"agent_end hook not registered: {report.get('diagnostics')}",
    )
    check(f"{PLUGIN_ID}-upkeep" in report.get("services", []), "no upkeep service")
    problems = [d for d in report.get("diagnostics", []) if d.get("pluginId") == PLUGIN_ID]
    check(not problems, f"host diagnostics for the plugin: {problems}")

    # A lesson to recall, written by the CLI into the plugin's default store.
    seeded = darwin(
        "ledger",
        str(STORE),
        "add",
        "How do I deploy the billing service?",
        "Use the blue-green script deploy.sh; never kubectl apply directly.",
    )
    deploy = seeded["entry_id"]

    # 1. memory_store through a real turn.
    turn(
        "store: Where do build artifacts go? || Into dist/, never into the repo root.", "e2e-store"
    )
    stored = [
        re.search(r"Stored lesson ([0-9a-f]+)", r)
        for r in tool_results(model_calls(), "memory_store")
    ]
    check(bool(stored) and stored[-1] is not None, "memory_store gave the model no entry id")
    artifacts = stored[-1].group(1)  # type: ignore[union-attr]
    life = darwin("why", str(STORE), artifacts, "--json")
    check(
        life.get("status") == "living" and life["question"] == "Where do build artifacts go?",
        f"stored entry: {life}",
    )
    results["stored"] = 1

    # 2. A recall opens a ticket; agent_end settles it with the run's outcome.
    before = energy(deploy)
    turn("recall: how do I deploy the billing service", "e2e-recall")
    recalled = tool_results(model_calls(), "memory_recall")
    check(
        bool(recalled) and "blue-green script deploy.sh" in recalled[-1], f"recall: {recalled[-1:]}"
    )
    check(
        '<darwin-memory trust="untrusted">' in recalled[-1], "the recall is not framed as untrusted"
    )
    life = darwin("why", str(STORE), deploy, "--json")
    check(len(life["settlements"]) == 1, f"settlements: {life['settlements']}")
    s = life["settlements"][0]
    first_ticket = s["ticket"]
    check(bool(first_ticket) and s["delta"] == SUCCESS, f"settlement: {s}")
    check("openclaw agent_end success=true" in s["detail"], f"detail: {s['detail']}")
    moved = energy(deploy) - before
    want = 0.6 * math.tanh(SUCCESS / SCALE)
    check(abs(moved - want) < 1e-9, f"balance moved {moved!r}, want {want!r}")
    check(darwin("ledger", str(STORE), "stats")["pending_tickets"] == 0, "a ticket is still open")
    book = json.loads(BOOK.read_text())
    check(book["open"] == [] and book["outbox"] == [], f"ticket book: {book}")
    results["success_credit"] = round(moved, 6)

    # 3. memory_forget buries the stored lesson.
    turn(f"forget: {artifacts}", "e2e-forget")
    forgot = tool_results(model_calls(), "memory_forget")
    check(bool(forgot) and f"Forgot entry {artifacts}" in forgot[-1], f"forget: {forgot[-1:]}")
    check(darwin("why", str(STORE), artifacts, "--json")["status"] != "living", "entry still alive")
    results["forgotten"] = 1

    # 4. A run that fails after the recall settles negative.
    before = energy(deploy)
    proc = turn(
        "recall-then-fail: how do I deploy the billing service", "e2e-fail", expect_ok=False
    )
    life = darwin("why", str(STORE), deploy, "--json")
    check(
        len(life["settlements"]) == 2,
        f"the failed run did not settle (exit {proc.returncode}): "
        f"{life['settlements']}\n{proc.stderr[-2000:]}",
    )
    (s,) = [x for x in life["settlements"] if x["ticket"] != first_ticket]
    check(s["delta"] == FAILURE and "success=false" in s["detail"], f"settlement: {s}")
    moved = energy(deploy) - before
    want = 0.6 * math.tanh(FAILURE / SCALE)
    check(abs(moved - want) < 1e-9, f"balance moved {moved!r}, want {want!r}")
    results["failure_credit"] = round(moved, 6)

    # 5. The gateway: the upkeep service ticks the ledger through one serve child.
    tick_before = darwin("ledger", str(STORE), "verify")["tick"]
    log = (WORK / "gateway.log").open("wb")
    gw = subprocess.Popen(
        [
            OPENCLAW,
            "gateway",
            "run",
            "--allow-unconfigured",
            "--bind",
            "loopback",
            "--port",
            os.environ.get("E2E_GATEWAY_PORT", "18789"),
            "--auth",
            "none",
        ],
        env=env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    started.append(gw)
    serve_pids: list[int] = []
    deadline = time.monotonic() + 180
    ticked = False
    while time.monotonic() < deadline and gw.poll() is None:
        text = (WORK / "gateway.log").read_text(errors="replace")
        if re.search(r"ledger tick \d+: population", text):
            ticked = True
            serve_pids = serve_children(gw.pid)
            break
        time.sleep(1)
    gateway_log = (WORK / "gateway.log").read_text(errors="replace")
    check(ticked, f"no tick in the gateway's log:\n{gateway_log[-3000:]}")
    tick_after = darwin("ledger", str(STORE), "verify")["tick"]
    check(tick_after > tick_before, f"store tick {tick_before} -> {tick_after}")
    check(bool(serve_pids), "the gateway ran no `darwin-memo ledger ... serve` child")
    gw.send_signal(signal.SIGTERM)  # the gateway alone: its serve child must follow by itself
    try:
        gw.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the gateway did not stop within 60 s of SIGTERM")
    for pid in serve_pids:
        for _ in range(50):
            if not alive(pid):
                break
            time.sleep(0.1)
        check(not alive(pid), f"serve child {pid} outlived the gateway")
    results["ticks"] = tick_after - tick_before

    verify = darwin("ledger", str(STORE), "verify")
    check(verify["ok"] is True, f"verify: {verify['problems']}")
    results["model_requests"] = len(model_calls())
    results["seconds"] = round(time.monotonic() - t0)
    say(
        "OK: OpenClaw gateway e2e passed: "
        f"store +{results['stored']} entry, recall settled {results['success_credit']:+.6f} "
        f"(0.6*tanh(1/{SCALE:g})), failed run settled {results['failure_credit']:+.6f}, "
        f"forget {results['forgotten']}, service ticks {results['ticks']}, "
        f"{results['model_requests']} model requests, {results['seconds']} s"
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def serve_children(root: int) -> list[int]:
    """Pids of `darwin-memo ledger ... serve` processes below `root`."""
    parents: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            parents[int(d.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            cmd[int(d.name)] = (
                (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except (OSError, ValueError):
            continue

    def below(pid: int) -> bool:
        while pid in parents and pid > 1:
            pid = parents[pid]
            if pid == root:
                return True
        return False

    return [
        p for p, c in cmd.items() if " ledger " in c and c.rstrip().endswith(" serve") and below(p)
    ]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in started:
            stop(p)
