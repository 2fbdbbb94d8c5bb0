"""``/memory why``: what the last answer used, recorded when it is delivered, on a real
Redis and the fake model; forgetting takes the record away, even a forget racing the answer;
the optional source line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

import aiohttp
import pytest

from bots.commands import Actor, Command, execute
from bots.dashboard import running_dashboard
from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage
from memory_core.service.conversation import Conversation
from tests.browser.support import TOKEN
from tests.dashboard_session import log_in_any
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.reply_sink import FakeSink
from tests.helpers import PAPAYA as ANSWER
from tests.helpers import START, CoreFactory

SCOPE = "discord:1:2"
ALICE = Actor(user_id="7", name="Alice", is_admin=True)
BOB = Actor(user_id="8", name="Bob", is_admin=False)
SMALL_WINDOW = {"window_tokens": 60, "window_min_tokens": 0}


def said(
    text: str, *, pid: str, who: str = "Carol", uid: str = "9", days: int = 0
) -> IncomingMessage:
    return IncomingMessage(
        scope=SCOPE,
        text=text,
        author=who,
        author_id=uid,
        platform_id=pid,
        ts=START + timedelta(days=days, minutes=int(pid[1:]) if pid[1:].isdigit() else 0),
    )


async def seed(core: Core) -> None:
    """An old message recall finds for "code word", then enough chatter to push it out of
    the (small) working window."""
    await core.intake.accept(
        said("the launch code word is papaya, agreed with the tangerine squad", pid="m1")
    )
    for i in range(2, 12):
        await core.intake.accept(
            said(f"unrelated chatter number {i} about lunch", pid=f"m{i}", days=1)
        )


def question(pid: str = "q1") -> IncomingMessage:
    return IncomingMessage(
        scope=SCOPE,
        text="what is the launch code word?",
        author="Alice",
        author_id="7",
        platform_id=pid,
        addressed=True,
        ts=START + timedelta(days=2),
    )


@dataclass
class LinkingSink(FakeSink):
    """A sink that writes source lines (as Discord does), and may run something when the
    answer is posted (a forget racing the answer)."""

    on_post: object = None

    async def source_line(self, *, platform_id: str, label: str, in_parent: bool) -> str:
        return f"-# [{label}](https://example.test/{platform_id})"

    async def post(self, *, text: str) -> int | None:
        if callable(self.on_post):
            await self.on_post()
        return await super().post(text=text)


async def answer(core: Core, sink: FakeSink | None = None) -> FakeSink:
    sink = sink or LinkingSink(message_chars=2000)
    conversation = Conversation(core.intake, core.replier)
    turn = await conversation.receive(question())
    assert turn is not None
    assert await conversation.answer(turn, sink, stream_interval_s=None, links=sink)
    return sink


async def why(core: Core, actor: Actor = ALICE) -> str:
    return (await execute(core.admin, scope=SCOPE, command=Command("why"), actor=actor)).text()


async def test_the_answer_records_the_recalled_message_and_facts_it_used(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    await core.admin.remember(SCOPE, "deploys happen on Thursdays", by="Dana")
    await core.admin.remember_me(SCOPE, "I am vegetarian", user_id="7", name="Alice")
    assert "No answer to explain yet (records are kept 24 hours)" in await why(core)
    await answer(core)
    record = await core.admin.why(SCOPE)
    assert record is not None and record.asker == "Alice" and record.kind == "llm"
    [recalled] = [m for m in record.recalled if "papaya" in m.snippet]
    assert (recalled.platform_id, recalled.author, recalled.author_id) == ("m1", "Carol", "9")
    assert record.sections["recall"] > 0 and record.sections["facts"] > 0
    assert {f.text for f in record.facts} == {"deploys happen on Thursdays", "I am vegetarian"}
    # What the prompt had is what the record says: the model saw the same message.
    assert "papaya" in papaya.of("reply")[-1].prompt_text
    text = await why(core)
    assert "[2025-08-11 09:01] Carol: the launch code word is papaya" in text
    assert "I am vegetarian" in text and "pinned" in text and "Dana" in text
    assert f"deploys happen on Thursdays (learned in {SCOPE}, Dana, 2025-08-11)" in text
    key = core.store.keys.scope(SCOPE).why
    ttl = await core.store.client.ttl(key)
    assert 23 * 3600 < ttl <= 24 * 3600


async def test_someone_else_sees_the_record_without_the_askers_own_facts(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    await core.admin.remember_me(SCOPE, "I am vegetarian", user_id="7", name="Alice")
    await answer(core)
    text = await why(core, BOB)
    assert "papaya" in text
    assert "vegetarian" not in text and "facts about Alice, shown only to them: 1" in text


async def test_the_offline_reply_shows_and_records_recalled_messages(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True, memory=SMALL_WINDOW)
    await seed(core)
    sink = await answer(core)
    [shown] = sink.shown
    assert "No LLM is configured" in shown
    assert "\n[2025-08-11 09:01] Carol: the launch code word is papaya" in shown
    assert "lunch" not in shown  # the chatter is not shown
    record = await core.admin.why(SCOPE)
    assert record is not None and record.kind == "offline"
    assert [m.platform_id for m in record.recalled] == ["m1"]


async def test_the_offline_reply_merges_the_window_and_recall_each_message_once(
    make_core: CoreFactory,
) -> None:
    """Relevant messages from long ago (recalled) and in the working window alike, ranked
    together by recall, best first; a message said twice is shown once; the chatter is not.
    What it showed is what /memory why lists."""
    core = await make_core(offline=True, memory=SMALL_WINDOW)
    await seed(core)  # m1, days ago: the launch code word
    for pid in ("m20", "m21"):  # just now, in the window: the same words twice
        await core.intake.accept(said("the new launch code word is mango", pid=pid, days=2))
    prompt = await core.replier.build_prompt(question())
    window = [message["content"] for message in prompt.messages[1:-1]]
    assert any("mango" in line for line in window)  # in the window, not recalled for a model
    assert not any("papaya" in line for line in window)
    [shown] = (await answer(core)).shown
    lines = [line for line in shown.splitlines() if line.startswith("[")]
    assert lines == [
        "[2025-08-13 09:21] Carol: the new launch code word is mango",
        "[2025-08-11 09:01] Carol: the launch code word is papaya, agreed with the tangerine squad",
    ]
    record = await core.admin.why(SCOPE)
    assert record is not None and [m.platform_id for m in record.recalled] == ["m21", "m1"]


@pytest.mark.parametrize("how", ["all", "me", "text", "fact", "delete", "edit", "fact_edit"])
async def test_every_forget_or_edit_takes_the_record_away(
    make_core: CoreFactory, papaya: FakeOpenAI, how: str
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    fact = await core.admin.remember(SCOPE, "deploys happen on Thursdays")
    await answer(core)
    key = core.store.keys.scope(SCOPE).why
    assert await core.store.client.exists(key)
    admin = core.admin
    if how == "all":
        await admin.place.forget_all(SCOPE)
    elif how == "me":
        await admin.person.forget_user(SCOPE, user_id="9", name="Carol")
    elif how == "text":
        await admin.text.forget_text(SCOPE, "lunch")
    elif how == "fact":
        assert await admin.text.forget_fact(SCOPE, fact.id)
    elif how == "delete":
        assert await admin.messages.forget_message(SCOPE, "m1") == 1
    elif how == "fact_edit":  # an admin's new words for a fact the record quotes
        await admin.edit_fact(SCOPE, fact.id, "deploys happen on Fridays")
    else:
        assert await admin.messages.edit_message(SCOPE, "m1", "never mind")
    assert not await core.store.client.exists(key)
    assert "No answer to explain yet" in await why(core)


async def test_a_forget_racing_the_answer_leaves_no_record(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)

    async def forget_the_message() -> None:  # after the prompt was read, before the record
        await core.admin.messages.forget_message(SCOPE, "m1")

    sink = await answer(core, LinkingSink(message_chars=2000, on_post=forget_the_message))
    assert sink.shown == [ANSWER]  # delivered all the same
    assert not await core.store.client.exists(core.store.keys.scope(SCOPE).why)
    assert await core.admin.why(SCOPE) is None


async def test_a_fact_forgotten_after_the_answer_is_not_shown(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    """Facts about a person live in their own scope: forgetting one there does not touch
    this scope's record, so the record shows only the facts that still exist."""
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    mine = await core.admin.remember_me(SCOPE, "I am vegetarian", user_id="7", name="Alice")
    await answer(core)
    assert await core.admin.text.forget_fact("discord:1:user:7", mine.id)
    record = await core.admin.why(SCOPE)
    assert record is not None and record.facts == ()


