"""The JSON store's sidecar lock: waits, times out cleanly, and is fair under churn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from darwin_memo.backends.jsonfile import store_lock
from darwin_memo.errors import StoreLockedError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")

HOLDER = textwrap.dedent(
    """
    import sys, time
    from darwin_memo.backends.jsonfile import store_lock
    with store_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)

CHURNER = textwrap.dedent(
    """
    import os, sys, time
    from darwin_memo.backends.jsonfile import store_lock
    store, cycles, stop = sys.argv[1:4]
    end = time.monotonic() + 120  # a safety stop only: the test ends the churn
    while not os.path.exists(stop) and time.monotonic() < end:
        with store_lock(store, timeout=120):
            with open(cycles, "ab") as f:
                f.write(b"x")  # one byte per turn, counted under the lock
            time.sleep(0.01)
    """
)


def _start_holder(store: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def _reap(proc: subprocess.Popen[str]) -> None:
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_times_out_with_store_locked_error(tmp_path: Path) -> None:
    store = tmp_path / "m.json"
    holder = _start_holder(store, 5)
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreLockedError, match="still locked"), store_lock(store, timeout=0.3):
            pass
        waited = time.monotonic() - t0
        assert 0.25 <= waited < 3
        # the timer and handler are restored
        assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        holder.kill()
        _reap(holder)


def test_waits_for_release(tmp_path: Path) -> None:
    store = tmp_path / "m.json"
    holder = _start_holder(store, 0.4)
    try:
        t0 = time.monotonic()
        with store_lock(store, timeout=10):
            waited = time.monotonic() - t0
        assert waited >= 0.2
    finally:
        _reap(holder)


def test_polling_path_from_a_thread(tmp_path: Path) -> None:
    store = tmp_path / "m.json"
    holder = _start_holder(store, 0.4)
    outcome: list[object] = []

    def worker() -> None:
        try:
            with store_lock(store, timeout=10):
                outcome.append("got")
        except Exception as exc:  # pragma: no cover - reported below
            outcome.append(exc)

    try:
        t = threading.Thread(target=worker)
        t.start()
        t.join(15)
        assert outcome == ["got"]
    finally:
        _reap(holder)


def test_waiter_is_not_starved_by_churning_writers(tmp_path: Path) -> None:
    """A waiter sleeps in the kernel's lock queue, so writers that take the lock back
    to back cannot starve it (a sleeping poller lost almost every race and timed out).

    Both checks hold however loaded the machine is. First, while one holder keeps the
    lock for a second, the waiter's thread makes at most a few voluntary context
    switches: it is blocked in ``flock``, not waking to retry (a poller sleeping up to
    50 ms makes twenty or more). Second, four processes then take and release the lock
    back to back until told to stop, and the waiter takes it five times while they are
    still churning; its 90 s timeout is only a guard against hanging (a starved poller
    would hit it), and how many of the churners' turns it waited is not asserted, since
    that depends on how the machine's scheduler treats the processes.
    """
    import resource

    store = tmp_path / "m.json"
    holder = _start_holder(store, 1.0)
    try:
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        with store_lock(store, timeout=30):
            switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - switches
    finally:
        _reap(holder)
    assert switches <= 5, f"the waiter woke {switches} times while the lock was held"

    cycles, stop = tmp_path / "cycles", tmp_path / "stop"
    cycles.write_bytes(b"")
    churners = [
        subprocess.Popen([sys.executable, "-c", CHURNER, str(store), str(cycles), str(stop)])
        for _ in range(4)
    ]
    try:
        deadline = time.monotonic() + 60
        while cycles.stat().st_size < 40 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the churn is under way
        assert cycles.stat().st_size >= 40, "the churners did not start"
        for _ in range(5):
            with store_lock(store, timeout=90):
                pass
        assert all(c.poll() is None for c in churners), "the churn ended before the waiter won"
    finally:
        stop.touch()
        for c in churners:
            c.wait()


def test_deep_nesting_fails_cleanly_even_with_a_raised_recursion_limit(tmp_path: Path) -> None:
    """Some libraries raise the recursion limit to 100,000 on import; a hostile, deeply
    nested store must still be refused with one line, not crash the interpreter."""
    store = tmp_path / "deep.json"
    store.write_text("[" * 300_000 + "]" * 300_000)
    script = textwrap.dedent(
        f"""
        import sys
        sys.setrecursionlimit(100_000)
        from darwin_memo.errors import StoreFormatError
        from darwin_memo.backends.jsonfile import DECODE_RECURSION_LIMIT, loads, read_json
        try:
            read_json({str(store)!r})
        except StoreFormatError as exc:
            print("refused:", exc)
        assert sys.getrecursionlimit() == 100_000
        # Shorter than the limit: decoded without lowering it, and still cleanly.
        short = "[" * (DECODE_RECURSION_LIMIT - 1)
        try:
            loads(short)
        except (ValueError, RecursionError) as exc:
            print("short refused:", type(exc).__name__)
        value, depth = loads("[" * 300 + "]" * 300), 0
        while value:
            value, depth = value[0], depth + 1
        assert depth == 299
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused:" in proc.stdout and "nested too deeply" in proc.stdout
    assert "short refused:" in proc.stdout
