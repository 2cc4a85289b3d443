"""Settle tickets from CI results: a test suite's verdict is a measured outcome.

The "lesson store settled by CI" pattern: an agent consults a lesson store while
working on a change (``ledger decide`` gives a ticket) and writes
``darwin-memo-ticket: <id>`` into the pull request's description. CI runs the
tests on the base commit and on the head, and ``settle_ci`` pays every ticket
named in the description the difference:

* **junit mode**: both runs' junit XML are parsed and diffed test by test. The
  delta is ``fixed + added passing - broken - removed passing``, which is the
  change in the number of passing tests, counted only over tests measured
  (not skipped) in both runs and not quarantined as flaky.
* **pass-count mode**: the delta is ``passes_after - passes_before``.

Guards, so that noise does not pass for a measurement:

* **Abstention** (``InfraFailure``, exit code 3 on the command line): a junit
  file that is missing, unreadable, not XML, declares entities, holds no test
  case, or records a collection error (the suite never loaded) settles nothing
  and writes nothing. An infrastructure failure is not a verdict.
* **Flaky-test quarantine**: each test's recent pass/fail observations are kept
  in a small JSON sidecar (``flaky.json``); a test whose observations flipped
  ``flip_threshold`` times within the last ``window`` is left out of the delta
  and listed.
* **Ticket provenance**: with ``opened_since`` (the store as it was on the base
  commit), tickets already pending there were not opened by this change and are
  refused; without it the result says ``"ticket_provenance": "unverified"``.

The store is ticked once after settling, and only when there was a ticket to
settle, so CI runs without tickets do not starve the store.
"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DarwinMemoError, StoreNotFound

__all__ = [
    "EXIT_ABSTAINED",
    "FLAKY_FLIPS",
    "FLAKY_WINDOW",
    "TICKET_RE",
    "CiInputError",
    "InfraFailure",
    "Run",
    "Transitions",
    "default_state_path",
    "diff_runs",
    "flips",
    "load_flips",
    "parse_junit",
    "pending_ids",
    "quarantined",
    "record_flips",
    "save_flips",
    "settle_ci",
    "ticket_ids",
]

EXIT_ABSTAINED = 3
#: A ticket named in a pull request description: 24 hex digits (ours) or 12 (published).
TICKET_RE = re.compile(r"darwin-memo-ticket:\s*([0-9a-f]{12}(?:[0-9a-f]{12})?)(?![0-9A-Za-z])")
FLAKY_WINDOW = 10
FLAKY_FLIPS = 3

#: One run: test id -> True (passed), False (failed or errored), None (skipped).
Run = dict[str, bool | None]


class InfraFailure(DarwinMemoError):
    """The CI results cannot be trusted as a measurement; nothing was settled."""


class CiInputError(DarwinMemoError, ValueError):
    """The options given to ``settle_ci`` do not describe one measurement."""


# -- junit -----------------------------------------------------------------------


def _verdict(case: ET.Element) -> bool | None:
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        return False
    if "skipped" in tags:
        return None
    return True


def _merge(old: bool | None, new: bool | None) -> bool | None:
    """Duplicate ids: a failure beats a pass, which beats a skip."""
    if old is False or new is False:
        return False
    if old is True or new is True:
        return True
    return None


def parse_junit(path: str | Path, label: str = "junit") -> Run:
    """Test outcomes from a junit XML file, keyed ``classname::name`` (or ``name``).

    Raises ``InfraFailure`` when the file is not a usable measurement: missing,
    unreadable, not XML, declaring entities, holding no test case, or recording
    a collection error (an ``<error>`` on a test case with an empty classname,
    which is how pytest reports a module that failed to import).
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InfraFailure(
            f"{label} junit file {p} does not exist: the run produced no results"
        ) from None
    except OSError as exc:
        raise InfraFailure(
            f"{label} junit file {p} cannot be read: {exc.strerror or exc}"
        ) from None
    if b"<!ENTITY" in data:
        raise InfraFailure(f"{label} junit file {p} declares XML entities; refusing to expand them")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise InfraFailure(f"{label} junit file {p} is not valid XML ({exc})") from None
    run: Run = {}
    cases = 0
    for case in root.iter("testcase"):
        cases += 1
        classname = case.get("classname") or ""
        name = case.get("name") or ""
        if not classname and any(child.tag == "error" for child in case):
            where = name or "unknown module"
            raise InfraFailure(
                f"{label} run hit a collection error ({where}): the suite never loaded"
            )
        test_id = f"{classname}::{name}" if classname else name
        verdict = _verdict(case)
        run[test_id] = _merge(run[test_id], verdict) if test_id in run else verdict
    if cases == 0:
        raise InfraFailure(f"{label} junit file {p} holds no test cases: nothing was measured")
    return run


# -- the diff --------------------------------------------------------------------


