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
from darwin_memo.retrieval import STOPWORDS, _ascii_tokens, _unit, tokenize


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
        "import darwin_memo.retrieval as r, sys; r.HashingEmbedder()('warm up');"
        "print(r._unit_vector() is None, r._compiled('ascii_tokens') is None,"
        " 'darwin_memo._ctext' in sys.modules)"
    )
    for value, expect in (("1", "True True False"), ("0", "False False True")):
        env = {**os.environ, "DARWIN_MEMO_PURE_PYTHON": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == expect.split()
