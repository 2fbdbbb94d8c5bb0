"""Finding a text in Redis' serialised forms, as an attacker with the files would: in a
``DUMP`` payload, an RDB snapshot, an append-only file (its RDB preamble and its commands),
plain or LZF-compressed. Redis compresses strings longer than 20 bytes with LZF when
``rdbcompression`` is on (the default): such a string is the byte 0xC3 followed by the
compressed and the uncompressed length (RDB length encoding) and the compressed bytes.
Every candidate 0xC3 is tried; what does not decode is not a compressed string."""

from __future__ import annotations

from pathlib import Path

LZF_ENCODED = 0xC3


def lzf_decompress(data: bytes, expected: int) -> bytes | None:
    """liblzf's format: literal runs (control < 32: control + 1 bytes follow) and back
    references (length in the top 3 bits, 7 meaning one more length byte; offset in the
    low 5 bits and the next byte). None when ``data`` is not such a stream of ``expected``
    bytes."""
    out = bytearray()
    i = 0
    while i < len(data):
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            run = ctrl + 1
            if i + run > len(data):
                return None
            out += data[i : i + run]
            i += run
        else:
            length = ctrl >> 5
            if length == 7:
                if i >= len(data):
                    return None
                length += data[i]
                i += 1
            if i >= len(data):
                return None
            back = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
            i += 1
            if back < 0:
                return None
            for _ in range(length + 2):
                out.append(out[back])
                back += 1
        if len(out) > expected:
            return None
    return bytes(out) if len(out) == expected else None


def _length(data: bytes, i: int) -> tuple[int, int] | None:
    """An RDB length at ``i``: (value, next index), or None."""
    if i >= len(data):
        return None
    first = data[i]
    kind = first >> 6
    if kind == 0:
        return first & 0x3F, i + 1
    if kind == 1:
        if i + 1 >= len(data):
            return None
        return ((first & 0x3F) << 8) | data[i + 1], i + 2
    if first == 0x80 and i + 4 < len(data):
        return int.from_bytes(data[i + 1 : i + 5], "big"), i + 5
    if first == 0x81 and i + 8 < len(data):
        return int.from_bytes(data[i + 1 : i + 9], "big"), i + 9
    return None


def decompressed_strings(data: bytes) -> list[bytes]:
    """Every LZF-compressed string that decodes in ``data``."""
    found: list[bytes] = []
    start = 0
    while (at := data.find(bytes([LZF_ENCODED]), start)) >= 0:
        start = at + 1
        clen = _length(data, at + 1)
        if clen is None:
            continue
        ulen = _length(data, clen[1])
        if ulen is None or not 0 < clen[0] <= len(data) - ulen[1] or ulen[0] > 64 * 1024 * 1024:
            continue
        text = lzf_decompress(data[ulen[1] : ulen[1] + clen[0]], ulen[0])
        if text is not None:
            found.append(text)
    return found


def holds(data: bytes, needle: str) -> bool:
    """Whether ``data`` holds ``needle``, plain or in an LZF-compressed string."""
    raw = needle.encode()
    return raw in data or any(raw in text for text in decompressed_strings(data))


def files_holding(directory: Path, needle: str) -> list[Path]:
    """The files under ``directory`` that hold ``needle`` (see :func:`holds`)."""
    return [
        path
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.is_symlink() and holds(path.read_bytes(), needle)
    ]
