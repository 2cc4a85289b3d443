"""The code a lesson's row is stored in, in an SQLite store (schema 15).

A lesson's row (``backends.sqlstore.row_json``: ``[question, answer, sources,
recorded_ts]`` as JSON) is written as a BLOB: one byte naming the code (``1``), then
the UTF-8 bytes of that JSON, each replaced by its codeword in a fixed canonical
Huffman code (``LENGTHS``), most significant bit first, the last byte filled with one
bits. English prose of 200 to 300 characters takes about 30% fewer bytes; a text the
code does not make shorter (mostly non-ASCII) is stored as JSON text, as every other
row is. Decoding is a table lookup per byte (about 1 us a row in C).

``LENGTHS`` was derived once from the byte frequencies of this project's own prose
(README.md and docs/*.md when schema 15 was written), every byte value given a
codeword of at most 12 bits. It is part of the store's format: a different code would
get a new first byte, and the old one would stay readable.

``darwin_memo._ctext`` codes and decodes in C; the Python twins here give the same
bytes (tests compare them).
"""

from __future__ import annotations

from . import native
from .errors import StoreFormatError

TYPE_CHECKING = False  # (typing is not imported on the ledger's path)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CODE_1", "LENGTHS", "decode", "encode", "row_text"]

#: The first byte of a row coded with ``LENGTHS``.
CODE_1 = 1

#: The codeword length of each byte value 0..255 (a complete prefix code: the Kraft sum
#: is exactly 1, and the longest codewords, 12 bits, include the all-ones word, so the
#: one bits that fill the last byte never make a codeword), one hexadecimal digit each.
_LENGTH_DIGITS = (
    "cccccccccc6ccccccccccccccccccccc"  # 0x00-0x1f
    "3c99bba9778a6668667777788889baab"  # 0x20-0x3f
    "baa9b9bbb9ab99a99aa99abbbbcabac8"  # 0x40-0x5f
    "6576547755a756556a54467777ab5bcc"  # 0x60-0x7f
    "cccccccccccccccccccccccccccccccc"  # 0x80-0x9f
    "cccccccccccccccccccccbcccccccccc"  # 0xa0-0xbf
    "ccbccccccccccccccccccccccccccccc"  # 0xc0-0xdf
    "cccccccccccccccccccccccccccccccc"  # 0xe0-0xff
)
LENGTHS = bytes(int(d, 16) for d in _LENGTH_DIGITS)

_MAX = 12


def _canonical() -> tuple[list[int], list[int]]:
    """Each byte's codeword, and the decoding table: for every 12-bit window, the
    byte whose codeword starts it, plus its length times 256."""
    order = sorted(range(256), key=lambda b: (LENGTHS[b], b))
    codes = [0] * 256
    code, prev = 0, LENGTHS[order[0]]
    for b in order:
        code <<= LENGTHS[b] - prev
        prev = LENGTHS[b]
        codes[b] = code
        code += 1
    table = [0] * (1 << _MAX)
    for b in range(256):
        n = LENGTHS[b]
        first = codes[b] << (_MAX - n)
        for w in range(first, first + (1 << (_MAX - n))):
            table[w] = b | (n << 8)
    return codes, table


#: ``_canonical()``, made when the Python twins first need it.
_PY: list[tuple[list[int], list[int]]] = []


def _python_tables() -> tuple[list[int], list[int]]:
    if not _PY:
        assert sum(2 ** (_MAX - n) for n in LENGTHS) == 1 << _MAX  # complete: see LENGTHS
        _PY.append(_canonical())
    return _PY[0]


#: ``_ctext`` with the code loaded into it, or False (not built, or not wanted).
_C: list[Any] = [None]


def compiled() -> Any:
    """``_ctext`` with the row code loaded, or None (not built, or not wanted)."""
    module = _C[0]
    if module is None:
        module = native.compiled("_ctext")
        if module is not None and hasattr(module, "set_text_code"):
            module.set_text_code(LENGTHS)
        else:
            module = False
        _C[0] = module
    return module or None


def encode(text: str) -> bytes | None:
    """``text`` coded (its first byte ``CODE_1``), or None where that is not shorter
    than its UTF-8 bytes."""
    raw = text.encode("utf-8")
    module = compiled()
    coded = module.code_text(raw) if module is not None else _encode_python(raw)
    return bytes(coded) if len(coded) < len(raw) else None


def _encode_python(raw: bytes) -> bytes:
    acc = bits = 0
    codes, lengths = _python_tables()[0], LENGTHS
    for b in raw:
        n = lengths[b]
        acc = (acc << n) | codes[b]
        bits += n
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return bytes((CODE_1,)) + acc.to_bytes((bits + pad) // 8, "big")


def decode(blob: bytes) -> str:
    """The text a coded row holds. A blob that is not one (another first byte, bits that
    end mid-codeword, bytes that are not UTF-8) raises StoreFormatError."""
    if not blob or blob[0] != CODE_1:
        first = f"first byte {blob[0]}" if blob else "no bytes"
        raise StoreFormatError(
            f"a row holds a BLOB in no code this darwin-memo reads ({first}): the store is "
            "damaged or was written by a newer darwin-memo (upgrade, or run `darwin-memo "
            "ledger FILE verify`)"
        )
    module = compiled()
    try:
        if module is not None:
            text = module.decode_text(blob)
        else:
            text = _decode_python(blob).decode("utf-8")
    except ValueError:  # (UnicodeDecodeError too)
        raise StoreFormatError(
            "a coded row does not decode: the store is damaged "
            "(run `darwin-memo ledger FILE verify` to find it)"
        ) from None
    return str(text)


def _decode_python(blob: bytes) -> bytes:
    n = int.from_bytes(blob[1:], "big")
    rem = 8 * (len(blob) - 1)
    table, out = _python_tables()[1], bytearray()
    while rem:
        if rem >= _MAX:
            w = (n >> (rem - _MAX)) & 0xFFF
        else:
            w = ((n & ((1 << rem) - 1)) << (_MAX - rem)) | ((1 << (_MAX - rem)) - 1)
        entry = table[w]
        length = entry >> 8
        if length > rem:
            if rem < 8 and n & ((1 << rem) - 1) == (1 << rem) - 1:
                break  # the one bits that fill the last byte
            raise ValueError("a codeword runs past the end")
        out.append(entry & 0xFF)
        rem -= length
    return bytes(out)


def row_text(data: str | bytes) -> str:
    """A row's ``data`` as JSON text: decoded where it is coded (a BLOB). Straight to the
    compiled decoder once loaded (a decide reads its candidates so); ``decode`` names
    what is wrong with a blob it refuses."""
    if isinstance(data, str):
        return data
    module = _C[0]
    if module is None:
        module = compiled()
    if module:
        try:
            return str(module.decode_text(data))
        except ValueError:
            pass
    return decode(bytes(data))
