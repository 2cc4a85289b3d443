"""The guides in docs/ are kept honest: their code runs, their map is whole, api.md is current.

- Every code block of docs/quickstart.md runs as far as it can without the host: the
  MCP server a ``claude mcp add`` line or a Codex ``[mcp_servers.*]`` table starts is
  started the same way and must answer ``tools/list`` over stdio (the mcp SDK's own
  client), the ``darwin-memo`` lines run in bash, ``render`` must write the file, the
  Python block runs, the CI block runs real pytest twice and settles the ticket.
- The Python blocks of docs/custom-environments.md run in order, as one script.
- docs/api.md is what ``tools/gen_api.py`` writes today.
- docs/index.md links every page in docs/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
TOOLS = {
    "memory_query",
    "memory_settle",
    "memory_abandon",
    "memory_add",
    "memory_tick",
    "memory_stats",
    "memory_obituary",
    "memory_audit",
    "memory_related",  # ours: the organic layer's related entries (docs/mcp.md)
}


def toml(text: str) -> dict[str, Any]:
    """Parsed TOML (``tomllib`` is 3.11+; on 3.10 the tests that read TOML skip)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    return dict(tomllib.loads(text))


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """``(section heading, language, code)`` of every fenced block, in order."""
    found = []
    section = ""
    lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            found.append((section, fence.group(1), "".join(lines[i + 1 : end])))
            i = end
        i += 1
    return found


def section(name: str) -> list[tuple[str, str]]:
    return [(lang, code) for sec, lang, code in blocks(DOCS / "quickstart.md") if sec == name]


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARWIN_MEMO_")}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def bash(script: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{script}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc.stdout


def host_lines(code: str, *hosts: str) -> tuple[list[list[str]], str]:
    """Split a bash block into the host's own commands (parsed) and the rest (a script)."""
    hosted, rest = [], []
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in hosts:
            hosted.append(words)
        else:
            rest.append(line)
    return hosted, "\n".join(rest)


def server_tools(command: list[str], home: Path) -> set[str]:
    """Start an MCP server the way a host would and ask it ``tools/list`` over stdio."""
    mcp = pytest.importorskip("mcp", reason="the MCP server needs the mcp extra (in .[dev])")
    import anyio
    from mcp.client.stdio import stdio_client

    exe = command[0] if os.sep in command[0] else str(BIN / command[0])
    assert Path(exe).exists(), f"{command[0]} is not installed next to {sys.executable}"
    params = mcp.StdioServerParameters(command=exe, args=command[1:], env=shell_env(home))

    async def listing() -> set[str]:
        with (home / "server.log").open("w") as errlog:
            async with mcp.Client(
                stdio_client(params, errlog=errlog), read_timeout_seconds=60
            ) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

    return anyio.run(listing)


# -- docs/quickstart.md ----------------------------------------------------------------


def test_every_quickstart_block_is_one_this_file_runs() -> None:
    shape = [(sec, lang) for sec, lang, _ in blocks(DOCS / "quickstart.md")]
    assert shape == [
        ("Claude Code", "bash"),
        ("Claude Code", "bash"),
        ("Codex", "toml"),
        ("Codex", "bash"),
        ("OpenClaw", "bash"),
        ("OpenClaw", "json"),
        ("OpenClaw", "bash"),
        ("A plain Python agent", "python"),
        ("CI", "bash"),
        ("CI", "bash"),
    ], "a block was added or moved: teach tests/docs/test_guides.py to run it"


def _mcp_add(words: list[str], host: str) -> list[str]:
    """The server command of ``HOST mcp add [options] NAME -- COMMAND ARGS...``."""
    assert words[:3] == [host, "mcp", "add"], words
    cut = words.index("--")
    options, name = words[3 : cut - 1], words[cut - 1]
    assert name == "darwin-memo" and not name.startswith("-")
    assert all(o.startswith("-") or options[i - 1].startswith("-") for i, o in enumerate(options))
    return words[cut + 1 :]


