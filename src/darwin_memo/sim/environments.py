"""Environments: worlds that measure what an answer did, never grade it.

An environment hands out tasks for a cycle and, for each answer, acts on it
and reports the change in a conserved resource (bytes on disk, passing tests,
verified answers) as an ``Outcome``. Three rules shape everything here:

* **Read the action, not the wording.** ``decision_polarity`` turns free text
  into act / refuse / silent with a small whole-word vocabulary. Negative
  markers win over positive ones, and a positive marker right after a
  negation ("not redundant") does not count.
* **Measure for real.** ``StorageEnv`` writes real files of random bytes and
  deletes them when told to; what it pays is the size the file had on disk.
  Destroying a protected file costs three times its size (the restore).
* **Each (seed, cycle) world is independent.** ``cycle_rng`` seeds a fresh
  ``random.Random`` from a SHA-256 of ``"{stream}:{seed}:{cycle}"``, so a cycle
  can be replayed alone and two streams never share state.

Silence is conservative in ``StorageEnv`` (keep the file, earn nothing);
``RentedStorageEnv`` prices it in byte-cycles instead, with rent tiers that bill
different categories but cost the same per task on average.

Environments that write files own a scratch directory. ``cleanup()`` removes
it; they are context managers; and a ``weakref.finalize`` removes it at garbage
collection or interpreter exit if nobody called ``cleanup()``. Only
directories the environment created are ever removed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import random
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, TypeVar, runtime_checkable

from ..records.entry import Outcome, Task

__all__ = [
    "NEGATIVE_MARKERS",
    "POSITIVE_MARKERS",
    "RENT_TIERS",
    "Environment",
    "RentedStorageEnv",
    "StorageEnv",
    "VerifiableQAEnv",
    "cycle_rng",
    "decision_polarity",
    "rent_multipliers",
]


@runtime_checkable
class Environment(Protocol):
    """What the survival loop needs from a world.

    ``resource_scale`` converts the environment's unit (bytes, tests, ...) into
    energy: an outcome's delta is divided by it before credit is assigned.
    """

    resource_scale: float

    def tasks(self, cycle: int) -> list[Task]:
        """The decisions to make in this cycle."""
        ...

    def verify(self, task: Task, answer_text: str) -> Outcome:
        """Act on the answer and report the measured change."""
        ...


# --------------------------------------------------------------------------- #
# Reading an action
# --------------------------------------------------------------------------- #

#: Phrases that read as "do not act"; any whole-word hit decides False.
NEGATIVE_MARKERS: tuple[str, ...] = (
    "must be retained",
    "must not be deleted",
    "never delete",
    "do not delete",
    "not safe to delete",
    "must be kept",
    "should be kept",
    "keep it",
    "keep this",
    "protected",
    "required for",
    "retained indefinitely",
    "must not be applied",
    "should not be applied",
    "do not apply",
    "load-bearing",
    "never cancel",
    "do not cancel",
)

#: Phrases that read as "act", unless a negation sits just before them.
POSITIVE_MARKERS: tuple[str, ...] = (
    "safe to delete",
    "may be deleted",
    "can be deleted",
    "safe to remove",
    "may be removed",
    "can be removed",
    "redundant",
    "disposable",
    "should be applied",
    "safe to apply",
    "may be applied",
)

_NEGATIONS = ("not", "never", "isn't", "aren't", "don't", "do not", "no longer", "wouldn't")

# A negation, then at most two words, then the end of the text before a marker.
_NEGATED_BEFORE = re.compile(
    r"(?<![\w'])(?:"
    + "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in _NEGATIONS)
    + r")(?:[\s,;:]+[\w'-]+){0,2}[\s,;:]*$"
)
_YES = re.compile(r"(?<![\w'-])yes(?![\w'-])")
_NO = re.compile(r"(?<![\w'-])no(?![\w'-])")


@functools.lru_cache(maxsize=512)
def _marker_pattern(marker: str) -> re.Pattern[str]:
    """Whole-word, whitespace-tolerant pattern for one (lowercase) marker."""
    words = marker.split()
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(r"(?<![\w'])" + body + r"(?![\w'])")


def _clean_markers(markers: Iterable[str]) -> list[str]:
    return [" ".join(m.lower().split()) for m in markers if m and m.strip()]


def decision_polarity(
    answer_text: str,
    extra_positive: Iterable[str] = (),
    extra_negative: Iterable[str] = (),
) -> bool | None:
    """Read an answer as act (``True``), refuse (``False``) or silent (``None``).

    Negative markers are checked first and any whole-word hit gives ``False``.
    A positive marker gives ``True`` unless it is preceded by a negation
    (``not``, ``never``, ``isn't``, ``aren't``, ``don't``, ``do not``,
    ``no longer``, ``wouldn't``) with at most two words in between. Failing
    both, a bare ``yes`` gives ``True`` and a bare ``no`` gives ``False``.
    Callers teach it other verbs with ``extra_positive`` / ``extra_negative``
    (``"safe to cancel"`` is silent by default).
    """
    text = answer_text.lower().replace("\u2019", "'")
    if not text.strip():
        return None
    for marker in (*NEGATIVE_MARKERS, *_clean_markers(extra_negative)):
        if _marker_pattern(marker).search(text):
            return False
    for marker in (*POSITIVE_MARKERS, *_clean_markers(extra_positive)):
        for hit in _marker_pattern(marker).finditer(text):
            if not _NEGATED_BEFORE.search(text, 0, hit.start()):
                return True
    if _YES.search(text):
        return True
    if _NO.search(text):
        return False
    return None


# --------------------------------------------------------------------------- #
# Randomness
# --------------------------------------------------------------------------- #


def cycle_rng(seed: int, cycle: int, stream: str = "") -> random.Random:
    """A generator for one (seed, cycle) world, independent of every other.

    Seeded with the integer value of ``sha256(f"{stream}:{seed}:{cycle}")``,
    so replaying a cycle alone gives the same draw as a full run.
    """
    digest = hashlib.sha256(f"{stream}:{seed}:{cycle}".encode()).hexdigest()
    return random.Random(int(digest, 16))


# --------------------------------------------------------------------------- #
# Scratch directories
# --------------------------------------------------------------------------- #


class _Scratch:
    """The directories an environment created, and how to remove them.

    Kept apart from the environment so a ``weakref.finalize`` can hold it
    without keeping the environment alive.
    """

    def __init__(self, root: str | os.PathLike[str] | None, prefix: str) -> None:
        if root is None:
            self.root = Path(tempfile.mkdtemp(prefix=prefix))
            self.owned = True
            self.created = True
        else:
            self.root = Path(root)
            self.owned = False
            self.created = not self.root.exists()
            self.root.mkdir(parents=True, exist_ok=True)
        self.live: list[Path] = []
        self.closed = False

    def fresh(self, name: str) -> Path:
        """Remove the previous sandbox and create ``root/name``."""
        if self.closed:
            raise RuntimeError(
                "this environment was cleaned up; create a new one to run more cycles"
            )
        self.drop_live()
        path = self.root / name
        try:
            path.mkdir()
        except FileExistsError:
            raise FileExistsError(
                f"{path} already exists and this environment did not create it; "
                "give the environment an empty root (or none, for a temp dir)"
            ) from None
        self.live.append(path)
        return path

    def drop_live(self) -> None:
        while self.live:
            shutil.rmtree(self.live.pop(), ignore_errors=True)

    def contains(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return False

    def remove(self) -> None:
        """Remove what this environment created (and nothing else)."""
        self.closed = True
        self.drop_live()
        if self.owned:
            shutil.rmtree(self.root, ignore_errors=True)
        elif self.created:
            with contextlib.suppress(OSError):
                self.root.rmdir()  # only if empty: never delete a user's files


_E = TypeVar("_E", bound="_SandboxedEnv")


class _SandboxedEnv:
    """Shared plumbing: a scratch root, ``cleanup()`` and the context manager."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self._scratch = _Scratch(root, prefix="darwin-memo-")
        self._finalizer = weakref.finalize(self, self._scratch.remove)

    @property
    def root(self) -> Path:
        """The directory the per-cycle sandboxes live in."""
        return self._scratch.root

    def cleanup(self) -> None:
        """Remove every directory this environment created. Idempotent."""
        self._finalizer()

    def __enter__(self: _E) -> _E:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


# --------------------------------------------------------------------------- #
# Storage
# --------------------------------------------------------------------------- #

_KIB = 1024


@dataclass(frozen=True)
class _Category:
    name: str
    pattern: str  # relative path, with {i}
    kib: tuple[int, int]  # inclusive size range
    safe: bool

    @property
    def mean_kib(self) -> float:
        return (self.kib[0] + self.kib[1]) / 2


_CATEGORIES: tuple[_Category, ...] = (
    _Category("old_log", "logs/app-{i}.log", (40, 120), True),
    _Category("cache", "cache/chunk-{i}.cache", (30, 90), True),
    _Category("tmp_artifact", "tmp/build-{i}.tmp", (20, 60), True),
    _Category("database", "data/store-{i}.db", (50, 150), False),
    _Category("report", "reports/quarterly-{i}.pdf", (30, 80), False),
)

#: Rent tiers for ``RentedStorageEnv``: who pays for being kept.
RENT_TIERS: tuple[str, ...] = ("uniform", "aligned", "inverted")


def rent_multipliers(tier: str) -> dict[str, float]:
    """Per-category rent multiplier for a tier, equal expected rent per task.

    ``uniform`` bills every category at 1.0. ``aligned`` bills only the
    disposable categories and ``inverted`` only the protected ones, each at
    the multiplier that keeps the expected rent of a uniformly drawn file
    (mean sizes from the category size ranges) equal to ``uniform``'s.
    """
    if tier not in RENT_TIERS:
        raise ValueError(f"unknown rent tier {tier!r}; choose one of {', '.join(RENT_TIERS)}")
    if tier == "uniform":
        return {c.name: 1.0 for c in _CATEGORIES}
    billed = [c for c in _CATEGORIES if c.safe == (tier == "aligned")]
    all_mass = sum(c.mean_kib for c in _CATEGORIES)
    billed_mass = sum(c.mean_kib for c in billed)
    factor = round(all_mass / billed_mass, 4)
    return {c.name: (factor if c in billed else 0.0) for c in _CATEGORIES}


def _article(phrase: str) -> str:
    return "an" if phrase[:1].lower() in "aeiou" else "a"


class StorageEnv(_SandboxedEnv):
    """Real files in a sandbox; deleting the right ones frees bytes.

    Each cycle replaces the previous sandbox with ``root/cycle-<n>/`` holding
    ``files_per_cycle`` files of random bytes, one task per file. An answer
    that reads as act deletes the file: a disposable one pays its size in
    bytes, a protected one is restored (zeros of the same size) at three
    times its size. Anything else keeps the file and pays nothing.
    """

    resource_scale: float = 100000.0

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        files_per_cycle: int = 12,
        seed: int = 7,
    ) -> None:
        if files_per_cycle < 0:
            raise ValueError(f"files_per_cycle must be >= 0, got {files_per_cycle}")
        self.files_per_cycle = files_per_cycle
        self.seed = seed
        super().__init__(root)

    def tasks(self, cycle: int) -> list[Task]:
        rng = cycle_rng(self.seed, cycle, "storage")
        sandbox = self._scratch.fresh(f"cycle-{cycle}")
        out: list[Task] = []
        for i in range(self.files_per_cycle):
            cat = rng.choice(_CATEGORIES)
            size = rng.randint(*cat.kib) * _KIB
            rel = Path(cat.pattern.format(i=i))
            path = sandbox / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rng.randbytes(size))
            label = cat.name.replace("_", " ")
            prompt = (
                f"Is it safe to delete the file {rel.name} "
                f"({_article(label)} {label} file under {rel.parent.as_posix()}/)?"
            )
            out.append(
                Task(
                    prompt,
                    {"path": str(path), "safe": cat.safe, "size": size, "category": cat.name},
                )
            )
        return out

    def verify(self, task: Task, answer_text: str) -> Outcome:
        if decision_polarity(answer_text) is not True:
            return Outcome(0.0, "kept")
        path = Path(task.context["path"])
        if not self._scratch.contains(path):
            raise ValueError(f"{path} is not inside this environment's sandbox {self.root}")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return Outcome(0.0, "freed 0 bytes")
        path.unlink()
        if task.context["safe"]:
            return Outcome(float(size), f"freed {size} bytes")
        path.write_bytes(bytes(size))  # the restore: same size, contents lost
        return Outcome(-3.0 * size, f"destroyed protected data, restore cost {3 * size} bytes")