@dataclass(frozen=True)
class Transitions:
    """How each test moved from the base run to the head run (sorted ids)."""

    regressions: list[str]
    improvements: list[str]
    added_passing: list[str]
    added_failing: list[str]
    removed_passing: list[str]
    removed_failing: list[str]

    def delta(self, exclude: Iterable[str] | None = None) -> float:
        """The change in passing tests over what was measured, leaving out ``exclude``.

        ``exclude`` names quarantined tests (the published call); ``diff_runs(...,
        exclude=...)`` leaves them out of the buckets already, so ``settle-ci`` passes
        none here.
        """
        skip = set(exclude) if exclude is not None else set()

        def count(ids: list[str]) -> int:
            return sum(1 for test_id in ids if test_id not in skip)

        gained = count(self.improvements) + count(self.added_passing)
        lost = count(self.regressions) + count(self.removed_passing)
        return float(gained - lost)


def diff_runs(
    base: Mapping[str, bool | None], head: Mapping[str, bool | None], exclude: Iterable[str] = ()
) -> Transitions:
    """Bucket every test measured in either run; ``exclude`` (quarantined) ids are left out.

    A test skipped on either side was not measured there and moves no bucket.
    """
    skip = set(exclude)
    buckets: dict[str, list[str]] = {
        k: []
        for k in (
            "regressions",
            "improvements",
            "added_passing",
            "added_failing",
            "removed_passing",
            "removed_failing",
        )
    }
    for test_id in sorted(set(base) | set(head)):
        if test_id in skip:
            continue
        in_base, in_head = test_id in base, test_id in head
        before, after = base.get(test_id), head.get(test_id)
        if (in_base and before is None) or (in_head and after is None):
            continue
        if in_base and in_head:
            if before and not after:
                buckets["regressions"].append(test_id)
            elif after and not before:
                buckets["improvements"].append(test_id)
        elif in_head:
            buckets["added_passing" if after else "added_failing"].append(test_id)
        else:
            buckets["removed_passing" if before else "removed_failing"].append(test_id)
    return Transitions(**buckets)


# -- flaky-test quarantine -----------------------------------------------------------


def load_flips(path: str | Path) -> dict[str, list[bool]]:
    """Observation history from the sidecar; missing or malformed content reads as empty."""
    from .backends.jsonfile import read_json

    try:
        payload = read_json(path)
    except (DarwinMemoError, OSError):
        return {}
    tests = payload.get("tests") if isinstance(payload, dict) else None
    if not isinstance(tests, dict):
        return {}
    return {
        str(k): list(v)
        for k, v in tests.items()
        if isinstance(v, list) and all(isinstance(x, bool) for x in v)
    }


def record_flips(
    history: Mapping[str, list[bool]],
    base: Mapping[str, bool | None],
    head: Mapping[str, bool | None],
    window: int = FLAKY_WINDOW,
) -> dict[str, list[bool]]:
    """History with this base and head observation appended, newest last, capped to ``window``.

    Skips are not observations. Tests absent from both runs are dropped.
    """
    out: dict[str, list[bool]] = {}
    for test_id in sorted(set(base) | set(head)):
        observed = list(history.get(test_id, []))
        for run in (base, head):
            value = run.get(test_id)
            if value is not None:
                observed.append(value)
        observed = observed[-window:]
        if observed:
            out[test_id] = observed
    return out


def flips(observations: list[bool]) -> int:
    """How many times adjacent observations differ."""
    return sum(1 for a, b in itertools.pairwise(observations) if a != b)


def quarantined(history: Mapping[str, list[bool]], flip_threshold: int = FLAKY_FLIPS) -> set[str]:
    """Tests whose recent history flipped at least ``flip_threshold`` times."""
    return {test_id for test_id, obs in history.items() if flips(obs) >= flip_threshold}


def save_flips(path: str | Path, history: Mapping[str, list[bool]]) -> None:
    """Write the sidecar atomically, keys sorted."""
    from .backends.jsonfile import write_json_atomic

    write_json_atomic(path, {"tests": {k: list(history[k]) for k in sorted(history)}})


# -- tickets ---------------------------------------------------------------------------


def ticket_ids(text: str) -> list[str]:
    """Every ``darwin-memo-ticket: <id>`` in ``text``, in first-occurrence order, deduped."""
    return list(dict.fromkeys(TICKET_RE.findall(text or "")))


def pending_ids(store_path: str | Path) -> set[str]:
    """Ticket ids pending in a store (the base commit's); a missing store has none.

    Raises ``InfraFailure`` when the store exists but cannot be read.
    """
    from .readonly import open_readonly

    try:
        ledger = open_readonly(store_path)
    except StoreNotFound:
        return set()
    except (DarwinMemoError, OSError) as exc:
        raise InfraFailure(f"cannot read the base store {store_path}: {exc}") from None
    with ledger:
        return {t.id for t in ledger.pending()}


# -- the whole step ----------------------------------------------------------------------


