"""LocalEncoder rules (spec §1.5) and the packaged demo corpus (spec §6.8)."""

from __future__ import annotations

from darwin_memo.records.entry import EntryKind, MemoryEntry
from darwin_memo.sim.encode import Document, LocalEncoder, demo_corpus


def encode(*docs: tuple[str, str]) -> list[MemoryEntry]:
    return LocalEncoder().encode([Document(doc_id, text) for doc_id, text in docs])


def shape(entries: list[MemoryEntry]) -> list[tuple[str, str, str, list[str]]]:
    return [(e.kind.value, e.question, e.answer, list(e.sources)) for e in entries]


def of_kind(entries: list[MemoryEntry], kind: EntryKind) -> list[MemoryEntry]:
    return [e for e in entries if e.kind is kind]


# -- rule 1: sentences ---------------------------------------------------------


def test_splits_on_terminal_punctuation_and_reads_newlines_as_spaces() -> None:
    text = "The first sentence is here. Is the second one\na question? Yes it surely is!"
    answers = [e.answer for e in encode(("d", text))]
    assert answers == [
        "The first sentence is here.",
        "Is the second one a question?",
        "Yes it surely is!",
    ]


def test_short_sentences_are_dropped() -> None:
    text = "Too short here. This one has four. Only three words. Four words are enough."
    answers = [e.answer for e in encode(("d", text))]
    assert answers == ["This one has four.", "Four words are enough."]


def test_dots_inside_words_do_not_split() -> None:
    text = "Keep store-3.db and app.log files around for now."
    assert [e.answer for e in encode(("d", text))] == [text]


def test_empty_and_blank_documents_give_nothing() -> None:
    assert encode(("a", ""), ("b", "   \n\n  ")) == []
    assert LocalEncoder().encode([]) == []


# -- rule 2: explicit entries -------------------------------------------------


def test_explicit_entry_question_answer_and_source() -> None:
    (entry,) = encode(("notes", "Cache chunk files under cache/ are safe to remove at any time."))
    assert entry.kind is EntryKind.EXPLICIT
    assert entry.question == "What is known about cache chunk files under cache/ are?"
    assert entry.answer == "Cache chunk files under cache/ are safe to remove at any time."
    assert entry.sources == ["notes"]


def test_question_strips_trailing_punctuation_of_the_sixth_word() -> None:
    (entry,) = encode(("d", "Old logs under logs/ rotate, weekly and quietly."))
    assert entry.question == "What is known about old logs under logs/ rotate, weekly?"
    (short,) = encode(("d", "Four words only here!"))
    assert short.question == "What is known about four words only here?"


def test_identical_sentence_in_two_documents_merges_provenance() -> None:
    same = "Backups run every night at two."
    entries = encode(("b-doc", same), ("a-doc", f"{same} Another line with four words."))
    explicit = of_kind(entries, EntryKind.EXPLICIT)
    assert [e.answer for e in explicit] == [same, "Another line with four words."]
    assert explicit[0].sources == ["b-doc", "a-doc"]
    assert explicit[1].sources == ["a-doc"]


def test_repeated_sentence_in_one_document_is_kept_once() -> None:
    same = "Backups run every night at two."
    (entry,) = encode(("d", f"{same} {same}"))
    assert entry.sources == ["d"]


# -- rules 3-5: entities -------------------------------------------------------


def test_leading_article_is_removed_from_an_entity() -> None:
    entries = encode(("d", "The Platform Team owns the retention policy."))
    (entity,) = of_kind(entries, EntryKind.ENTITY)
    assert entity.question == "What do we know about Platform Team?"
    assert entity.answer == "The Platform Team owns the retention policy."
    assert entity.sources == ["d"]


def test_multi_word_entity_counts_even_at_sentence_start() -> None:
    entries = encode(("d", "Platform Team owns the retention policy."))
    assert [e.question for e in of_kind(entries, EntryKind.ENTITY)] == [
        "What do we know about Platform Team?"
    ]


def test_single_capitalized_word_counts_only_mid_sentence() -> None:
    initial_only = encode(("d", "Restoring a destroyed file is expensive."))
    assert of_kind(initial_only, EntryKind.ENTITY) == []
    mid = encode(("d", "The offsite usually happens in October."))
    assert [e.question for e in of_kind(mid, EntryKind.ENTITY)] == [
        "What do we know about October?"
    ]


def test_single_word_seen_mid_sentence_once_also_collects_initial_mentions() -> None:
    text = "Berlin hosts the main office. The team meets in Berlin every spring."
    (entity,) = of_kind(encode(("d", text)), EntryKind.ENTITY)
    assert entity.question == "What do we know about Berlin?"
    assert entity.answer == text


def test_all_caps_and_mixed_case_words_are_not_entities() -> None:
    entries = encode(("d", "Quarterly report PDF files and the NASA logs stay."))
    assert of_kind(entries, EntryKind.ENTITY) == []


def test_entity_answer_is_first_two_distinct_sentences() -> None:
    text = (
        "We asked the Platform Team first. "
        "We asked the Platform Team first. "
        "Then the Platform Team answered quickly. "
        "Later the Platform Team went home early."
    )
    (entity,) = of_kind(encode(("d", text)), EntryKind.ENTITY)
    assert entity.answer == (
        "We asked the Platform Team first. Then the Platform Team answered quickly."
    )
    assert of_kind(encode(("d", text)), EntryKind.CROSS_DOC) == []


