"""What ``memorybot memory import FILE`` reads: the JSON of an export, or one line that
names the file, says what is wrong with it and what is expected. Never a
UnicodeDecodeError: a binary file, a file that is not UTF-8 or not JSON is bad input."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from bots.cli.memory import read_export
from memory_core.errors import InputError

EXPORT = {"format": "memorybot-export", "version": 1, "log": [{"text": "café"}]}


def png() -> bytes:
    """A real 1x1 PNG image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def refusal(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        read_export(path)
    message = str(caught.value)
    assert "\n" not in message, message
    assert str(path) in message
    return message


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("picture.png", png()),
        (
            "program",
            Path("/bin/true").read_bytes() if Path("/bin/true").is_file() else b"\x7fELF\0",
        ),
        ("zeros.json", b'{"format": "memorybot-export"}\x00'),
    ],
)
def test_a_binary_file_is_refused_saying_what_is_expected(
    tmp_path: Path, name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    message = refusal(path)
    assert "binary file" in message and "memorybot export" in message


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(json.dumps(EXPORT, indent=1, ensure_ascii=False).encode("latin-1"))
    message = refusal(path)
    line = 1 + json.dumps(EXPORT, indent=1, ensure_ascii=False).split("café")[0].count("\n")
    assert f"not UTF-8 text (byte 0xe9 on line {line})" in message
    assert "save it as UTF-8" in message


def test_utf16_is_named(tmp_path: Path) -> None:
    path = tmp_path / "notepad.json"
    path.write_bytes(json.dumps(EXPORT).encode("utf-16"))
    assert "UTF-16" in refusal(path)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"{broken", "not valid JSON (Expecting property name enclosed in double quotes at line 1"),
        (b"", "not valid JSON (Expecting value at line 1, column 1)"),
        (b"[" * 100_000, "not valid JSON (RecursionError)"),
        (b"1" * 5_000, "not valid JSON (ValueError)"),
    ],
)
def test_a_file_that_is_not_json_is_refused(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    message = refusal(path)
    assert said in message and "memorybot export" in message


def test_a_missing_file_or_a_directory_cannot_be_read(tmp_path: Path) -> None:
    assert "No such file" in refusal(tmp_path / "nope.json")
    assert "Is a directory" in refusal(tmp_path)


def test_utf8_with_or_without_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    for bom in (b"", b"\xef\xbb\xbf"):
        path.write_bytes(bom + json.dumps(EXPORT, ensure_ascii=False).encode("utf-8"))
        assert read_export(path) == EXPORT
