"""The compiled pack editor (``darwin_memo._cpack``): buried rows out of a token's list.

Optional like the other compiled helpers: where it is not built the SQLite store
filters its packs in Python. These tests compare the two; they skip where it is not
built, unless ``DARWIN_MEMO_REQUIRE_EXTENSION=1`` (as ``.ci/run`` sets) makes that a
failure.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import compiled_or_skip
from darwin_memo import native
from darwin_memo.backends.sqlstore import _dropper, pack_ids, unpack_ids
from darwin_memo.errors import StoreFormatError


def _compiled() -> ModuleType:
    return compiled_or_skip("_cpack")  # type: ignore[no-any-return]


def _bitmap(gone: set[int], extra: int) -> bytes:
    bits = bytearray((max(gone) >> 3) + 1 + extra if gone else extra)
    for rowid in gone:
        bits[rowid >> 3] |= 1 << (rowid & 7)
    return bytes(bits)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3000), unique=True).map(sorted),
    st.sets(st.integers(0, 3000)),
    st.integers(0, 3),
)
def test_drop_ids_equals_the_python_filter(ids: list[int], gone: set[int], extra: int) -> None:
    cpack = _compiled()
    pack = pack_ids(ids)
    out = cpack.drop_ids(pack, _bitmap(gone, extra))
    assert list(unpack_ids(out)) == [r for r in ids if r not in gone]
    if not gone.intersection(ids):
        assert out is pack  # unchanged: the caller skips the write


def test_drop_ids_reads_rowids_past_the_bitmap_as_kept() -> None:
    cpack = _compiled()
    big = [5, 2**31 + 7, 2**32 - 1]
    assert list(unpack_ids(cpack.drop_ids(pack_ids(big), _bitmap({5}, 0)))) == big[1:]
    assert cpack.drop_ids(b"", b"\xff") == b""


def test_drop_ids_refuses_a_torn_pack() -> None:
    cpack = _compiled()
    for torn in (b"\x01\x80", b"\xff\xff\xff\xff\x10", b"\xff\xff\xff\xff\x0f\x00"):
        with pytest.raises(ValueError, match="torn"):
            cpack.drop_ids(torn, b"\xff")
    with pytest.raises(TypeError):
        cpack.drop_ids(bytearray(4), b"")  # a pack is bytes, as SQLite returns blobs


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 500), unique=True).map(sorted), st.sets(st.integers(0, 500)))
def test_the_store_drops_alike_compiled_or_not(ids: list[int], gone: set[int]) -> None:
    _compiled()
    pack = pack_ids(ids)
    as_dict = dict.fromkeys(gone, "")  # what ListChanges.gone holds: rowid -> toks
    compiled = _dropper(as_dict)(pack)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.PURE_PYTHON_ENV, "1")
        python = _dropper(as_dict)(pack)
    assert compiled == python == pack_ids([r for r in ids if r not in gone])
    assert (compiled is pack) == (python is pack) == (not gone.intersection(ids))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), unique=True).map(sorted))
def test_packs_are_coded_alike_compiled_or_not(ids: list[int]) -> None:
    _compiled()
    compiled = pack_ids(ids)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.PURE_PYTHON_ENV, "1")
        python = pack_ids(ids)
        assert list(unpack_ids(compiled)) == ids
    assert compiled == python
    assert list(unpack_ids(python)) == ids
    assert len(compiled) <= 5 * len(ids)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40))
def test_any_bytes_decode_alike_compiled_or_not(blob: bytes) -> None:
    """Every string of whole varints is a pack; anything else is torn, in both."""
    _compiled()

    def decode() -> list[int] | str:
        try:
            return list(unpack_ids(blob))
        except StoreFormatError as exc:
            return str(exc)

    compiled = decode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.PURE_PYTHON_ENV, "1")
        python = decode()
    assert compiled == python
    if isinstance(compiled, list):
        assert compiled == sorted(set(compiled)) and all(r < 2**32 for r in compiled)
        assert list(unpack_ids(pack_ids(compiled))) == compiled  # (padded varints re-code)
    else:
        assert "torn" in compiled and "verify" in compiled


def test_pack_ids_refuses_rowids_out_of_order() -> None:
    for ids in ([3, 3], [5, 2]):
        with pytest.raises(ValueError, match="strictly increasing"):
            pack_ids(ids)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(native.PURE_PYTHON_ENV, "1")
            with pytest.raises(ValueError, match="strictly increasing"):
                pack_ids(ids)