def test_claude_code_block_starts_a_server_that_lists_the_tools(tmp_path: Path) -> None:
    (_, install), (_, seed_and_render) = section("Claude Code")
    pip, claude = [shlex.split(line) for line in install.strip().splitlines()]
    assert pip[:2] == ["pip", "install"] and pip[2] == "darwin-memo[mcp]"
    pyproject = toml((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "mcp" in pyproject["project"]["optional-dependencies"]
    command = _mcp_add(claude, "claude")
    assert command == ["darwin-memo-mcp", "--memory", "~/.darwin-memo/lessons.db"]
    assert claude[3:5] == ["--scope", "user"]

    bash(seed_and_render, tmp_path, shell_env(tmp_path))
    assert (tmp_path / ".darwin-memo" / "lessons.db").exists()  # ~ is the test's home
    assert "cache chunk files are disposable" in (tmp_path / "CLAUDE.md").read_text()
    assert server_tools(command, tmp_path) == TOOLS


def test_codex_config_starts_a_server_that_lists_the_tools(tmp_path: Path) -> None:
    (_, toml_block), (_, shell) = section("Codex")
    config = toml(toml_block)
    server = config["mcp_servers"]["darwin-memo"]
    assert set(server) == {"command", "args"}
    hosted, rest = host_lines(shell, "codex")
    assert [_mcp_add(words, "codex") for words in hosted] == [[server["command"], *server["args"]]]

    bash(rest, tmp_path, shell_env(tmp_path))
    assert "two tests call dedupe()" in (tmp_path / "AGENTS.md").read_text()
    # Codex passes args without a shell: the server itself must expand the "~".
    assert server_tools([server["command"], *server["args"]], tmp_path) == TOOLS
    assert (tmp_path / ".darwin-memo" / "lessons.db").exists()


def test_openclaw_block_names_the_real_plugin_and_its_recall_runs(tmp_path: Path) -> None:
    (_, install), (_, config_json), (_, recall) = section("OpenClaw")
    manifest = json.loads((ROOT / "integrations/openclaw/openclaw.plugin.json").read_text())
    plugin = manifest["id"]
    hosted, rest = host_lines(install, "openclaw")
    assert not rest.strip()
    link, slot, hooks = hosted
    assert link[:4] == ["openclaw", "plugins", "install", "--link"]
    assert link[4].endswith("/integrations/openclaw") and manifest["kind"] == "memory"
    assert slot == ["openclaw", "config", "set", "plugins.slots.memory", plugin]
    assert hooks[3] == f"plugins.entries.{plugin}.hooks.allowConversationAccess"

    settings = json.loads(config_json)["plugins"]["entries"][plugin]["config"]
    schema = manifest["configSchema"]["properties"]
    assert set(settings) <= set(schema), set(settings) - set(schema)
    assert settings["resourceScale"] > 0 and settings["successDelta"] > 0 > settings["failureDelta"]

    out = bash(recall, tmp_path, shell_env(tmp_path))
    decided = json.loads(out.strip().splitlines()[-1])
    assert decided["silent"] is False and re.fullmatch(r"[0-9a-f]+", decided["ticket_id"])
    assert "must be retained" in decided["answer"]


def test_plain_python_agent_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ((_, code),) = section("A plain Python agent")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "quickstart.md:python", "exec"), {"__name__": "__quickstart__"})
    assert (tmp_path / "lessons.db").exists()


PROJECT = {
    "money.py": "def to_cents(amount):\n    return int(amount * 100)\n",
    "test_money.py": (
        "from money import to_cents\n\n"
        "def test_whole():\n    assert to_cents(3) == 300\n\n"
        "def test_cents():\n    assert to_cents(0.29) == 29\n\n"
        "def test_more_cents():\n    assert to_cents(1.15) == 115\n"
    ),
}


def test_ci_blocks_settle_a_ticket_from_two_real_test_runs(tmp_path: Path) -> None:
    (_, consult), (_, settle) = section("CI")
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = shell_env(tmp_path)
    decided = json.loads(bash(consult, tmp_path, env).strip().splitlines()[-1])
    ticket = decided["ticket_id"]
    assert ticket and "round(amount * 100)" in decided["answer"]

    base, head, *rest = settle.strip().splitlines()
    assert "--junitxml=base.xml" in base and "--junitxml=head.xml" in head
    subprocess.run(shlex.split(base, comments=True), cwd=tmp_path, env=env, timeout=120)
    fixed = PROJECT["money.py"].replace("int(amount * 100)", "round(amount * 100)")
    (tmp_path / "money.py").write_text(fixed, encoding="utf-8")  # the agent acted on the advice
    subprocess.run(shlex.split(head, comments=True), cwd=tmp_path, env=env, timeout=120)

    pr_body = f"Round cents.\n\ndarwin-memo-ticket: {ticket}\n"
    out = bash("\n".join(rest), tmp_path, shell_env(tmp_path, PR_BODY=pr_body))
    result = json.loads(out[: out.rindex("}") + 1])
    assert result["delta"] == 2.0 and result["settled"] == {ticket: True}
    assert "round(amount * 100)" in (tmp_path / "AGENTS.md").read_text()


# -- docs/custom-environments.md -------------------------------------------------------


def test_custom_environments_blocks_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = [c for _, lang, c in blocks(DOCS / "custom-environments.md") if lang == "python"]
    assert len(code) >= 5
    others = {lang for _, lang, _ in blocks(DOCS / "custom-environments.md")} - {"python"}
    assert not others, f"blocks this test does not run: {others}"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__guide__"}
    for n, block in enumerate(code):
        exec(compile(block, f"custom-environments.md block {n}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "memory was silent on 12 of 12 decisions" in out
    assert "cumulative dollars: +" in out
    for code_name in ("silent_majority", "env_never_paid", "starvation_cliff",
                      "ticking_without_evidence", "tickets_stale", "settles_dropped",
                      "credit_untracked"):  # fmt: skip
        assert f"`{code_name}`" in (DOCS / "custom-environments.md").read_text()


def test_the_guide_names_every_code_the_doctor_can_emit() -> None:
    source = (ROOT / "src/darwin_memo/observe.py").read_text(encoding="utf-8")
    source += (ROOT / "src/darwin_memo/sim/diagnose.py").read_text(encoding="utf-8")
    codes = set(re.findall(r'code="([a-z_]+)"', source))
    assert len(codes) >= 7
    guide = (DOCS / "custom-environments.md").read_text(encoding="utf-8")
    assert {c for c in codes if f"`{c}`" not in guide} == set()


# -- docs/api.md, docs/index.md ---------------------------------------------------------


def test_api_md_is_generated_from_the_current_docstrings() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_api.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr + "\n(run: python tools/gen_api.py)"
    api = (DOCS / "api.md").read_text(encoding="utf-8")
    for name in ("Ledger", "MemoryStore", "SurvivalConfig", "QueryProtocol", "EvmSettler"):
        assert f"### `{name}`" in api


def test_index_links_every_page_and_every_link_resolves() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", index)
    for link in links:
        assert (DOCS / link).exists(), link
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages - set(links) == set(), "pages missing from docs/index.md"
