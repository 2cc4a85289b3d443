"""A seeded generator of synthetic but varied lessons and the queries agents ask of them.

``lesson(i)`` is a pure function of ``(seed, i)``, so a store of ``n`` lessons is
the first ``n`` of every larger one, and ``queries(n)`` can paraphrase any lesson
of the store it targets without keeping the store in memory.

The vocabulary is Zipf-distributed: a few services (``api``, ``worker``, ``web``),
actions (``restart``, ``delete``) and failures (``crashloops``, ``hangs``) appear
in a large share of lessons, and a long tail of generated names, ids, versions,
paths, ports and test names makes most lessons distinguishable. About two thirds
are written from a dozen sentence templates (agents write many lessons in one
shape); the rest is free text drawn from a Zipf word list.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator, Sequence

__all__ = ["ADVERSARIAL", "lesson", "lessons", "queries"]

#: Queries made only of words that are common in the corpus (the issue's examples first).
ADVERSARIAL = [
    "the api worker crashloops after editing",
    "restart the api or the worker when the queue hangs",
    "why does the api time out after the deploy",
    "is it safe to delete the logs of the worker",
    "the worker hangs when the queue is full on staging",
    "what should I do when the build fails on ci after editing the config",
    "restart the web service after editing the config",
    "how do I fix the flaky test in the api",
]

# -- vocabulary -------------------------------------------------------------------

_HEAD_SERVICES = (
    "api worker web scheduler auth gateway redis postgres nginx kafka celery billing "
    "search indexer ingest notifier frontend cron mailer etl payments-api user-service "
    "queue-consumer webhook-relay image-resizer report-builder feature-flags "
    "session-store rate-limiter cdn-edge metrics-agent log-shipper"
).split()

_ACTIONS = (
    "restart delete remove purge rotate rollback scale drain reindex vacuum truncate bump "
    "pin upgrade downgrade retry flush rebuild redeploy clear compact migrate disable "
    "enable kill evict resize rebalance snapshot restore cordon reload"
).split()

_OBJECTS = (
    "cache logs index queue lockfile snapshot volume certificate migration config "
    "fixture pod node replica shard table bucket secret token dependency image "
    "artifacts tmp-files wal-files sessions feature-flag cron-job connection-pool "
    "dead-letter-queue consumer-group search-index build-cache node_modules venv "
    "docker-layer-cache coverage-report"
).split()

_FAILURES = [
    "crashloops",
    "hangs",
    "times out",
    "returns 502",
    "leaks memory",
    "gets OOMKilled",
    "deadlocks",
    "drops messages",
    "fails health checks",
    "throws ConnectionResetError",
    "logs too many open files",
    "runs out of disk",
    "is slow",
    "double-charges customers",
    "loses sessions",
    "serves stale data",
    "rejects valid tokens",
    "spins at 100% cpu",
]

_CONDITIONS = [
    "after editing the config",
    "after the deploy",
    "when the queue hangs",
    "on cold start",
    "under load",
    "after a schema migration",
    "at midnight UTC",
    "after rotating the keys",
    "when redis is down",
    "after upgrading",
    "when the disk is full",
    "during the nightly backup",
    "after a node drain",
    "when the worker restarts",
    "on the first request",
]

_ENVS = "staging prod ci dev canary eu-west-1 us-east-2 ap-south-1 preview sandbox".split()

_YES = [
    "it is regenerated on the next start",
    "nothing reads it after the build",
    "the service rebuilds it lazily",
    "it only holds derived data",
    "the retention job would delete it anyway",
]
_NO = [
    "it is the only copy of the {obj}",
    "it holds writes that are not flushed yet",
    "the {svc} replays it on restart",
    "billing reconciliation reads it at month end",
    "the restore procedure needs it",
]

_CAUSES = [
    "the {obj} grows without bound",
    "a stale {obj} survives the deploy",
    "the health check hits the {obj} before it is ready",
    "the {svc2} client keeps a dead connection",
    "the {obj} is shared with {svc2}",
    "a retry storm from {svc2} saturates the {obj}",
    "the default timeout is {n}s and the {obj} needs longer",
]

_COMMON_WORDS = (
    "the a to of and in is it for on that with this be as at by not or from are we "
    "if when then after before should can will need use run check make sure set get "
    "fix fails failing error again first new old more only all any some every each "
    "service deploy build test config job file files server client request response "
    "timeout retry memory disk cpu network container pipeline branch release version "
    "debug trace metric alert incident rollout cluster region database connection "
    "thread process lock write read update delete create start stop restart worker "
    "api queue cache log logs editing crashloops hangs slow broken flaky green red"
).split()

_SYLLABLES = (
    "ka ro mi zu te van lor quin bex dra pol sif tor mek nu gar vel xo ri sta brun "
    "cal dor fen gil hab jor kel lum mor nix pra qua ser tul urk vim wex yor zan"
).split()


def _pseudo_words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    while len(seen) < n:
        w = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        seen[w] = None
    return list(seen)


def _zipf_cum(n: int, s: float = 1.07) -> list[float]:
    return list(itertools.accumulate(1.0 / (r**s) for r in range(1, n + 1)))


_TAIL_SERVICES = [
    w + rng_sfx
    for w, rng_sfx in zip(
        _pseudo_words(4000, 11),
        itertools.cycle(["", "-svc", "-api", "-worker", "-sync", "-db", "-proxy", "d"]),
        strict=False,
    )
]
_SERVICES = _HEAD_SERVICES + _TAIL_SERVICES
_SERVICE_CUM = _zipf_cum(len(_SERVICES))
_FREE_WORDS = _COMMON_WORDS + _pseudo_words(30000, 23)
_FREE_CUM = _zipf_cum(len(_FREE_WORDS), 1.0)
_OBJ_CUM = _zipf_cum(len(_OBJECTS), 0.9)
_ACT_CUM = _zipf_cum(len(_ACTIONS), 0.9)
_FAIL_CUM = _zipf_cum(len(_FAILURES), 0.9)
_COND_CUM = _zipf_cum(len(_CONDITIONS), 0.9)


def _z(rng: random.Random, items: Sequence[str], cum: Sequence[float]) -> str:
    return items[bisect.bisect_left(cum, rng.random() * cum[-1])]


def _svc(rng: random.Random) -> str:
    return _z(rng, _SERVICES, _SERVICE_CUM)


def _obj(rng: random.Random) -> str:
    return (
        _z(rng, _OBJECTS, _OBJ_CUM).replace("-", " ")
        if rng.random() < 0.5
        else _z(rng, _OBJECTS, _OBJ_CUM)
    )


def _act(rng: random.Random) -> str:
    return _z(rng, _ACTIONS, _ACT_CUM)


def _fail(rng: random.Random) -> str:
    return _z(rng, _FAILURES, _FAIL_CUM)


def _cond(rng: random.Random) -> str:
    return _z(rng, _CONDITIONS, _COND_CUM)


def _ticket(rng: random.Random) -> str:
    return f"{rng.choice(['OPS', 'INC', 'JIRA', 'SRE', 'BUG'])}-{rng.randint(100, 99999)}"


def _version(rng: random.Random) -> str:
    return f"v{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"


def _path(rng: random.Random, svc: str) -> str:
    root = rng.choice(["/var/lib", "/srv", "/opt", "/data", "/tmp", "/var/log"])
    return f"{root}/{svc}/{rng.choice(_FREE_WORDS[40:400])}{rng.randint(1, 99)}"


def _test(rng: random.Random) -> str:
    words = [rng.choice(_FREE_WORDS[20:2000]) for _ in range(rng.randint(2, 3))]
    return "test_" + "_".join(w.replace("-", "_") for w in words)


def _free(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    words = [_z(rng, _FREE_WORDS, _FREE_CUM) for _ in range(n)]
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words) + 1), _svc(rng))
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), str(rng.randint(2, 65535)))
    return " ".join(words)


# -- lessons ------------------------------------------------------------------------


def _template(rng: random.Random, t: int) -> tuple[str, str, dict[str, str]]:
    svc, svc2 = _svc(rng), _svc(rng)
    obj, act, act2 = _obj(rng), _act(rng), _act(rng)
    env, tk = rng.choice(_ENVS), _ticket(rng)
    slots = {"svc": svc, "obj": obj, "act": act, "env": env}
    if t == 0:
        ok = rng.random() < 0.6
        why = rng.choice(_YES if ok else _NO).format(obj=obj, svc=svc2)
        q = f"Is it safe to {act} the {obj} of {svc} on {env}?"
        a = f"{'Yes' if ok else 'No'}: {why} ({tk})."
    elif t == 1:
        fail, cond = _fail(rng), _cond(rng)
        slots.update(fail=fail, cond=cond)
        cause = rng.choice(_CAUSES).format(obj=obj, svc2=svc2, n=rng.choice([5, 10, 30, 60]))
        q = f"Why does {svc} {fail} {cond}?"
        a = f"Because {cause}. Fix: {act} the {obj} and {act2} {svc2} ({tk})."
    elif t == 2:
        test = _test(rng)
        slots["test"] = test
        q = f"How do I fix {test} failing in {svc} on {env}?"
        a = (
            f"{test} depends on the {obj} of {svc2}; {act} it before the run "
            f"and pin {svc2} to {_version(rng)} (see {tk})."
        )
    elif t == 3:
        fail = _fail(rng)
        slots["fail"] = fail
        q = f"What should I do when {svc} {fail} on {env}?"
        a = (
            f"{act.capitalize()} the {obj} of {svc} first; if it still {fail}, "
            f"{act2} {svc2} and page the owner ({tk})."
        )
    elif t == 4:
        path = _path(rng, svc)
        slots["path"] = path
        q = f"Which {obj} does {svc} use in {env}?"
        a = (
            f"{svc} reads {path} ({rng.randint(1, 900)}MB) in {env}; "
            f"set {svc.upper().replace('-', '_')}_{obj.upper().replace(' ', '_').replace('-', '_')}"
            f"={rng.randint(1, 4096)} to change it."
        )
    elif t == 5:
        q = f"Can I {act} {svc} during business hours?"
        a = (
            f"{'Only' if rng.random() < 0.5 else 'Not'} behind the {svc2} maintenance flag; "
            f"{act} drops in-flight requests on port {rng.randint(1024, 65535)} ({tk})."
        )
    elif t == 6:
        ver = _version(rng)
        q = f"Does {svc} {ver} still need the {obj} workaround?"
        a = f"No: fixed in {ver} (commit {rng.getrandbits(28):07x}); {act} the {obj} once."
    else:
        fail, cond = _fail(rng), _cond(rng)
        slots.update(fail=fail, cond=cond)
        q = f"{svc} {fail} {cond} in {env}: what is the runbook step?"
        a = f"{act.capitalize()} {svc}, then {act2} the {obj}; tracked in {tk}."
    return q, a, slots


def _lesson(seed: int, i: int) -> tuple[str, str, str, str, int, dict[str, str]]:
    rng = random.Random(seed * 1_000_003 + i)
    eid = f"L{i:011d}"
    source = rng.choice(["agent", "agent", "agent", "ci", "postmortem", "runbook"])
    if rng.random() < 0.68:
        t = rng.randrange(8)
        q, a, slots = _template(rng, t)
    else:
        t = -1
        q = _free(rng, 5, 12).capitalize() + "?"
        a = ". ".join(_free(rng, 6, 16) for _ in range(rng.randint(1, 3))) + "."
        slots = {}
    return eid, q, a, source, t, slots


def lesson(seed: int, i: int) -> list[str]:
    """Lesson ``i``: ``[id, question, answer, source]``."""
    eid, q, a, source, _, _ = _lesson(seed, i)
    return [eid, q, a, source]


def lessons(seed: int, n: int) -> Iterator[list[str]]:
    for i in range(n):
        yield lesson(seed, i)


# -- queries -------------------------------------------------------------------------

_PREFIXES = ["", "", "", "hey, ", "quick question: ", "agent: ", "ok so "]


def _typo(rng: random.Random, text: str) -> str:
    words = text.split()
    long_words = [k for k, w in enumerate(words) if len(w) > 5]
    if not long_words:
        return text
    k = rng.choice(long_words)
    w = words[k]
    j = rng.randrange(1, len(w) - 1)
    words[k] = w[:j] + w[j + 1 :]
    return " ".join(words)


def _paraphrase(rng: random.Random, t: int, q: str, slots: dict[str, str]) -> str:
    s = slots
    if t == 0:
        return rng.choice(
            [
                f"can I {s['act']} the {s['svc']} {s['obj']}?",
                f"ok to {s['act']} {s['obj']} for {s['svc']} in {s['env']}",
                f"is {s['act']} of the {s['obj']} on {s['svc']} safe",
            ]
        )
    if t in (1, 7):
        return rng.choice(
            [
                f"{s['svc']} {s['fail']} {s['cond']}, what now?",
                f"why is {s['svc']} {s['fail']} {s['cond']}",
                f"{s['svc']} keeps {s['fail']} in {s['env']}",
            ]
        )
    if t == 2:
        return rng.choice(
            [
                f"{s['test']} fails on {s['env']}",
                f"how to fix failing {s['test']} in {s['svc']}",
            ]
        )
    if t == 3:
        return f"{s['svc']} {s['fail']} in {s['env']}, what should I do"
    if t == 4:
        return rng.choice(
            [
                f"where does {s['svc']} keep its {s['obj']} in {s['env']}",
                f"what {s['obj']} path does {s['svc']} use",
            ]
        )
    if t == 5:
        return f"is it ok to {s['act']} {s['svc']} in the middle of the day"
    if t == 6:
        return f"do we still need the {s['obj']} workaround for {s['svc']}"
    words = [w.strip("?.,:;") for w in q.split()]
    rng.shuffle(words)
    return " ".join(words[: max(3, len(words) // 2)])


def queries(seed: int, n: int, count: int = 200) -> dict[str, list[str]]:
    """``count`` realistic queries about a store of ``n`` lessons, plus the adversarial set.

    Mix: 55% paraphrases of a lesson's question (a fifth with a typo), 15% a
    lesson's question nearly verbatim, 15% a few of a lesson's words, 15% about
    things the store does not know (generated names it never uses).
    """
    rng = random.Random(seed * 7919 + n)
    out: list[str] = []
    unknown = _pseudo_words(300, seed + 99)
    for _ in range(count):
        r = rng.random()
        if r < 0.85:
            _, q, a, _, t, slots = _lesson(seed, rng.randrange(n))
            if r < 0.55:
                text = _paraphrase(rng, t, q, slots)
                if rng.random() < 0.2:
                    text = _typo(rng, text)
            elif r < 0.70:
                text = rng.choice(_PREFIXES) + q.lower()
            else:
                words = [w.strip("?.,:;()") for w in (q + " " + a).split() if len(w) > 3]
                rng.shuffle(words)
                text = " ".join(words[: rng.randint(3, 6)])
        else:
            text = (
                f"how do I {rng.choice(_ACTIONS)} the {rng.choice(unknown)} "
                f"{rng.choice(['daemon', 'exporter', 'sidecar', 'plugin'])}"
            )
        if not text.startswith(tuple(_PREFIXES[3:])):
            text = rng.choice(_PREFIXES) + text
        out.append(text)
    return {"realistic": out, "adversarial": list(ADVERSARIAL)}


if __name__ == "__main__":  # a peek at the corpus
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for row in lessons(1, n):
        print(row)
    for q in queries(1, 1000, 20)["realistic"]:
        print("Q:", q)
