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

from darwin_memo.errors import StoreLockedError
from darwin_memo.jsonfile import store_lock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")

HOLDER = textwrap.dedent(
    """
    import sys, time
    from darwin_memo.jsonfile import store_lock
    with store_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)

CHURNER = textwrap.dedent(
    """
    import sys, time
    from darwin_memo.jsonfile import store_lock
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        with store_lock(sys.argv[1]):
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
    """Four processes take and release the lock back to back for 8 s; a fifth
    waiter takes it five times, each within its 5 s timeout (a sleeping poller
    lost almost every race and timed out)."""
    store = tmp_path / "m.json"
    churners = [
        subprocess.Popen([sys.executable, "-c", CHURNER, str(store), "8"]) for _ in range(4)
    ]
    try:
        time.sleep(1.0)  # let the churn start
        waits = []
        for _ in range(5):
            t0 = time.monotonic()
            with store_lock(store, timeout=5):
                waits.append(time.monotonic() - t0)
        assert len(waits) == 5 and max(waits) < 5.0, waits
    finally:
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
        from darwin_memo.jsonfile import DECODE_RECURSION_LIMIT, loads, read_json
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
