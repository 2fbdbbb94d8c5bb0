"""Forget as a new user meets it in the terminal: text hidden by invisible characters and a
person known only by name (a replay without user ids), through the real `memorybot` CLI."""

from __future__ import annotations

import json
import stat

from tests.helpers import CLI
from tests.rdb_scan import files_holding


async def test_console_forgets_text_spelled_with_invisible_characters(
    cli: CLI, clean_redis: str
) -> None:
    said = (
        "the vault word is ZEBRA\u200bFALCON\n"
        "we bought new soft\u00adware licences\n"
        "the offsite is in İSTANBUL in May\n"
        "nothing to forget here\n"
    )
    forget = "/memory forget zebrafalcon\n/memory forget software\n/memory forget istanbul\n"
    run = await cli(
        "console", "--scope", "team", stdin=said + forget + "/memory show\n", REDIS_URL=clean_redis
    )
    assert run.code == 0, run.err
    assert run.out.count("Forgot") == 3 and "1 messages" in run.out
    shown = run.out.rsplit("Memory of console:team", 1)[1]
    assert "nothing to forget here" in shown
    for hidden in ("FALCON", "ware licences", "STANBUL"):
        assert hidden not in shown


async def test_forget_me_by_name_after_a_replay_without_user_ids(
    cli: CLI, clean_redis: str
) -> None:
    lines = [
        {"ts": "2025-08-11T09:00:00+00:00", "user": "al", "text": "al's secret plan"},
        {"ts": "2025-08-11T09:01:00+00:00", "user": "Alice", "text": "alice's plan"},
    ]
    path = cli.home / "chat.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    env = {"REDIS_URL": clean_redis}
    assert (await cli("replay", str(path), "--scope", "notes", "--no-reply", **env)).code == 0
    forgot = await cli("memory", "forget", "me", "--scope", "notes", "--user", "al", **env)
    assert forgot.code == 0 and "1 messages" in forgot.out, forgot.out + forgot.err
    shown = await cli("memory", "show", "--scope", "notes", **env)
    assert "alice's plan" in shown.out and "secret plan" not in shown.out


async def test_a_forget_on_the_embedded_default_leaves_no_file_holding_the_text(
    cli: CLI,
) -> None:
    """A new user's machine: a data directory made beforehand with `mkdir -p` (0755), the
    console on the embedded store, a secret said, the store compacted (so the base file holds
    it, LZF-compressed), then forgotten in a later console. No file of the data directory
    holds it afterwards, and the directory and its files are private."""
    data_dir = cli.home / "data" / "memorybot"
    data_dir.mkdir(parents=True)
    data_dir.chmod(0o755)
    filler = " ".join(f"note{n}" for n in range(40))  # long enough to be compressed
    said = f"my card PIN is 4417-SECRET-9921, keep it safe {filler}\nlunch is at noon\n"
    first = await cli("console", "--user", "Alice", stdin=said)
    assert first.code == 0, first.err
    compact = await cli("store", "compact")
    assert compact.code == 0, compact.err
    assert files_holding(data_dir, "4417-SECRET-9921")  # the base file holds it now
    forget = await cli(
        "console", "--user", "Alice", stdin="/memory forget 4417-SECRET\n/memory show\n"
    )
    assert forget.code == 0, forget.err
    assert "Forgot" in forget.out and "lunch is at noon" in forget.out
    assert files_holding(data_dir, "4417-SECRET-9921") == []
    assert files_holding(data_dir, "lunch is at noon")  # (the scan does find what is kept)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for path in data_dir.rglob("*"):
        if path.is_file() and not path.is_symlink() and not path.is_socket():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
