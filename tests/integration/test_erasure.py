"""Gone means gone in every serialised form: after a forget, no key's ``DUMP`` (what RDB
snapshots, AOF rewrites, replicas and MIGRATE carry) holds the text, plain or LZF-
compressed; a forget finds text a person reads the same whatever invisible characters or
compatibility forms spell it; a replayed person without a user id is forgotten by name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import START, CoreFactory, all_keys
from tests.rdb_scan import holds

SCOPE = "discord:1:2"
SECRET = "078-05-1120-SECRET"


async def test_no_dump_of_any_key_holds_a_forgotten_text(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(
        clock=clock, memory={"compact_trigger_tokens": 100, "compact_min_messages": 3}
    )
    padding = "the quarterly planning notes repeat themselves " * 6
    for n in range(40):  # several stream nodes' worth, the secret in the middle of them
        clock.advance(timedelta(minutes=3))
        text = f"{padding} {SECRET} {padding}" if n in (17, 18) else f"{padding} line {n}"
        await core.intake.accept(IncomingMessage(scope=SCOPE, text=text, author="Ann"))
    await core.maintenance.maintain(SCOPE)  # summaries that quote it
    client = core.store.client

    async def holding() -> list[str]:
        return [k for k in await all_keys(core) if holds(await client.dump(k) or b"", SECRET)]

    assert await holding()  # the log, the summaries...
    report = await core.admin.text.forget_text(SCOPE, SECRET)
    assert report.messages == 2
    assert await holding() == []
    # The log kept its other messages, in order, and its ids never go back.
    log = await core.repo.reads.all_entries(SCOPE)
    assert len(log) == 38 and [e.id for e in log] == sorted(e.id for e in log)
    info = await client.xinfo_stream(core.store.keys.scope(SCOPE).log)
    assert info["last-generated-id"] >= log[-1].id and info["max-deleted-entry-id"] != "0-0"
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="after", author="Ann"))
    assert (await core.repo.reads.all_entries(SCOPE))[-1].id > log[-1].id


async def test_a_forget_racing_new_messages_keeps_them(make_core: CoreFactory) -> None:
    """The rewrite's last step takes in what was stored since its slices copied the log."""
    core = await make_core(offline=True)
    for n in range(30):
        await core.intake.accept(IncomingMessage(scope=SCOPE, text=f"line {n}", author="A"))
    await core.intake.accept(IncomingMessage(scope=SCOPE, text=f"x {SECRET}", author="A"))
    rewrite = core.repo.writes.rewrite_log

    async def with_a_message_between_slices(scope: str, *, slice_size: int = 1000) -> bool:
        await core.intake.accept(IncomingMessage(scope=scope, text="new", author="B"))
        return await rewrite(scope, slice_size=7)

    core.repo.writes.rewrite_log = with_a_message_between_slices  # type: ignore[method-assign]
    await core.admin.text.forget_text(SCOPE, SECRET)
    texts = [e.text for e in await core.repo.reads.all_entries(SCOPE)]
    assert texts == [f"line {n}" for n in range(30)] + ["new"]


@pytest.mark.parametrize(
    ("said", "forget"),
    [
        ("the vault word is ZEBRA\u200bFALCON", "zebrafalcon"),  # a zero-width space
        ("we bought new soft\u00adware licences", "software"),  # a soft hyphen
        ("the offsite is in İSTANBUL in May", "istanbul"),  # the Turkish dotted capital I
        ("the code is ＡＢＣ１２３", "abc123"),  # full-width letters and digits
    ],
)
async def test_forget_finds_text_a_person_reads_the_same(
    make_core: CoreFactory, said: str, forget: str
) -> None:
    core = await make_core(offline=True)
    await core.intake.accept(IncomingMessage(scope=SCOPE, text=said, author="Ann"))
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="something else", author="A"))
    await core.admin.remember(SCOPE, said)
    report = await core.admin.text.forget_text(SCOPE, forget)
    assert (report.messages, report.facts) == (1, 1)
    assert [e.text for e in await core.repo.reads.all_entries(SCOPE)] == ["something else"]


async def test_recall_finds_what_a_person_reads_the_same(make_core: CoreFactory) -> None:
    core = await make_core(offline=True, memory={"window_tokens": 50, "window_min_tokens": 0})
    await core.intake.accept(
        IncomingMessage(scope=SCOPE, text="the vault word is ZEBRA\u200bFALCON", author="Ann")
    )
    for n in range(15):
        await core.intake.accept(IncomingMessage(scope=SCOPE, text=f"chatter {n}", author="B"))
    assert core.recall is not None
    hits = await core.recall.search(SCOPE, "what is the zebrafalcon?")
    assert hits and any("ZEBRA" in d.text for d in hits[0].docs)


async def test_forget_me_by_name_for_lines_without_a_user_id(make_core: CoreFactory) -> None:
    """A replay without user ids: "al" is a person by name in the console's place. forget
    me as "al" forgets al's lines, never Alice's (a name inside another name is not them)."""
    core = await make_core(offline=True)
    scope = "console:notes"
    for author, text in (("al", "al's plan"), ("Alice", "alice's plan"), ("al", "al again")):
        await core.intake.accept(IncomingMessage(scope=scope, text=text, author=author))
    report = await core.admin.person.forget_user(scope, user_id="al", name="al")
    assert report.messages == 2
    assert [e.text for e in await core.repo.reads.all_entries(scope)] == ["alice's plan"]
    # On a platform, a display name is no proof of who someone is: ids only.
    await core.intake.accept(IncomingMessage(scope=SCOPE, text="imported", author="bob"))
    assert (await core.admin.person.forget_user(SCOPE, user_id="99", name="bob")).messages == 0