def _count(value: float | int | None, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CiInputError(f"{name} must be a finite number, got {value!r}")
    if value < 0:
        raise CiInputError(f"{name} must be >= 0, got {value!r}")
    return float(value)


def _check_mode(
    base_xml: str | Path | None,
    head_xml: str | Path | None,
    passes_before: float | None,
    passes_after: float | None,
) -> str:
    junit = base_xml is not None or head_xml is not None
    counts = passes_before is not None or passes_after is not None
    if junit and counts:
        raise CiInputError(
            "give either junit files (--base-xml and --head-xml) or pass counts "
            "(--passes-before and --passes-after), not both"
        )
    if junit:
        if base_xml is None or head_xml is None:
            raise CiInputError("junit mode needs both --base-xml and --head-xml")
        return "junit"
    if counts:
        if passes_before is None or passes_after is None:
            raise CiInputError(
                "pass-count mode needs both --passes-before and --passes-after "
                "(a missing count is never taken as zero)"
            )
        return "pass-counts"
    raise CiInputError(
        "nothing to measure: give --base-xml and --head-xml (junit files of the base and "
        "head runs), or --passes-before and --passes-after"
    )


def _positive_int(value: int, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CiInputError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def _measure_junit(
    base_xml: str | Path,
    head_xml: str | Path,
    history: Mapping[str, list[bool]],
    window: int,
    flip_threshold: int,
) -> tuple[dict[str, list[bool]], dict[str, Any], str]:
    """(new flaky history, the junit part of the result, the default detail)."""
    base = parse_junit(base_xml, "base")
    head = parse_junit(head_xml, "head")
    updated = record_flips(history, base, head, window)
    flaky = quarantined(updated, flip_threshold)
    moves = diff_runs(base, head, exclude=flaky)
    listed = sorted(flaky & (set(base) | set(head)))
    measured = {
        "delta": moves.delta(),
        "regressions": moves.regressions,
        "improvements": moves.improvements,
        "added": {"passing": moves.added_passing, "failing": moves.added_failing},
        "removed": {"passing": moves.removed_passing, "failing": moves.removed_failing},
        "quarantined": listed,
    }
    detail = (
        f"ci junit: {len(moves.improvements)} fixed, {len(moves.regressions)} broken, "
        f"{len(moves.added_passing)} added passing, {len(moves.removed_passing)} removed "
        f"passing, {len(listed)} quarantined"
    )
    return updated, measured, detail


def default_state_path(store_path: str | Path) -> Path:
    """``flaky.json`` next to the store."""
    return Path(store_path).parent / "flaky.json"


def settle_ci(
    store_path: str | Path,
    *,
    base_xml: str | Path | None = None,
    head_xml: str | Path | None = None,
    passes_before: float | None = None,
    passes_after: float | None = None,
    pr_body: str = "",
    opened_since: str | Path | None = None,
    detail: str = "",
    scale: float = 1.0,
    state: str | Path | None = None,
    window: int = FLAKY_WINDOW,
    flip_threshold: int = FLAKY_FLIPS,
    expire_after: int = 50,
) -> dict[str, Any]:
    """Measure, then settle the tickets named in ``pr_body``; returns the published JSON object.

    Everything that could make the step abstain (``InfraFailure``) or refuse
    (``CiInputError``) is checked before the store or the sidecar is touched.
    A missing store is not created: its tickets cannot be settled, the result
    carries ``"store": "missing"`` and ``"tick": null``.
    """
    from .ledger import Ledger

    mode = _check_mode(base_xml, head_xml, passes_before, passes_after)
    _positive_int(window, "the window", 1)
    _positive_int(flip_threshold, "the flip threshold", 1)
    _positive_int(expire_after, "expire-after", 0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise CiInputError(f"the scale must be a positive number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise CiInputError(f"the scale must be a positive number, got {scale!r}")

    result: dict[str, Any] = {"mode": mode}
    state_path = Path(state) if state is not None else default_state_path(store_path)
    history: dict[str, list[bool]] | None = None
    if base_xml is not None and head_xml is not None:
        history, measured, auto_detail = _measure_junit(
            base_xml, head_xml, load_flips(state_path), window, flip_threshold
        )
        result.update(measured)
    else:
        before = _count(passes_before, "--passes-before")
        after = _count(passes_after, "--passes-after")
        result["delta"] = after - before
        auto_detail = f"ci pass counts: {before:g} -> {after:g}"
    delta: float = result["delta"]

    tickets = ticket_ids(pr_body)
    if opened_since is not None:
        prior = pending_ids(opened_since)
        refused = [t for t in tickets if t in prior]
        tickets = [t for t in tickets if t not in prior]
        result["refused_not_opened_here"] = refused
    else:
        result["ticket_provenance"] = "unverified"

    settled: dict[str, bool] = {}
    tick: dict[str, Any] | None = None
    try:
        ledger = Ledger.open(store_path, resource_scale=scale, create=False) if tickets else None
    except StoreNotFound:
        ledger = None
        result["store"] = "missing"
        settled = dict.fromkeys(tickets, False)
    if ledger is not None:
        with ledger:
            for ticket_id in tickets:
                settled[ticket_id] = ledger.settle(ticket_id, delta, detail or auto_detail)
            tick = ledger.tick(expire_after=expire_after)
    result["settled"] = settled
    result["tick"] = tick
    if history is not None:
        save_flips(state_path, history)
    return result