async def test_source_line_on_links_the_recalled_message_and_is_not_stored(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    await core.admin.configure(SCOPE, sources="on")
    sink = await answer(core)
    assert sink.shown == [f"{ANSWER}\n-# [from 2025-08-11](https://example.test/m1)"]
    entries = await core.repo.reads.all_entries(SCOPE)
    assert entries[-1].role == "assistant" and entries[-1].text == ANSWER
    view = await execute(core.admin, scope=SCOPE, command=Command("show"), actor=ALICE)
    assert "source lines: on" in view.text()
    # A door that gives no links to its messages (the console's ask): the answer alone.
    conversation = Conversation(core.intake, core.replier)
    turn = await conversation.receive(
        replace(question("q3"), ts=START + timedelta(days=2, hours=2))
    )
    assert turn is not None
    plain = LinkingSink(message_chars=2000)
    assert await conversation.answer(turn, plain, stream_interval_s=None)
    assert plain.shown == [ANSWER]


async def test_source_line_off_or_an_unrelated_answer_adds_nothing(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    await seed(core)
    fake_llm.responder = lambda request: ANSWER if request.purpose == "reply" else None
    assert (await answer(core)).shown == [ANSWER]  # off by default
    await core.admin.configure(SCOPE, sources="on")
    fake_llm.responder = lambda r: "I do not know." if r.purpose == "reply" else None
    conversation = Conversation(core.intake, core.replier)
    turn = await conversation.receive(
        replace(question("q2"), ts=START + timedelta(days=2, hours=1))
    )
    assert turn is not None
    sink = LinkingSink(message_chars=2000)
    assert await conversation.answer(turn, sink, stream_interval_s=None, links=sink)
    assert sink.shown == ["I do not know."]


async def test_memory_why_speaks_japanese(make_core: CoreFactory, papaya: FakeOpenAI) -> None:
    core = await make_core(memory=SMALL_WINDOW)
    ask = Command("why")
    empty = await execute(core.admin, scope=SCOPE, command=ask, actor=ALICE, language="ja")
    assert empty.title == "説明できる返信はまだありません（記録は 24 時間保存されます）。"
    await seed(core)
    await answer(core)
    shown = await execute(core.admin, scope=SCOPE, command=ask, actor=ALICE, language="ja")
    assert shown.title.startswith("直前の返信が使ったもの（Alice さんの質問、")
    assert "思い出したメッセージ" in shown.text() and "papaya" in shown.text()


async def test_the_dashboard_scope_page_shows_the_record_until_a_forget(
    make_core: CoreFactory, papaya: FakeOpenAI
) -> None:
    """The admin sees on the scope page what the last answer used, as /memory why shows it
    to anyone but the asker (the asker's own facts counted, not shown), and it goes with a
    forget."""
    core = await make_core(memory=SMALL_WINDOW, dashboard={"token": TOKEN})
    await seed(core)
    await core.admin.remember_me(SCOPE, "I am vegetarian", user_id="7", name="Alice")
    await answer(core)
    async with (
        running_dashboard(core) as server,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
    ):
        await log_in_any(http, server.url)

        async def page() -> str:
            async with http.get(f"{server.url}/scopes/{SCOPE}") as r:
                assert r.status == 200
                return await r.text()

        shown = await page()
        assert "What the last answer used" in shown
        assert "Carol: the launch code word is papaya" in shown
        assert "facts about Alice, shown only to them: 1" in shown
        assert (
            "vegetarian" not in shown.split("What the last answer used")[1].split("</details>")[0]
        )
        await core.admin.text.forget_text(SCOPE, "papaya")
        assert "What the last answer used" not in await page()
