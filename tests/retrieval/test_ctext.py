"""The compiled text helpers (``darwin_memo._ctext``): tokens and HashingEmbedder's vectors.

They are optional: where no C compiler was found at install time the tokens and the
vectors come from Python. These tests compare the two (tokens exactly, vectors bit for
bit); they skip where it is not built, unless ``DARWIN_MEMO_REQUIRE_EXTENSION=1`` (as
``.ci/run`` sets) makes that a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import compiled_or_skip
from darwin_memo import HashingEmbedder
from darwin_memo.retrieval.lexical import STOPWORDS, _ascii_tokens, _unit, tokenize


def _compiled() -> ModuleType:
    return compiled_or_skip("_ctext")  # type: ignore[no-any-return]


def _python_vector(embedder: HashingEmbedder, text: str) -> list[float]:
    lo, hi = embedder.ngram_range
    joined = " ".join(tokenize(text))
    return _unit(HashingEmbedder._grams(joined, embedder.dims, lo, hi))


def _bits(vec: list[float]) -> list[str]:
    return [v.hex() for v in vec]


_WORDS = [*sorted(STOPWORDS)[:40], "pass", "bus", "this", "classes", "tests", "ss", "sss"]
_ASCII = st.lists(
    st.one_of(
        st.sampled_from(_WORDS),
        st.text(alphabet=st.sampled_from(list("abcsxyzABCS019.*_-/:?! \t\n\x00\x7f")), max_size=12),
    ),
    max_size=40,
).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(_ASCII)
def test_ascii_tokens_equal_the_python_comprehension(text: str) -> None:
    ctext = _compiled()
    lowered = text.lower()
    assert ctext.ascii_tokens(lowered, STOPWORDS) == _ascii_tokens(lowered)
    assert tokenize(text) == _ascii_tokens(lowered)  # tokenize uses it


def test_ascii_tokens_of_lessons() -> None:
    ctext = _compiled()
    text = (
        "how do i fix tests failing in eu-west-1? pass the classes to the bus; "
        "a.b.c *glob* v0.36.2 this is it's ss sss abcs"
    )
    expect = _ascii_tokens(text)
    assert ctext.ascii_tokens(text, STOPWORDS) == expect
    assert "classe" in expect and "pass" in expect and "bus" in expect and "the" not in expect
    assert ctext.ascii_tokens("", STOPWORDS) == []
    with pytest.raises(ValueError, match="ASCII"):
        ctext.ascii_tokens("café", STOPWORDS)
    assert ctext.ascii_tokens(text, set(STOPWORDS)) == expect
    with pytest.raises(TypeError, match="set"):
        ctext.ascii_tokens("text", list(STOPWORDS))


# Letters from several scripts (1- to 4-byte UTF-8), digits, punctuation and spaces.
_TEXT = st.text(
    alphabet=st.sampled_from(list("abcxyz019 _-./'") + list("éüßçøΩжλ数据库連接") + ["😀", "𝔘"]),
    max_size=300,
)


@settings(max_examples=300, deadline=None)
@given(
    _TEXT,
    st.sampled_from([1, 2, 7, 64, 100, 256, 384]),
    st.integers(1, 4),
    st.integers(0, 3),
)
def test_vectors_equal_the_python_loop_bit_for_bit(
    text: str, dims: int, lo: int, extra: int
) -> None:
    cgrams = _compiled()
    embedder = HashingEmbedder(dims=dims, ngram_range=(lo, lo + extra))
    joined = " ".join(tokenize(text)).encode("utf-8")
    compiled = cgrams.unit_vector(joined, lo, lo + extra, dims)
    assert compiled is not None
    assert _bits(compiled) == _bits(_python_vector(embedder, text))
    assert _bits(embedder(text)) == _bits(compiled)  # the embedder uses it


def test_lessons_embed_as_the_python_loop_embeds_them() -> None:
    _compiled()
    embedder = HashingEmbedder()
    texts = [
        "How do I fix test_sifcal_callorzu failing in feature-flags on eu-west-1?",
        "restart brunkelnixnu-worker and pin it to v0.36.2 (see INC-64941)",
        "Le cache de l'équipe est-il sûr à supprimer ?",
        "数据库连接超时怎么办",
        "",
        "ab",
    ]
    for text in texts:
        assert _bits(embedder(text)) == _bits(_python_vector(embedder, text))
    assert embedder("") == [0.0] * 256


def test_bad_arguments_raise_instead_of_crashing() -> None:
    cgrams = _compiled()
    with pytest.raises(ValueError, match="lo <= hi"):
        cgrams.unit_vector(b"abc", 3, 2, 8)
    with pytest.raises(ValueError, match="lo <= hi"):
        cgrams.unit_vector(b"abc", 0, 2, 8)
    with pytest.raises(ValueError, match="dims"):
        cgrams.unit_vector(b"abc", 1, 2, 0)
    with pytest.raises(TypeError):
        cgrams.unit_vector("text, not bytes", 1, 2, 8)


def test_a_lone_surrogate_embeds_as_the_python_loop_embeds_it() -> None:
    _compiled()
    embedder = HashingEmbedder()
    for text in ("\udcff", "abc\udcffdef", "caf\udce9 au lait"):
        assert _bits(embedder(text)) == _bits(_python_vector(embedder, text))


def test_the_pure_python_switch_keeps_the_python_loop() -> None:
    _compiled()
    code = (
        "import darwin_memo.retrieval.lexical as r, sys; r.HashingEmbedder()('warm up');"
        "print(r._unit_vector() is None, r._compiled('ascii_tokens') is None,"
        " 'darwin_memo._ctext' in sys.modules)"
    )
    for value, expect in (("1", "True True False"), ("0", "False False True")):
        env = {**os.environ, "DARWIN_MEMO_PURE_PYTHON": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == expect.split()


#: Texts for the index's lists: ASCII, accented, the Kelvin sign (its lowercase is an
#: ASCII k), full-width and CJK letters, stopwords, repeats within one text.
_INDEX_TEXT = st.lists(
    st.one_of(
        st.sampled_from([*_WORDS, "k8s", "\u212a8s", "caf\u00e9", "CAFE", "\uff21\uff30\uff29"]),
        st.sampled_from(["\u5b66\u4e60", "na\u00efve", "tests", "Tests", "re-run", "v1.2*"]),
        st.text(alphabet=st.sampled_from(list("abs KS\u00e9\u212a.*-")), max_size=8),
    ),
    max_size=12,
).map(" ".join)


def _lists(retriever: object) -> object:
    r = retriever
    return (
        {t: list(a) for t, a in r._postings.items()},  # type: ignore[attr-defined]
        r._df,  # type: ignore[attr-defined]
        r._ids,  # type: ignore[attr-defined]
        r._ordinal,  # type: ignore[attr-defined]
        r._tokens,  # type: ignore[attr-defined]
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_INDEX_TEXT, _INDEX_TEXT), max_size=25), st.integers(0, 3))
def test_post_entries_lists_what_the_python_pass_lists(
    texts: list[tuple[str, str]], gone: int
) -> None:
    """An empty index listed in C (``post_entries``) equals the Python pass: the same
    ordinals under the same tokens, the same df, ids and cached texts, and the same
    results from a search, including after entries listed before were all removed."""
    from darwin_memo import LexicalRetriever, MemoryEntry
    from darwin_memo.retrieval import lexical as retrieval_module

    _compiled()
    entries = [MemoryEntry(q or "?", a, id=f"e{i}") for i, (q, a) in enumerate(texts)]
    earlier = [MemoryEntry(f"old {i}", "gone", id=f"old{i}") for i in range(gone)]
    made = []
    for compiled in (True, False):
        retrieval_module._COMPILED.pop("post_entries", None)
        if not compiled:
            retrieval_module._COMPILED["post_entries"] = None
        try:
            r = LexicalRetriever()
            if earlier:  # listed, then removed: the next pass starts past their ordinals
                r.index_many(earlier)
                r._list_pending()
                for e in earlier:
                    r._unindex(e.id)
                r._tokens.clear()
            r.index_many(entries)
            r._list_pending()
            hits = [[(i, round(s, 12)) for i, s in r.search(q, 3)] for q, _ in texts[:5]]
            made.append((_lists(r), hits))
        finally:
            retrieval_module._COMPILED.pop("post_entries", None)
    assert made[0] == made[1]


def test_post_entries_refuses_what_it_cannot_read() -> None:
    from array import array

    ctext = _compiled()
    with pytest.raises(TypeError, match="frozenset"):
        ctext.post_entries(["a"], ["b"], 0, set(STOPWORDS), tokenize, array, {}, {})
    with pytest.raises(TypeError, match="question and answer must be str"):
        ctext.post_entries(["a"], [None], 0, STOPWORDS, tokenize, array, {}, {})
    with pytest.raises(ValueError, match="as many answers"):
        ctext.post_entries(["a"], [], 0, STOPWORDS, tokenize, array, {}, {})
    with pytest.raises(TypeError, match="list of str"):
        ctext.post_entries(["\u00e9"], ["b"], 0, STOPWORDS, lambda text: [1], array, {}, {})
    postings: dict[str, object] = {}
    df: dict[str, int] = {}
    ctext.post_entries(
        ["Tests pass", "x"], ["tests", "pass"], 7, STOPWORDS, tokenize, array, postings, df
    )
    assert {t: list(a) for t, a in postings.items()} == {"test": [7], "pass": [7, 8], "x": [8]}  # type: ignore[call-overload]
    assert df == {"test": 1, "pass": 2, "x": 1}