class RentedStorageEnv(StorageEnv):
    """``StorageEnv`` where keeping a file costs rent (byte-cycles).

    Acting, or ``hold_cost == 0``, is exactly ``StorageEnv``. Keeping (or
    silence) pays ``hold_cost * rent[category] * size``; a category the tier
    exempts pays nothing.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        files_per_cycle: int = 12,
        seed: int = 7,
        hold_cost: float = 1.0,
        rent_tier: str = "uniform",
    ) -> None:
        if hold_cost < 0:
            raise ValueError(f"hold_cost must be >= 0, got {hold_cost}")
        self.hold_cost = float(hold_cost)
        self.rent_tier = rent_tier
        self.rent = rent_multipliers(rent_tier)
        super().__init__(root, files_per_cycle, seed)

    def verify(self, task: Task, answer_text: str) -> Outcome:
        if self.hold_cost == 0 or decision_polarity(answer_text) is True:
            return super().verify(task, answer_text)
        cost = self.hold_cost * self.rent[task.context["category"]] * task.context["size"]
        if cost == 0:
            return super().verify(task, answer_text)
        return Outcome(-cost, f"kept, {cost:.0f} bytes still occupied")


# --------------------------------------------------------------------------- #
# Question answering
# --------------------------------------------------------------------------- #


class VerifiableQAEnv:
    """Questions with a known answer; containing it earns, anything else costs.

    Each cycle samples ``per_cycle`` pairs. An answer containing the expected
    string (case-insensitive) is ``+1.0``; any other answer, silence
    included, is ``-0.5``.
    """

    resource_scale: float = 1.0

    def __init__(
        self, qa_pairs: Sequence[tuple[str, str]], per_cycle: int = 5, seed: int = 7
    ) -> None:
        if per_cycle < 0:
            raise ValueError(f"per_cycle must be >= 0, got {per_cycle}")
        self.qa_pairs = [(str(q), str(a)) for q, a in qa_pairs]
        self.per_cycle = per_cycle
        self.seed = seed

    def tasks(self, cycle: int) -> list[Task]:
        rng = cycle_rng(self.seed, cycle, "qa")
        picked = rng.sample(self.qa_pairs, min(self.per_cycle, len(self.qa_pairs)))
        return [Task(q, {"expected": a}) for q, a in picked]

    def verify(self, task: Task, answer_text: str) -> Outcome:
        expected = str(task.context["expected"])
        if expected.lower() in answer_text.lower():
            return Outcome(1.0, "verified")
        return Outcome(-0.5, f"expected '{expected}'")
