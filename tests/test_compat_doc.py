"""docs/compatibility.md names everything we add to the published darwin-memo 0.7.1.

The published surface is written down here (from spec §1 and §3 and from running
``darwin-memo==0.7.1``); ours is read from the code. Whatever ours has beyond the
published surface (a command, a flag, a ledger operation, a top-level name, a method, a
keyword argument, an extra) must be named on the page, so adding one without saying so
fails here. The numbers the page states (ticket and entry id lengths, the version) are
checked against what the code returns.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import darwin_memo
from darwin_memo import Ledger, MemoryEntry, MemoryStore
from darwin_memo.cli import build_parser
from darwin_memo.cli.ledger_cmd import build_ledger_parser

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
# Every `code span` of the page, so a name counts only where the page marks it as code.
SPANS = re.findall(r"`([^`\n]+)`", PAGE)

# The 54 names of the published top-level __all__ (spec §1, in the published order).
PUBLISHED_ALL = (
    "CONFLICT_HEADER DEFAULT_BASE_RPC DEFAULT_MERGE_THRESHOLD EMBEDDING_MERGE_THRESHOLD "
    "RENT_TIERS CycleStats Document EmbeddingFn EmbeddingRetriever EntryKind Environment "
    "EvmRpc EvmRpcError EvmSettler HashingEmbedder Ledger LexicalRetriever LocalEncoder "
    "MemoryEntry MemoryStore OllamaClient OllamaEmbedder OllamaError Outcome ProtocolAnswer "
    "QueryProtocol ReflectionEncoder RentedStorageEnv RentedTestSuiteEnv Retriever StorageEnv "
    "StoreLockedError SurvivalConfig SurvivalLoop SurvivalReport Task TestSuiteEnv Ticket "
    "Trajectory VerifiableQAEnv __version__ advance_lifecycle age_annotation assign_credit "
    "conflict_clusters consolidate death_cause decision_polarity demo_corpus is_silent "
    "newest_first ollama_available recency_weight rent_multipliers"
).split()

# The published commands and their options (spec §3.1; `darwin-memo CMD --help` of 0.7.1).
PUBLISHED_COMMANDS: dict[str, set[str]] = {
    "demo": {"--cycles", "-o", "--out"},
    "encode": {"-o", "--out", "--model"},
    "query": {"--model", "--half-life", "--kind", "--source"},
    "stats": set(),
    "ledger": {"--scale"},
    "import": {"--probation"},
    "ui": {"--port", "--no-open"},
    "top": {"--limit", "--json"},
    "why": {"--json"},
    "audit": {"--since", "--last", "--json"},
    "doctor": {"--json"},
    "render": {"-o", "--out", "--budget", "--max-lines", "--split-dir"},
    "settle-ci": {
        "--base-xml",
        "--head-xml",
        "--passes-before",
        "--passes-after",
        "--pr-body",
        "--opened-since",
        "--detail",
        "--scale",
        "--state",
        "--window",
        "--flip-threshold",
        "--expire-after",
    },
    "mcp": {"--memory", "--resource-scale"},
}
PUBLISHED_TOP_OPTIONS: set[str] = set()  # 0.7.1's `darwin-memo` has only -h

# The published `darwin-memo ledger FILE OP` operations and their options (spec §3.2).
PUBLISHED_LEDGER_OPS: dict[str, set[str]] = {
    "decide": {"-k", "--half-life", "--kind", "--source"},
    "settle": {"--detail"},
    "abandon": set(),
    "add": {"--source"},
    "forget": set(),
    "pin": set(),
    "unpin": set(),
    "tick": {"--expire-after"},
    "stats": set(),
    "obituary": set(),
}

# Public methods of the two classes people program against (spec §1.2, §1.9).
PUBLISHED_MEMBERS: dict[type, set[str]] = {
    Ledger: {
        "abandon",
        "add",
        "decide",
        "forget",
        "history",
        "import_entries",
        "load",
        "obituary",
        "pending",
        "pin",
        "save",
        "settle",
        "tick",
        "unpin",
    },
    MemoryStore: {
        "add",
        "alive",
        "bury",
        "charge_upkeep",
        "credit",
        "dead_count",
        "energy_share_by_kind",
        "from_payload",
        "get",
        "get_dead",
        "graveyard",
        "load",
        "retrieve",
        "save",
        "similarity",
        "ticks_to_starvation",
        "to_payload",
        "total_energy",
        # instance attributes
        "max_energy",
        "upkeep",
        "retriever",
        "last_upkeep_charged",
    },
}


def _resolve(dotted: str) -> Callable[..., Any]:
    module_name, _, attr_path = dotted.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


# Parameter names of published callables (inspect.signature of 0.7.1). A parameter we
# add must be named on the page.
PUBLISHED_PARAMS: dict[str, set[str]] = {
    "darwin_memo:MemoryStore.__init__": {"max_energy", "upkeep", "retriever"},
    "darwin_memo:MemoryStore.load": {"path", "retriever"},
    "darwin_memo:MemoryStore.from_payload": {"payload", "retriever"},
    "darwin_memo:MemoryStore.bury": {"entry_id"},
    "darwin_memo:MemoryStore.retrieve": {
        "query",
        "k",
        "half_life",
        "now_cycle",
        "kind",
        "source",
    },
    "darwin_memo:Ledger.__init__": {
        "store",
        "protocol",
        "config",
        "resource_scale",
        "event_log",
        "event_log_max_bytes",
        "event_log_keep",
    },
    "darwin_memo:Ledger.load": {
        "path",
        "protocol",
        "config",
        "resource_scale",
        "event_log",
        "retriever",
    },
    "darwin_memo:Ledger.decide": {"query", "k", "half_life", "kind", "source"},
    "darwin_memo:Ledger.settle": {"ticket_id", "delta", "detail"},
    "darwin_memo:Ledger.tick": {"expire_after"},
    "darwin_memo:Ledger.import_entries": {"entries", "source", "probation"},
    "darwin_memo:MemoryEntry": {
        "question",
        "answer",
        "kind",
        "sources",
        "energy",
        "born_cycle",
        "recorded_ts",
        "last_used_cycle",
        "uses",
        "lineage",
        "pinned",
        "probation",
        "juvenile",
        "imported_from",
        "imported_at",
        "id",
    },
    "darwin_memo:ProtocolAnswer": {
        "text",
        "deciding_entry",
        "supporting_entries",
        "annotated_text",
        "refused",
    },
    "darwin_memo:QueryProtocol.__init__": {
        "store",
        "client",
        "conflict_threshold",
        "refuse_unparseable",
    },
    "darwin_memo:SurvivalConfig": {
        "cycles",
        "credit_gain",
        "supporting_share",
        "consolidate_every",
        "merge_threshold",
        "conflict_threshold",
        "write_experience",
        "resource_scale",
        "admission_window",
        "upkeep_requires_settlement",
        "merge_source_policy",
    },
    "darwin_memo:consolidate": {"store", "cycle", "threshold", "exclude", "source_policy"},
    "darwin_memo:EmbeddingRetriever.__init__": {"embed", "min_similarity"},
    "darwin_memo:OllamaClient.__init__": {
        "model",
        "base_url",
        "temperature",
        "timeout",
        "max_tokens",
        "think",
    },
    "darwin_memo:OllamaEmbedder.__init__": {"model", "base_url", "timeout"},
    "darwin_memo:ReflectionEncoder.__init__": {"client", "max_workers"},
    "darwin_memo:StorageEnv.__init__": {"root", "files_per_cycle", "seed"},
    "darwin_memo:RentedStorageEnv.__init__": {
        "root",
        "files_per_cycle",
        "seed",
        "hold_cost",
        "rent_tier",
    },
    "darwin_memo:TestSuiteEnv.__init__": {"root", "defects_per_cycle", "seed"},
    "darwin_memo:RentedTestSuiteEnv.__init__": {
        "root",
        "defects_per_cycle",
        "seed",
        "hold_cost",
    },
    "darwin_memo.llm:AnthropicClient.__init__": {"model", "max_tokens"},
    "darwin_memo.llm:OpenAICompatClient.__init__": {"model", "base_url", "max_tokens"},
    "darwin_memo.diagnose:selection_findings": {
        "decides",
        "silent",
        "nonzero_outcomes",
        "settles",
    },
    "darwin_memo.ci:diff_runs": {"base", "head"},
    "darwin_memo.ui:serve": {"memory", "port", "host"},
    "darwin_memo.testsuite_env:run_suite": {"app_source", "test_source"},
    "darwin_memo.ledger:note_text": {"event"},
    "darwin_memo.mcp_server:main": {"argv"},
    "darwin_memo.integrations.openai_agents:DarwinMemoSession.__init__": {
        "session_id",
        "transcript_dir",
        "ledger",
        "lesson_path",
        "resource_scale",
    },
}

# Extras of the published distribution (its Requires-Dist markers).
PUBLISHED_EXTRAS = {"anthropic", "openai", "embeddings", "organic", "mcp", "dev"}


def named(name: str) -> bool:
    """True when ``name`` occurs as a word inside some code span of the page."""
    word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    return any(word.search(span) for span in SPANS)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return dict(actions[0].choices)


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        flag
        for action in parser._actions
        for flag in action.option_strings
        if flag not in ("-h", "--help")
    }


COMMANDS = subparsers(build_parser())
LEDGER_OPS = subparsers(build_ledger_parser())


def test_the_published_surface_is_the_one_the_spec_lists() -> None:
    # The lists above are the yardstick; make sure they are the published ones.
    assert len(PUBLISHED_ALL) == 54 == len(set(PUBLISHED_ALL))
    assert set(PUBLISHED_ALL) <= set(darwin_memo.__all__)
    assert set(PUBLISHED_COMMANDS) <= set(COMMANDS)
    assert set(PUBLISHED_LEDGER_OPS) <= set(LEDGER_OPS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_row(name: str) -> None:
    assert named(f"darwin-memo {name}"), f"`darwin-memo {name}` has no row in compatibility.md"


def test_every_command_we_add_is_explained() -> None:
    added = sorted(set(COMMANDS) - set(PUBLISHED_COMMANDS))
    assert added, "we add `migrate`; the published list above is wrong if nothing is added"
    for name in added:
        row = next(line for line in PAGE.splitlines() if f"`darwin-memo {name}`" in line)
        assert "no such command" in row, f"the row of `darwin-memo {name}` must say it is new"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_we_add_is_named(name: str) -> None:
    published = PUBLISHED_COMMANDS.get(name, set())
    for flag in sorted(options(COMMANDS[name]) - published):
        assert named(flag), f"`darwin-memo {name} {flag}` is not in compatibility.md"


def test_top_level_options_we_add_are_named() -> None:
    for flag in sorted(options(build_parser()) - PUBLISHED_TOP_OPTIONS):
        assert named(f"darwin-memo {flag}") or named(flag), flag


def test_every_ledger_operation_and_option_we_add_is_named() -> None:
    for op, parser in sorted(LEDGER_OPS.items()):
        if op not in PUBLISHED_LEDGER_OPS:
            assert named(op), f"ledger operation `{op}` is not in compatibility.md"
        for flag in sorted(options(parser) - PUBLISHED_LEDGER_OPS.get(op, set())):
            assert named(flag), f"`ledger {op} {flag}` is not in compatibility.md"


def test_every_top_level_name_we_add_is_named() -> None:
    added = sorted(set(darwin_memo.__all__) - set(PUBLISHED_ALL))
    assert added  # the exceptions and Books, at least
    for name in added:
        assert named(name), f"darwin_memo.{name} (beyond the published 54) is not on the page"


@pytest.mark.parametrize("cls", list(PUBLISHED_MEMBERS), ids=lambda c: c.__name__)
def test_every_public_member_we_add_is_named(cls: type) -> None:
    ours = {name for name in dir(cls) if not name.startswith("_")}
    if cls is MemoryStore:
        ours |= {name for name in vars(MemoryStore()) if not name.startswith("_")}
    for name in sorted(ours - PUBLISHED_MEMBERS[cls]):
        assert named(name), f"{cls.__name__}.{name} is not in compatibility.md"


@pytest.mark.parametrize("dotted", sorted(PUBLISHED_PARAMS))
def test_every_keyword_we_add_is_named(dotted: str) -> None:
    target = _resolve(dotted)
    parameters = set(inspect.signature(target).parameters) - {"self", "cls"}
    for name in sorted(parameters - PUBLISHED_PARAMS[dotted]):
        assert named(name), f"{dotted} takes `{name}`, which compatibility.md does not name"


def test_the_ticket_id_length_the_page_states_is_what_decide_returns() -> None:
    stated = re.search(r"Ticket ids are (\d+) lowercase hex digits", PAGE)
    assert stated, "the page must say how long ticket ids are"
    ledger = Ledger(MemoryStore())
    ledger.add("Are cache chunk files safe to delete?", "Yes: they are disposable.")
    ticket = ledger.decide("Are cache chunk files safe to delete?")
    assert ticket.provenance  # a real, pending ticket
    assert len(ticket.id) == int(stated.group(1))
    assert re.fullmatch(r"[0-9a-f]+", ticket.id)
    published = re.search(r"\| ticket ids \| (\d+) lowercase hex digits \|", PAGE)
    assert published and int(published.group(1)) == 12  # spec §0
    entries = re.search(r"entry ids stay (\d+) hex digits", PAGE)
    assert entries and len(MemoryEntry("q", "a").id) == int(entries.group(1))


def test_the_version_the_page_states_is_ours() -> None:
    row = next(line for line in PAGE.splitlines() if "`darwin_memo.__version__`" in line)
    assert f"`{darwin_memo.__version__}`" in row


def test_every_extra_we_change_or_add_is_named() -> None:
    # Read the [project.optional-dependencies] table by hand: tomllib is 3.11+.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    ours = set(re.findall(r"^([a-z][a-z0-9_-]*)\s*=", table, flags=re.MULTILINE))
    assert {"mcp", "dev"} <= ours
    for extra in sorted(ours | PUBLISHED_EXTRAS):
        if extra == "dev":
            continue  # development tools, not a user-facing difference
        assert named(extra), f"the extra `{extra}` is not in compatibility.md"
    assert 'requires-python = ">=3.10"' in text
    assert named(">=3.10")


# The published MCP tools and their parameters (`tools/list` of 0.7.1's server).
PUBLISHED_TOOLS: dict[str, set[str]] = {
    "memory_query": {"query", "half_life"},
    "memory_settle": {"ticket_id", "delta", "detail"},
    "memory_abandon": {"ticket_id"},
    "memory_add": {"question", "answer", "source"},
    "memory_tick": set(),
    "memory_stats": set(),
    "memory_obituary": {"entry_id"},
    "memory_audit": {"since", "last"},
}


def test_the_mcp_tools_are_the_published_eight_and_added_parameters_are_named() -> None:
    pytest.importorskip("mcp")
    from darwin_memo.mcp_tools import TOOL_NAMES, MemoryTools

    assert set(TOOL_NAMES) == set(PUBLISHED_TOOLS)
    for tool, published in PUBLISHED_TOOLS.items():
        ours = set(inspect.signature(getattr(MemoryTools, tool)).parameters) - {"self"}
        assert published <= ours, f"{tool} lost a published parameter"
        for name in sorted(ours - published):
            row = next(line for line in PAGE.splitlines() if f"`{tool}`" in line and "|" in line)
            assert f"`{name}`" in row, f"{tool} takes `{name}`; its row on the page must name it"
