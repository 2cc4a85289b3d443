"""Every script in examples/ runs, as a person would run it, and says what it should.

Each test starts the script in a subprocess from a directory outside the checkout
(the scripts must work from anywhere), offline, and asserts on what it prints:
the things a reader is meant to see (the poison executed, silence on a structural
question, a settled ticket) and that it exits 0. Model-backed paths run against a
loopback server speaking the real OpenAI wire format (tests/llm_servers.py).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from darwin_memo import MemoryStore
from darwin_memo.retrieval.embedding import embeddings_available
from llm_servers import chat_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: The seed README's "More examples" list, in order.
SCRIPTS = (
    "01_encode_memory.py",
    "02_query_protocol.py",
    "03_survival_loop.py",
    "04_agent_loop.py",
    "05_testsuite_env.py",
    "06_ci_lesson_store.py",
    "07_local_stack.py",
    "08_evm_settler.py",
    "09_your_own_corpus.py",
)


def run(
    script: str, *args: str, cwd: Path, prelude: str = "", timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``python examples/SCRIPT ARGS`` from ``cwd``; ``prelude`` runs first in the same
    interpreter (to hide an optional package, as an install without it would)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DARWIN_MEMO_", "PR_BODY"))}
    env.update(PYTHONDONTWRITEBYTECODE="1", OLLAMA_HOST="127.0.0.1:9")
    path = str(EXAMPLES / script)
    if prelude:
        code = f"{prelude}\nimport runpy, sys\nsys.argv = [{path!r}, *{list(args)!r}]\n"
        code += f"runpy.run_path({path!r}, run_name='__main__')"
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, path, *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_examples_are_the_seed_readmes_nine() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == list(SCRIPTS)
    assert not (EXAMPLES / "ci_settlement.py").exists()
    for doc in [
        ROOT / "README.md",
        *ROOT.joinpath("docs").rglob("*.md"),
        *ROOT.glob("tests/**/*.py"),
    ]:
        if doc.name != Path(__file__).name:
            assert "examples/ci_settlement.py" not in doc.read_text(encoding="utf-8"), doc


def test_01_encodes_the_corpus_and_saves_a_loadable_store(tmp_path: Path) -> None:
    out = ok(run("01_encode_memory.py", "-o", "memory.json", cwd=tmp_path))
    assert "LocalEncoder (offline) wrote 16 entries: 1 cross_doc, 2 entity, 13 explicit" in out
    assert "[cross_doc] from platform-notes, runbook" in out
    assert "3 entries carry the forum post's poison" in out
    store = MemoryStore.load(tmp_path / "memory.json")
    assert len(store) == 16 and all(e.energy == 1.0 for e in store.alive())


def test_01_names_a_missing_model_in_one_line(tmp_path: Path) -> None:
    proc = run(
        "01_encode_memory.py", "--model", f"ollama:x@http://127.0.0.1:{closed_port()}", cwd=tmp_path
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


def test_02_answers_with_provenance_and_silence(tmp_path: Path) -> None:
    out = ok(run("02_query_protocol.py", cwd=tmp_path))
    blocks = out.split("\nQ: ")
    database = next(b for b in blocks if b.startswith("Can the database store files"))
    assert "redundant database backup copies" in database  # before selection, the poison answers
    assert re.search(r"decided by [0-9a-f]{12} \[explicit\] from forum-post", database)
    cache = next(b for b in blocks if b.startswith("Are cache chunk files"))
    assert "from runbook" in cache and "born tick 0; never settled" in cache
    structural = next(b for b in blocks if b.startswith("What should I do about this?"))
    assert "memory is silent" in structural


def test_02_asks_a_saved_store_the_readers_question(tmp_path: Path) -> None:
    ok(run("01_encode_memory.py", "-o", "m.json", cwd=tmp_path))
    out = ok(
        run(
            "02_query_protocol.py",
            "--memory",
            "m.json",
            "When is the annual offsite?",
            cwd=tmp_path,
        )
    )
    assert "A: The annual offsite usually happens in October" in out
    assert "from platform-notes" in out


def test_03_the_poison_is_executed_by_the_disk(tmp_path: Path) -> None:
    out = ok(run("03_survival_loop.py", "-o", "survivors.json", cwd=tmp_path))
    assert "Poisoned entries still alive: 0" in out
    assert re.search(r"executed\s+[1-9]", out)
    assert re.search(r"cycle  0: -[\d,]+ bytes", out)  # the measured damage that killed it
    assert "after selection" in out and "(silence: the file is kept)" in out
    survivors = MemoryStore.load(tmp_path / "survivors.json")
    assert survivors.alive() and not any("forum-post" in e.sources for e in survivors.alive())


def test_04_the_agent_loop_settles_what_it_measured(tmp_path: Path) -> None:
    out = ok(run("04_agent_loop.py", "--episodes", "22", cwd=tmp_path))
    assert "memory_query('Is it safe to delete data-0.db" in out
    assert "health check failed: restored: data-0.db" in out  # the measurement, in the notes
    assert re.search(r"buried at tick \d+ on settle", out)
    survivors = out.split("survivors:")[1]
    assert "[runbook] Cache chunks" in survivors and "[forum]" not in survivors
    assert "[chat]" not in survivors  # trivia nobody needed starved
    assert "journal replay: every balance agrees" in out
    assert not list(tmp_path.iterdir())  # the workspace was a temporary directory


def test_05_the_test_suite_executes_the_forum_advice(tmp_path: Path) -> None:
    out = ok(run("05_testsuite_env.py", "--cycles", "12", cwd=tmp_path))
    assert "Should the dedupe dead code cleanup patch be applied?" in out
    assert re.search(r"dedupe cleanup\s+asked \d+, tests broken [1-9]", out)
    assert re.search(r"slugify fix\s+asked \d+, tests fixed [1-9]", out)
    assert "'executed': 1" in out
    survivors = out.split("survivors:")[1]
    assert "slugify fix patch" in survivors and "is dead code" not in survivors


def test_06_the_ci_lesson_store_settles_a_pass_delta(tmp_path: Path) -> None:
    out = ok(run("06_ci_lesson_store.py", cwd=tmp_path))
    assert '"delta": 2.0' in out
    assert re.search(r"delta \+2: ticket [0-9a-f]+ settled", out)
    assert "round(amount * 100)" in out.split("darwin-memo render")[1]


def test_07_without_a_model_says_how_to_start_one_and_runs_offline(tmp_path: Path) -> None:
    spec = f"ollama:llama3.2@http://127.0.0.1:{closed_port()}"
    out = ok(run("07_local_stack.py", "--model", spec, "--cycles", "4", cwd=tmp_path))
    assert out.startswith(f"no model answers at {spec}")
    assert "ollama serve" in out and "--model openai:" in out
    assert "model:     none (offline)" in out
    expected = "SentenceEmbedder" if embeddings_available() else "HashingEmbedder"
    assert f"retrieval: {expected}" in out
    assert "encoder:   LocalEncoder (offline)" in out
    assert re.search(r"\n    3 +\d+", out)  # the fourth cycle's row
    assert re.search(r"forum entries executed by measured damage: [1-9]", out)


def test_07_falls_back_to_hashing_without_the_embeddings_extra(tmp_path: Path) -> None:
    spec = f"ollama:llama3.2@http://127.0.0.1:{closed_port()}"
    hide = "import sys; sys.modules['onnxruntime'] = None"
    out = ok(run("07_local_stack.py", "--model", spec, "--cycles", "2", cwd=tmp_path, prelude=hide))
    assert "retrieval: HashingEmbedder: the [embeddings] extra is not installed" in out
    assert 'pip install "darwin-memo[embeddings]"' in out


def _scripted_model(prompt: str, system: str) -> str:
    """A model over the real OpenAI wire: one lesson per sentence, answers cite [1]."""
    if prompt.startswith("Reply with the single word"):
        return "ready"
    if prompt.startswith("Read the document and write"):
        text = prompt.split('":\n', 1)[1]
        items = [
            {
                "question": f"What holds for {s.split()[0]} {s.split()[1]}?",
                "answer": s + ".",
                "kind": "explicit",
            }
            for s in (part.strip() for part in text.replace("\n", " ").split("."))
            if len(s.split()) > 3
        ]
        return json.dumps(items)
    if prompt.startswith(("Here are question/answer pairs", "Check each question/answer pair")):
        return prompt.rsplit("Pairs:\n", 1)[1]
    if prompt.startswith(("List the named entities", "Read the two documents")):
        return "[]"
    if prompt.startswith("Split the question"):
        return prompt.rsplit("Question: ", 1)[1]
    match = re.search(r"\[1\] Q: .*\n\s+A: (.*)\n", prompt)
    return f"{match.group(1) if match else 'Nothing relevant.'}\nSOURCES: [1]"


def test_07_runs_the_stack_on_an_openai_compatible_local_server(tmp_path: Path) -> None:
    with chat_server(_scripted_model) as server:
        spec = f"openai:scripted@{server.url}"
        out = ok(
            run("07_local_stack.py", "--model", spec, "--cycles", "1", cwd=tmp_path, timeout=120)
        )
        prompts = list(server.prompts)
    assert f"model:     {spec}" in out and "no model answers" not in out
    assert re.search(r"encoder:   ReflectionEncoder, \d+ model calls, 0 skipped steps", out)
    assert any(p.startswith("Read the document and write") for p in prompts)
    assert (
        sum(p.startswith("Answer the question using only") for p in prompts) >= 12
    )  # one per file
    assert "\n    0 " in out  # the cycle ran


def test_08_the_chain_measures_the_scam_and_it_dies(tmp_path: Path) -> None:
    pytest.importorskip("eth_tester")
    pytest.importorskip("eth")
    out = ok(run("08_evm_settler.py", "--rounds", "4", cwd=tmp_path))
    assert re.search(r"0  claim rebate .* yes\s+\+0\.39\d+\s+0\.0000\d+", out)  # 0.4 ETH less gas
    assert re.search(r"0  send to doubler .* yes\s+-1\.0000\d+", out)
    life = out.split("the forum lesson's life:")[1].split("survivors:")[0]
    assert "measured delta -1.00002" in life and re.search(r"buried at tick \d+ on settle", life)
    assert "[ops-notes]" in out.split("survivors:")[1]
    assert "[forum]" not in out.split("survivors:")[1]


def test_08_without_eth_tester_says_what_to_install(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['eth_tester'] = None"
    out = ok(run("08_evm_settler.py", cwd=tmp_path, prelude=hide))
    assert 'pip install "eth-tester[py-evm]"' in out
    assert "chain on" not in out


def test_09_the_floor_refuses_a_structural_question(tmp_path: Path) -> None:
    out = ok(run("09_your_own_corpus.py", cwd=tmp_path))
    assert "3 documents -> 12 entries" in out
    assert "A: Old container images in the staging registry may be deleted" in out
    structural = out.split("Q: Is it safe to remove these old ones?")[1]
    assert "A: (silent" in structural
    assert "without the floor, this would have decided: Old container images" in structural
    assert "shared words: old\n" in structural


def test_09_reads_the_readers_own_folder(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "billing.md").write_text(
        "# Billing\n\nThe billing cron runs hourly on the batch host.\n"
    )
    (notes / "sub" / "people.txt").write_text("Dana owns the billing cron and its alerts.\n")
    (notes / "image.png").write_bytes(b"\x89PNG")
    out = ok(
        run(
            "09_your_own_corpus.py", str(notes), "--ask", "Who owns the billing cron?", cwd=tmp_path
        )
    )
    assert "2 documents" in out and "sub/people.txt" in out
    assert "A: Dana owns the billing cron and its alerts." in out
    missing = run("09_your_own_corpus.py", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.strip().count("\n") == 0
    assert "is not a directory" in missing.stderr
