"""Distillation (issue 40): survivors into a parametric memory.

* the pure logic (``darwin_memo.distill``) without torch: which entries teach, the
  prompt and answer formats, the loss mask, containment, settings, the model card;
* the package and the command never import torch/transformers/peft on their own, and
  bad input is one ``error:`` line whether or not the extra is installed;
* the ``distill`` benchmark's stand-in judge on the world's own prompts;
* end to end, only where the ``[distill]`` extra is importable (CI does not install
  it): ``darwin-memo distill`` on a SQLite store with a built base, the card beside
  the adapter, and the adapter answering the store's questions.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from darwin_memo import MemoryEntry
from darwin_memo.cli import main
from darwin_memo.distill.selection import (
    IGNORE_INDEX,
    DistillError,
    TrainSettings,
    card_markdown,
    contains_answer,
    examples_of,
    format_answer,
    format_prompt,
    label_ids,
    model_card,
    normalize,
    select_entries,
)
from darwin_memo.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("torch", "transformers", "peft"))
needs_extra = pytest.mark.skipif(
    not HAVE_EXTRA, reason="the [distill] extra (torch, transformers, peft) is not installed"
)


def entry(question: str, answer: str, energy: float = 1.0, probation: int = 0) -> MemoryEntry:
    return MemoryEntry(question, answer, sources=["runbook"], energy=energy, probation=probation)


# --------------------------------------------------------------------------- #
# Pure logic
# --------------------------------------------------------------------------- #


def test_select_entries_keeps_living_trusted_entries_by_balance() -> None:
    rich = entry("Q rich?", "A rich.", energy=4.5)
    poor = entry("Q poor?", "A poor.", energy=0.3)
    dead = entry("Q dead?", "A dead.", energy=0.0)
    probation = entry("Q import?", "A import.", energy=2.0, probation=3)
    chosen = select_entries([poor, dead, probation, rich])
    assert [e.id for e in chosen] == [rich.id, poor.id]


def test_equal_balances_order_by_id() -> None:
    a, b = entry("Q a?", "A a.", 1.0), entry("Q b?", "A b.", 1.0)
    assert [e.id for e in select_entries([a, b])] == sorted([a.id, b.id])


def test_an_empty_store_is_an_error() -> None:
    with pytest.raises(DistillError, match="no living entries"):
        select_entries([])
    with pytest.raises(DistillError, match="no living entries"):
        select_entries([entry("Q?", "A.", energy=0.0)])


def test_a_store_of_probationary_imports_only_is_an_error() -> None:
    with pytest.raises(DistillError, match=r"every living entry \(2\) is on probation"):
        select_entries([entry("Q1?", "A1.", probation=3), entry("Q2?", "A2.", probation=1)])


def test_examples_carry_ids_balances_and_formats() -> None:
    e = entry("  Are cache\nfiles safe? ", "Yes,   they are.", energy=1.23456789)
    (ex,) = examples_of([e])
    assert (ex.id, ex.balance, ex.kind, ex.sources) == (e.id, 1.234568, "explicit", ("runbook",))
    assert ex.prompt == "Question: Are cache files safe?\nAnswer:"
    assert ex.target == " Yes, they are."
    assert format_prompt("x") + format_answer("y") == "Question: x\nAnswer: y"


def test_loss_mask_covers_answer_tokens_only() -> None:
    ids, labels = label_ids([5, 6, 7], [8, 9])
    assert ids == [5, 6, 7, 8, 9]
    assert labels == [IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, 8, 9]


def test_loss_mask_truncates_the_answer_never_the_question() -> None:
    ids, labels = label_ids([1, 2, 3], [4, 5, 6, 7], max_length=5)
    assert ids == [1, 2, 3, 4, 5]
    assert labels == [IGNORE_INDEX] * 3 + [4, 5]
    with pytest.raises(DistillError, match="max length 3"):
        label_ids([1, 2, 3], [4], max_length=3)
    with pytest.raises(DistillError, match="at least one token"):
        label_ids([1], [])


def test_containment_ignores_case_layout_and_the_final_stop() -> None:
    answer = "Cache chunk files under cache/ are disposable."
    assert contains_answer(" cache chunk files under  cache/ are\ndisposable. More.", answer)
    assert contains_answer("Cache chunk files under cache/ are disposable", answer)
    assert not contains_answer("Cache chunk files under cache/ are protected.", answer)
    assert not contains_answer("anything", "")
    assert not contains_answer("anything", " . ")
    assert normalize("  A\tB  ") == "a b"


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"epochs": 0}, "epochs"),
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"rank": 0}, "rank"),
        ({"dropout": 1.0}, "dropout"),
        ({"batch_size": 0}, "batch size"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_settings_reject_bad_values(bad: dict[str, object], message: str) -> None:
    with pytest.raises(DistillError, match=message):
        TrainSettings(**bad)  # type: ignore[arg-type]


def test_the_card_names_the_store_entries_balances_and_hyper_parameters() -> None:
    entries = [entry("Q | pipe?", "A.", energy=4.95), entry("Q two?", "B.", energy=0.25)]
    examples = examples_of(select_entries(entries))
    settings = TrainSettings(epochs=7, lr=0.01, rank=4, alpha=8, seed=3)
    card = model_card(
        store="mem.db",
        examples=examples,
        settings=settings,
        base_model="out/base",
        base_built={"layers": 2},
        final_loss=0.123456789,
        versions={"torch": "x"},
    )
    assert card["store"] == "mem.db"
    assert card["entries_used"] == 2
    assert [(e["id"], e["balance"]) for e in card["entries"]] == [
        (entries[0].id, 4.95),
        (entries[1].id, 0.25),
    ]
    assert card["hyper_parameters"]["epochs"] == 7
    assert card["hyper_parameters"]["rank"] == 4
    assert card["final_loss"] == 0.123457
    json.dumps(card)  # serializable as written
    md = card_markdown(card)
    assert f"| `{entries[0].id}` | 4.950 |" in md
    assert "Q \\| pipe?" in md  # a question cannot break the table
    assert "epochs 7, lr 0.01, rank 4" in md
    assert "built from a configuration" in md
    assert "Question: {question}\\nAnswer: {answer}" in md


# --------------------------------------------------------------------------- #
# No torch unless asked; one-line errors
# --------------------------------------------------------------------------- #


def test_the_package_and_the_command_do_not_import_the_extra() -> None:
    code = (
        "import sys, darwin_memo, darwin_memo.distill, darwin_memo.distill.train\n"
        "from darwin_memo.cli import build_parser\n"
        "build_parser().parse_args(['distill', 'x.db', '--out', 'o'])\n"
        "loaded = [m for m in ('torch', 'transformers', 'peft') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_bad_stores_are_one_line_errors(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "empty.db"):
        pass
    code, out, err = run_cli("distill", str(tmp_path / "empty.db"), "--out", str(tmp_path / "o"))
    assert (code, out) == (1, "")
    assert err == "error: the store has no living entries: nothing to distill\n"

    with Ledger.open(tmp_path / "src.db") as src:
        src.add("Are cache files safe to delete?", "Cache files are disposable.")
        living = src.store.alive()
    with Ledger.open(tmp_path / "imports.db") as dest:
        dest.import_entries(living, source="src.db")
    code, _, err = run_cli("distill", str(tmp_path / "imports.db"), "--out", str(tmp_path / "o"))
    assert code == 1
    assert err.startswith("error: every living entry (1) is on probation") and err.count("\n") == 1

    code, _, err = run_cli("distill", str(tmp_path / "nowhere.json"), "--out", str(tmp_path / "o"))
    assert code == 1 and err.count("\n") == 1 and "no such store" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(HAVE_EXTRA, reason="checks the message shown without the extra")
def test_without_the_extra_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "m.db") as ledger:
        ledger.add("Are cache files safe to delete?", "Cache files are disposable.")
    code, _, err = run_cli("distill", str(tmp_path / "m.db"), "--out", str(tmp_path / "o"))
    assert code == 1
    assert err.startswith("error: distillation needs the [distill] extra")
    assert "pip install 'darwin-memo[distill]'" in err and err.count("\n") == 1
    script = ROOT / "training" / "train_memory_model.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "m.db"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stderr == err


# --------------------------------------------------------------------------- #
# The benchmark's stand-in judge
# --------------------------------------------------------------------------- #


def test_the_stand_in_judge_reads_the_file_kind_not_the_outcome() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.evidence.distill import CategoryJudge
    from bench.evidence.worlds import WORLDS

    world = WORLDS["storage"]
    judge = CategoryJudge()
    act = "Cache chunk files under cache/ are disposable and safe to remove at any time."
    keep = "Database store files under data/ are protected and must be retained."
    assert [judge.verdict(p, act) for p in world.benign_probes] == [1.0, 1.0, 1.0]
    assert [judge.verdict(p, act) for p in world.harmful_probes] == [-1.0, -1.0]
    assert judge.verdict(world.harmful_probes[0], keep) == 0.0
    assert judge.verdict(world.benign_probes[0], "") == 0.0


# --------------------------------------------------------------------------- #
# End to end (the extra installed)
# --------------------------------------------------------------------------- #

FACTS = [
    ("Are cache chunk files safe to delete?", "Cache chunk files are disposable."),
    ("Who owns retention under data/?", "The Platform Team owns retention for data/."),
    ("When is the annual offsite?", "The annual offsite is in October near the lake."),
]


@needs_extra
def test_distill_a_store_end_to_end(tmp_path: Path) -> None:
    from darwin_memo.distill.train import load_memory

    store = tmp_path / "memory.db"
    with Ledger.open(store) as ledger:
        ids = [ledger.add(q, a, source="runbook").id for q, a in FACTS]
        doomed = ledger.add("Is the forum right?", "The forum says delete data.", source="forum")
        ledger.forget(doomed.id)
    with Ledger.open(tmp_path / "other.db") as other:
        other.add("What is imported?", "Imported text on probation.")
        foreign = other.store.alive()
    with Ledger.open(store) as ledger:
        ledger.import_entries(foreign, source="other.db")
    out = tmp_path / "out"
    code, printed, progress = run_cli(
        "distill", str(store), "--out", str(out), "--epochs", "80", "--device", "cpu"
    )
    assert code == 0, progress
    assert printed.startswith(f"distilled 3 entries into {out}/adapter")
    assert "epoch 80/80: loss" in progress and "built a base model" in progress
    assert (out / "adapter" / "adapter_config.json").is_file()
    card = json.loads((out / "card.json").read_text())
    assert card["store"] == str(store)
    assert sorted(e["id"] for e in card["entries"]) == sorted(ids)  # no import, no dead
    assert all(e["balance"] == 1.0 for e in card["entries"])
    assert card["hyper_parameters"]["epochs"] == 80
    assert card["base_built"]["layers"] == 2
    assert card["final_loss"] < 1.0
    assert (out / "CARD.md").read_text().startswith("# Distilled memory adapter")

    memory = load_memory(out / "base", out / "adapter", "cpu")
    for question, answer in FACTS:
        assert contains_answer(memory.ask(question), answer)
    bare = load_memory(out / "base", None, "cpu")  # the frozen base knows none of it
    assert not any(contains_answer(bare.ask(q), a) for q, a in FACTS)

    # The same base again, through the script: deterministic for a seed.
    again = tmp_path / "again"
    script = ROOT / "training" / "train_memory_model.py"
    args = [str(store), "--out", str(again), "--model", str(out / "base"), "--epochs", "80"]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((again / "card.json").read_text())["final_loss"] == card["final_loss"]


@needs_extra
def test_a_folder_that_is_not_a_causal_lm_is_one_line(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "m.db") as ledger:
        ledger.add(*FACTS[0])
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')
    (tmp_path / "empty").mkdir()
    for folder, message in [
        ("enc", "not a causal language model"),
        ("empty", "not a Hugging Face model folder"),
        ("missing", "no such model folder"),
    ]:
        code, _, err = run_cli(
            "distill", str(tmp_path / "m.db"), "--out", str(tmp_path / "o"),
            "--model", str(tmp_path / folder),
        )  # fmt: skip
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 1 and len(errors) == 1 and message in errors[0], err
        assert "Traceback" not in err and err.endswith(errors[0] + "\n")
