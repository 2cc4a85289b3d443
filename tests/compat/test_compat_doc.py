"""docs/compatibility.md names everything we add to the published darwin-memo 0.7.1.

The published surface is written down here (from spec §1 and §3 and from running
``darwin-memo==0.7.1``); ours is read from the code. Whatever ours has beyond the
published surface (a command, a flag, a ledger operation, a top-level name, a method, a
keyword argument, an extra, a member of the organic layer) must be named on the page,
so adding one without saying so fails here. The numbers the page states (ticket and entry
id lengths, the version, the settle limit, the stdin, HTTP, JSON-depth and request caps,
the SQLite deadline, the number of top-level names) and the requirements of each extra
are checked against what the code does or holds.
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

ROOT = Path(__file__).resolve().parents[2]
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


# Public members of the published organic layer (``dir`` of each class of 0.7.1's
# darwin_memo.organic, plus the attributes its instances set).
PUBLISHED_ORGANIC: dict[str, set[str]] = {
    "OrganicMemory": {
        "centrality",
        "decay",
        "importance",
        "recall",
        "related",
        "surface",
        "sync",
        "upkeep_scale",
        "earned",
        "graph",
        "hebbian",
        "state",
        "store",
    },
    "AssociativeGraph": {"add", "ids", "ordinal", "related", "remove", "backend", "embedder"},
    "ActivationState": {"bump", "decay", "level"},
    "HebbianWeights": {"decay", "neighbors", "strengthen", "weight"},
    "EarnedImportance": {"recalls", "record_recall", "scores", "upkeep_scale"},
    "BruteForceBackend": {"add", "remove", "search"},
    "TurbovecBackend": {"add", "remove", "search"},
}
PUBLISHED_ORGANIC_NAMES = {
    "ActivationState",
    "AssociativeGraph",
    "BruteForceBackend",
    "EarnedImportance",
    "HebbianWeights",
    "OrganicMemory",
    "build_graph",
    "detail",
    "store_related",
    "surface",
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
    "darwin_memo.ci:Transitions.delta": {"exclude"},
    "darwin_memo.ui:serve": {"memory", "port", "host"},
    "darwin_memo.testsuite_env:run_suite": {"app_source", "test_source"},
    "darwin_memo.testsuite_env:run_suite_detail": {"app_source", "test_source"},
    "darwin_memo.ledger:note_text": {"event"},
    "darwin_memo.mcp_server:main": {"argv"},
    "darwin_memo.mcp_server:build_server": {"memory_path", "resource_scale"},
    "darwin_memo.observe:audit_digest": {"events", "store"},
    "darwin_memo.temporal:render_consult": {"hits", "similarity", "threshold"},
    "darwin_memo.evm:EvmRpc.__init__": {"url", "timeout"},
    "darwin_memo.evm:EvmRpc.call": {"method", "params"},
    "darwin_memo.evm:EvmSettler.measure": {"start_timestamp", "end_timestamp"},
    "darwin_memo:assign_credit": {
        "store",
        "deciding_entry",
        "supporting_entries",
        "delta",
        "resource_scale",
        "config",
        "cycle",
    },
    "darwin_memo:advance_lifecycle": {"store", "applied", "delta", "deciding_entry"},
    "darwin_memo:is_silent": {"answer_text", "deciding", "supporting"},
    "darwin_memo.organic:OrganicMemory.__init__": {"store", "embedder", "backend"},
    "darwin_memo.organic:OrganicMemory.recall": {"entry_id", "k", "spread"},
    "darwin_memo.organic:OrganicMemory.importance": {"entry_id", "centrality"},
    "darwin_memo.organic:AssociativeGraph.__init__": {"embedder", "backend"},
    "darwin_memo.organic:AssociativeGraph.related": {"entry_id", "k"},
    "darwin_memo.organic:ActivationState.bump": {"entry_id", "to"},
    "darwin_memo.organic:ActivationState.decay": {"factor"},
    "darwin_memo.organic:HebbianWeights.strengthen": {"a", "b", "by"},
    "darwin_memo.organic:HebbianWeights.decay": {"factor"},
    "darwin_memo.organic:EarnedImportance.scores": {"store", "centrality"},
    "darwin_memo.organic:EarnedImportance.upkeep_scale": {"store", "centrality"},
    "darwin_memo.organic:BruteForceBackend.search": {"vector", "k", "exclude"},
    "darwin_memo.organic:build_graph": {"store", "embedder", "backend"},
    "darwin_memo.organic:store_related": {"store", "entry_id", "k", "embedder", "backend"},
    "darwin_memo.organic:surface": {"entry", "state", "threshold"},
    "darwin_memo.organic.turbovec_backend:TurbovecBackend.__init__": {"dim", "bit_width"},
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


def row_of(first_cell: str) -> str:
    """The table row whose first cell is ``first_cell`` (the whole line)."""
    rows = [line for line in PAGE.splitlines() if line.startswith(f"| {first_cell} |")]
    assert len(rows) == 1, f"expected one row `| {first_cell} |`, found {len(rows)}"
    return rows[0]


def test_every_command_we_add_is_explained() -> None:
    added = sorted(set(COMMANDS) - set(PUBLISHED_COMMANDS))
    assert added, "we add `migrate`; the published list above is wrong if nothing is added"
    for name in added:
        row = row_of(f"`darwin-memo {name}`")
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
            row = row_of(f"`darwin-memo ledger STORE {op}`")
            assert "no such operation" in row, f"the row of `ledger {op}` must say it is new"
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
    from darwin_memo.mcp.tools import TOOL_NAMES, MemoryTools

    assert set(PUBLISHED_TOOLS) <= set(TOOL_NAMES)
    for tool in sorted(set(TOOL_NAMES) - set(PUBLISHED_TOOLS)):  # a tool we add
        row = next((line for line in PAGE.splitlines() if f"`{tool}`" in line and "|" in line), "")
        assert row, f"the added tool `{tool}` has no row on the page"
        params = set(inspect.signature(getattr(MemoryTools, tool)).parameters) - {"self"}
        for name in sorted(params):
            assert f"`{name}`" in row, f"{tool} takes `{name}`; its row on the page must name it"
    for tool, published in PUBLISHED_TOOLS.items():
        ours = set(inspect.signature(getattr(MemoryTools, tool)).parameters) - {"self"}
        assert published <= ours, f"{tool} lost a published parameter"
        for name in sorted(ours - published):
            row = next(line for line in PAGE.splitlines() if f"`{tool}`" in line and "|" in line)
            assert f"`{name}`" in row, f"{tool} takes `{name}`; its row on the page must name it"


def section(title: str) -> str:
    """The text of the page's ``## title`` section."""
    start = PAGE.index(f"\n## {title}\n")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end != -1 else len(PAGE)]


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def optional_dependencies() -> dict[str, list[str]]:
    """``[project.optional-dependencies]`` of pyproject.toml, read by hand (3.10 has no
    tomllib): extra name -> its requirement strings."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    table = "\n".join(line for line in table.splitlines() if not line.lstrip().startswith("#"))
    found = re.findall(r"^([a-z][a-z0-9_-]*)\s*=\s*\[(.*?)\]\s*$", table, re.MULTILINE | re.DOTALL)
    return {name: re.findall(r'"([^"]+)"', body) for name, body in found}


def test_each_extra_row_names_what_the_extra_installs() -> None:
    package = section("Package")
    extras = optional_dependencies()
    assert extras["organic"], "the organic extra exists"
    for extra, requirements in sorted(extras.items()):
        if extra == "dev":
            continue
        rows = [
            line for line in package.splitlines() if line.startswith("|") and f"`{extra}`" in line
        ]
        assert rows, f"the extra `{extra}` has no row under Package"
        published, ours = cells(rows[0])[1:3]
        if not requirements:
            assert "empty" in ours, f"the `{extra}` row must say the extra is empty"
        elif ours == "same":
            # The published column must then list exactly what ours installs.
            stated = set(re.findall(r"`([^`]+)`", published))
            assert stated == set(requirements), f"`{extra}`: {stated} vs pyproject {requirements}"
        else:
            for requirement in requirements:
                dist = re.match(r"[A-Za-z0-9_.-]+", requirement)
                assert dist and re.search(rf"(?<![\w-]){re.escape(dist.group())}(?![\w-])", ours), (
                    f"the `{extra}` row does not name {dist.group() if dist else requirement}"
                )


def stated(pattern: str) -> str:
    """The one value ``pattern`` (one group) captures on the page."""
    found = re.findall(pattern, PAGE)
    assert found, f"the page no longer says {pattern!r}"
    assert len(set(found)) == 1, f"the page states {pattern!r} differently: {found}"
    return str(found[0])


def test_the_settle_limit_is_the_codes(tmp_path: Path) -> None:
    from darwin_memo.economy import rules as economy

    limit = float(stated(r"a delta larger than ([0-9.e+]+) either way"))
    assert limit == economy.MAX_MAGNITUDE
    assert float(stated(r"outside \[-([0-9.e+]+), max_energy\]")) == limit
    assert float(stated(r"a `max_energy` above ([0-9.e+]+) is refused")) == limit
    ledger = Ledger.open(tmp_path / "memory.json", create=True)  # journals
    ledger.add("Are cache chunk files safe to delete?", "Yes: they are disposable.")
    ticket = ledger.decide("Are cache chunk files safe to delete?")
    assert ledger.settle(ticket.id, limit * 1.5) is False
    assert ledger.settle(ticket.id, -limit * 1.5) is False
    assert [t.id for t in ledger.pending()] == [ticket.id]  # the page: it stays pending
    assert list(ledger.events())[-1]["event"] == "settle_rejected"
    assert ledger.settle(ticket.id, limit) is True  # the limit itself is a delta
    ledger.close()


def test_the_stdin_limit_is_the_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from darwin_memo.cli import common
    from darwin_memo.cli.common import CliError, read_text_arg

    limit = int(stated(r"from stdin, up to ([\d,]+) bytes").replace(",", ""))
    assert "1 MiB characters" in PAGE and common.MAX_TEXT_CHARS == 1024 * 1024

    def feed(data: bytes) -> str:
        monkeypatch.setattr(common, "_stdin_used", False)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        return read_text_arg("-", "the answer")

    widest = "\U0001f600" * common.MAX_TEXT_CHARS + "\r\n"  # 4 bytes a character
    assert len(widest.encode()) == limit
    assert feed(widest.encode()) == "\U0001f600" * common.MAX_TEXT_CHARS
    with pytest.raises(CliError, match="over"):
        feed(b"a" + widest.encode())


def test_the_http_limits_are_the_codes() -> None:
    from darwin_memo import evm
    from darwin_memo.answer import http as httpwire
    from darwin_memo.llm import parse_json_array

    mib = int(stated(r"bodies over (\d+) MiB refused \(`httpwire\.MAX_RESPONSE_BYTES`\)"))
    assert mib * 1024 * 1024 == httpwire.MAX_RESPONSE_BYTES
    rpc = row_of("`EvmRpc` transport")
    ours = cells(rpc)[2]
    rpc_mib = re.search(r"replies over (\d+) MiB refused", ours)
    assert rpc_mib and int(rpc_mib.group(1)) * 1024 * 1024 == evm.MAX_REPLY_BYTES
    depth = int(stated(r"JSON nested deeper than (\d+) levels refused"))
    assert httpwire.parse_json("[" * depth + "]" * depth) is not None
    with pytest.raises(ValueError, match="deeper"):
        httpwire.parse_json("[" * (depth + 1) + "]" * (depth + 1))
    assert parse_json_array("[" * (depth + 1) + "1" + "]" * (depth + 1)) == []


def test_the_sqlite_deadline_and_the_serve_line_cap_are_the_codes() -> None:
    from darwin_memo.backends import sqlite
    from darwin_memo.cli import ledger_serve

    assert float(stated(r"every statement under a (\d+) s deadline")) == sqlite.STATEMENT_DEADLINE
    cap = int(stated(r"so are lines over (\d+) MiB"))
    assert cap * 1024 * 1024 == ledger_serve.MAX_REQUEST_BYTES


def test_the_top_level_count_and_the_token_header_are_the_codes() -> None:
    from darwin_memo import ui

    assert int(stated(r"which has (\d+) names in")) == len(darwin_memo.__all__)
    assert named(ui.TOKEN_HEADER) and "`ui.TOKEN_HEADER`" in PAGE


def test_attribution_is_part_of_equality_and_repr() -> None:
    from darwin_memo import ProtocolAnswer

    row = row_of("`ProtocolAnswer`")
    values = re.findall(r'`"(\w+)"`', row)
    assert values[0] == ProtocolAnswer("t").attribution == "local"
    assert "part of equality and `repr`" in row
    assert ProtocolAnswer("t", attribution="cited") != ProtocolAnswer("t")
    assert "attribution='cited'" in repr(ProtocolAnswer("t", attribution="cited"))


def test_the_spec_spellings_the_page_lists_are_accepted() -> None:
    from darwin_memo import is_silent
    from darwin_memo.ledger import note_text

    row = row_of("the spec's keyword spellings")
    for alias in (
        "deciding=",
        "supporting=",
        "app_src=",
        "test_src=",
        "note=",
        "start_ts=",
        "path=",
    ):
        assert f"`{alias}`" in row, f"the spellings row does not list `{alias}`"
    # Keywords go through dicts: the aliases are not in the signature a type checker reads.
    spec: dict[str, Any] = {"deciding": None, "supporting": []}
    assert is_silent("", **spec) is True
    assert is_silent("x", **{**spec, "deciding": "e1"}) is False
    note = {"event": "settle", "delta": 2.0, "detail": "ci pass counts: 3 -> 5"}
    assert note_text(**{"note": note}) == note_text(event=note) == note_text(note)
    assert is_silent(**{"answer_text": "", "deciding": None, "supporting": []}) is True
    assert is_silent(**{"text": "", "deciding_entry": None, "supporting_entries": []}) is True


@pytest.mark.parametrize("cls_name", sorted(PUBLISHED_ORGANIC))
def test_every_organic_member_we_add_is_named(cls_name: str) -> None:
    import darwin_memo.organic as organic
    from darwin_memo.organic.turbovec_backend import TurbovecBackend

    assert set(organic.__all__) >= PUBLISHED_ORGANIC_NAMES
    for name in sorted(set(organic.__all__) - PUBLISHED_ORGANIC_NAMES):
        assert named(name), f"darwin_memo.organic.{name} is not on the page"
    cls = TurbovecBackend if cls_name == "TurbovecBackend" else getattr(organic, cls_name)
    ours = {name for name in dir(cls) if not name.startswith("_")}
    if cls is organic.OrganicMemory:
        ours |= set(vars(organic.OrganicMemory(MemoryStore())))
    elif cls is organic.AssociativeGraph:
        ours |= set(vars(organic.AssociativeGraph()))
    extra = row_of("extra members")
    for name in sorted(ours - PUBLISHED_ORGANIC[cls_name] - {n for n in ours if n[0] == "_"}):
        assert f"`{cls_name}.{name}" in extra or (cls_name in extra and f"`{name}`" in extra), (
            f"{cls_name}.{name} is not in the organic layer's `extra members` row"
        )
    # Dunder additions: len() and `in` (0.7.1's classes have neither).
    if "__len__" in vars(cls):
        assert cls_name in extra and "`len()`" in extra, f"len() of {cls_name} is not named"
    if "__contains__" in vars(cls):
        assert cls_name in extra and "`in`" in extra, f"`in` on {cls_name} is not named"


def test_the_organic_layer_is_no_longer_listed_as_missing() -> None:
    importlib.import_module("darwin_memo.organic")
    assert "not implemented yet" not in PAGE
    assert "no organic layer" not in PAGE