def test_cross_doc_entry_for_entity_in_two_documents() -> None:
    entries = encode(
        ("zeta", "Ask the Platform Team before deleting data. Logs may be deleted freely."),
        ("alpha", "The Platform Team owns retention. The Platform Team answers within a day."),
    )
    (entity,) = of_kind(entries, EntryKind.ENTITY)
    (cross,) = of_kind(entries, EntryKind.CROSS_DOC)
    assert entity.sources == ["alpha", "zeta"]
    assert entity.answer == (
        "Ask the Platform Team before deleting data. The Platform Team owns retention."
    )
    assert cross.question == "Combining all sources, what is the full picture on Platform Team?"
    assert cross.answer == (
        "Ask the Platform Team before deleting data. The Platform Team owns retention. "
        "The Platform Team answers within a day."
    )
    assert cross.sources == ["alpha", "zeta"]


def test_output_order_is_explicit_then_entity_then_cross_doc() -> None:
    entries = encode(
        ("one", "The Platform Team owns data retention. Visits happen in March and April."),
        ("two", "The Platform Team answers within a day."),
    )
    kinds = [e.kind for e in entries]
    assert kinds == [EntryKind.EXPLICIT] * 3 + [EntryKind.ENTITY] * 3 + [EntryKind.CROSS_DOC]
    assert [e.question for e in of_kind(entries, EntryKind.ENTITY)] == [
        "What do we know about Platform Team?",
        "What do we know about March?",
        "What do we know about April?",
    ]


# -- non-ASCII, determinism ----------------------------------------------------


def test_non_ascii_text_encodes_without_crashing() -> None:
    entries = encode(
        ("zh", "数据库文件必须保留。 日志 文件 可以 删除 了。"),
        ("ar", "يجب الاحتفاظ بملفات قاعدة البيانات دائما. هل يمكن حذف السجلات القديمة الآن؟"),
        ("mix", "Le café de Zürich ferme à midi. Der Büroschlüssel liegt beim Empfang."),
    )
    answers = [e.answer for e in entries if e.kind is EntryKind.EXPLICIT]
    assert "يجب الاحتفاظ بملفات قاعدة البيانات دائما." in answers
    assert "Le café de Zürich ferme à midi." in answers
    arabic = next(e for e in entries if e.answer.startswith("هل"))
    assert arabic.question == "What is known about هل يمكن حذف السجلات القديمة الآن?"
    (chinese,) = [e for e in entries if e.sources == ["zh"]]
    assert chinese.answer == "数据库文件必须保留。 日志 文件 可以 删除 了。"


def test_encoding_is_deterministic() -> None:
    first = LocalEncoder().encode(demo_corpus())
    second = LocalEncoder().encode(demo_corpus())
    assert shape(first) == shape(second)
    assert len({e.id for e in first}) == len(first)


def test_encoder_does_not_share_state_between_calls() -> None:
    encoder = LocalEncoder()
    first = encoder.encode([Document("a", "The Platform Team owns data retention.")])
    second = encoder.encode([Document("b", "The Platform Team owns data retention.")])
    assert [e.sources for e in first] == [["a"], ["a"]]
    assert [e.sources for e in second] == [["b"], ["b"]]


# -- the demo corpus -------------------------------------------------------------

DEMO_DOCS = ("forum-post", "platform-notes", "runbook")


def test_demo_corpus_documents() -> None:
    docs = demo_corpus()
    assert tuple(d.doc_id for d in docs) == DEMO_DOCS
    assert all(isinstance(d, Document) and d.text.strip() for d in docs)


def test_demo_corpus_counts() -> None:
    entries = LocalEncoder().encode(demo_corpus())
    assert len(entries) == 16
    assert len(of_kind(entries, EntryKind.EXPLICIT)) == 13
    entities = of_kind(entries, EntryKind.ENTITY)
    assert [e.question for e in entities] == [
        "What do we know about Platform Team?",
        "What do we know about October?",
    ]
    (cross,) = of_kind(entries, EntryKind.CROSS_DOC)
    assert cross.question == "Combining all sources, what is the full picture on Platform Team?"
    assert cross.sources == ["platform-notes", "runbook"]
    assert sum("forum-post" in e.sources for e in entries) == 3


def test_demo_corpus_sentences_per_document() -> None:
    explicit = of_kind(LocalEncoder().encode(demo_corpus()), EntryKind.EXPLICIT)
    per_doc = {doc: sum(e.sources == [doc] for e in explicit) for doc in DEMO_DOCS}
    assert per_doc == {"forum-post": 3, "platform-notes": 5, "runbook": 5}


def test_demo_corpus_carries_the_poison_and_the_protection() -> None:
    entries = LocalEncoder().encode(demo_corpus())
    forum = " ".join(e.answer for e in entries if e.sources == ["forum-post"])
    assert "redundant" in forum and "safe to remove" in forum and "data/" in forum
    runbook = [e.answer for e in entries if e.sources == ["runbook"]]
    database = next(a for a in runbook if "data/" in a)
    assert "protected" in database and "must be retained" in database
    reports = next(a for a in runbook if "reports/" in a)
    assert "protected" in reports and "must be kept" in reports
    for folder in ("logs/", "cache/", "tmp/"):
        disposal = next(a for a in runbook if folder in a)
        assert any(m in disposal for m in ("may be deleted", "safe to remove", "disposable"))
