"""A thread remembers how it began: its prompt holds the channel message that started it,
the bot's answer to that message and the channel's messages just before, read live from
the channel (a forget there reaches the thread at once), and recall searches the channel
as well as the thread."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_core.bootstrap import Core
from memory_core.calendar import from_ms
from memory_core.clock import ManualClock
from memory_core.errors import ContextUnavailable
from memory_core.models import Attachment, IncomingMessage, StarterSource, ThreadStarter
from memory_core.scopes import Scope
from memory_core.service.conversation import Conversation
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.reply_sink import FakeSink
from tests.helpers import START, CoreFactory, scope_values

CHANNEL = "slack:T1:C1"
TS = "1754906400.000100"  # START + 1 h, as Slack writes a ts
THREAD = f"{CHANNEL}:{TS}"


def said(
    scope: str, text: str, *, who: str = "Bob", pid: str = "", **kw: object
) -> IncomingMessage:
    return IncomingMessage(
        scope=scope,
        text=text,
        author=who,
        author_id=who.lower(),
        platform_id=pid,
        **kw,  # type: ignore[arg-type]
    )


async def asked_in_the_channel(core: Core, clock: ManualClock) -> None:
    """Chatter, then Bob's note to the bot (its ts names the thread the answer starts),
    answered through the conversation as a door does."""
    clock.set(START + timedelta(minutes=50))
    await core.intake.accept(said(CHANNEL, "lunch is at noon today", who="Ann", pid="1.1"))
    clock.set(START + timedelta(hours=1))
    turn = await Conversation(core.intake, core.replier).receive(
        said(CHANNEL, "@memorybot note: the lab door code is 4417-B", pid=TS, addressed=True)
    )
    assert turn is not None
    assert await Conversation(core.intake, core.replier).answer(
        turn, FakeSink(), stream_interval_s=None
    )
    clock.set(START + timedelta(hours=1, minutes=5))


async def test_a_follow_up_in_the_thread_sees_the_message_and_answer_that_began_it(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await asked_in_the_channel(core, clock)
    [answer] = [e for e in await core.repo.reads.all_entries(CHANNEL) if e.role == "assistant"]
    assert answer.answers == TS and answer.reply_to == "bob"
    assert answer.platform_id == "sink-0"  # the posted answer's own id: a delete finds it

    prompt = await core.replier.build_prompt(said(THREAD, "what was the door code again?"))
    system = prompt.messages[0]["content"]
    began = system.split("How this thread began", 1)[1].split("##", 1)[0]
    assert "lab door code is 4417-B" in began  # the message that started it
    assert answer.text in began  # and the bot's answer to it
    assert "lunch is at noon" in began  # the channel just before
    assert prompt.sections["thread_start"] > 0
    assert [e.text for e in prompt.used.started][-1] == answer.text


async def test_a_forget_in_the_channel_reaches_the_threads_prompt_at_once(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock)
    await asked_in_the_channel(core, clock)
    assert await core.admin.messages.forget_message(CHANNEL, TS)
    prompt = await core.replier.build_prompt(said(THREAD, "what was the door code again?"))
    # The message is gone from how the thread began (and so is the answer tied to it).
    assert not any("4417-B" in e.text for e in prompt.used.started)
    assert "lunch is at noon" in prompt.messages[0]["content"]


async def test_a_discord_thread_started_from_a_message_and_one_started_from_none(
    make_core: CoreFactory,
) -> None:
    """A Discord thread started from a message has that message's id: its time (a
    snowflake's) says where in the channel it began."""
    core = await make_core(offline=True)
    message_id = "1407000000000000000"
    thread = f"discord:1:2:{message_id}"
    started = from_ms(Scope.of(thread).thread_started_ms or 0)
    earlier = said(
        "discord:1:2", "earlier in the channel", pid="1", ts=started - timedelta(minutes=5)
    )
    await core.intake.accept(earlier)
    await core.intake.accept(
        said("discord:1:2", "the thread's first message", pid=message_id, ts=started)
    )
    await core.intake.accept(
        said("discord:1:2", "said after", pid="9", ts=started + timedelta(minutes=1))
    )
    prompt = await core.replier.build_prompt(said(thread, "so?"))
    assert [e.text for e in prompt.used.started] == [
        "earlier in the channel",
        "the thread's first message",
    ]
    # A thread started from no message (its id is no message's): the channel before it.
    later = str(int(message_id) + (120_000 << 22))  # two minutes later
    prompt = await core.replier.build_prompt(said(f"discord:1:2:{later}", "so?"))
    assert [e.text for e in prompt.used.started] == [
        "earlier in the channel",
        "the thread's first message",
        "said after",
    ]


async def test_recall_in_a_thread_searches_its_channel_too(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, memory={"window_tokens": 60, "window_min_tokens": 0})
    await core.intake.accept(
        said(CHANNEL, "the staging database password rotates every Tuesday", pid="0.1")
    )
    for i in range(12):
        clock.advance(timedelta(minutes=3))
        await core.intake.accept(
            said(CHANNEL, f"unrelated chatter {i} about lunch", pid=f"0.{i + 2}")
        )
    clock.set(START + timedelta(days=2))
    prompt = await core.replier.build_prompt(
        # A thread that began before all of it: its channel's messages come by recall.
        said("slack:T1:C1:1754899200.000100", "when does the staging database password rotate?")
    )
    assert "rotates every Tuesday" in prompt.messages[0]["content"]
    assert CHANNEL in prompt.used.recalled_from


# -- a first message memory never heard (a Slack parent from before the bot) -----------------
class Platform:
    """A door's StarterSource: what the platform shows of the thread's first message, and
    how often it was asked."""

    def __init__(self, text: str, *, author_id: str = "ann", fails: int = 0) -> None:
        self.text = text
        self.author_id = author_id
        self.fails = fails
        self.asked = 0

    async def fetch(self) -> ThreadStarter | None:
        self.asked += 1
        if self.fails:
            self.fails -= 1
            raise ContextUnavailable("Slack did not answer")
        return ThreadStarter(
            platform_id=TS,
            ts=from_ms(Scope.of(THREAD).thread_started_ms or 0),
            text=self.text,
            author="Ann",
            author_id=self.author_id,
            attachments=(Attachment(name="plan.pdf", kind="PDF"),),
        )


def asked_in_thread(platform: Platform) -> IncomingMessage:
    return said(THREAD, "what was it?", thread_starter=StarterSource(fetch=platform.fetch))


async def test_a_first_message_memory_lacks_is_read_once_and_never_stored(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True, clock=ManualClock(START + timedelta(hours=2)))
    platform = Platform("the vault code is 7781", fails=1)
    # The platform did not answer: no start this time, and asked again next time.
    prompt = await core.replier.build_prompt(asked_in_thread(platform))
    assert prompt.used.started == ()
    for _ in range(2):
        prompt = await core.replier.build_prompt(asked_in_thread(platform))
        [start] = prompt.used.started
        assert start.text == "the vault code is 7781\n[file: plan.pdf, PDF]"
        assert (start.author, start.id) == ("Ann", "")
    assert platform.asked == 2
    assert await core.repo.reads.all_entries(CHANNEL) == []  # context, not memory
    # Edited on the platform: read again.
    await core.admin.messages.edit_message(CHANNEL, TS, "the vault code is 9900")
    prompt = await core.replier.build_prompt(asked_in_thread(platform))
    assert platform.asked == 3


@pytest.mark.parametrize("how", ["text", "person", "message", "all"])
async def test_a_forgotten_first_message_is_not_shown_nor_kept(
    make_core: CoreFactory, how: str
) -> None:
    core = await make_core(offline=True, clock=ManualClock(START + timedelta(hours=2)))
    platform = Platform("the vault code is 7781")
    prompt = await core.replier.build_prompt(asked_in_thread(platform))
    [start] = prompt.used.started
    assert start.text == "the vault code is 7781\n[file: plan.pdf, PDF]"
    assert "7781" in " ".join(await scope_values(core, CHANNEL))  # kept beside the thread
    if how == "text":
        await core.admin.text.forget_text(CHANNEL, "7781")
    elif how == "person":
        await core.admin.person.forget_user(CHANNEL, user_id="ann")
    elif how == "message":
        await core.admin.messages.forget_message(CHANNEL, TS)
    else:
        await core.admin.place.forget_all(CHANNEL)
    assert "7781" not in " ".join(await scope_values(core, CHANNEL))
    prompt = await core.replier.build_prompt(asked_in_thread(platform))
    assert prompt.used.started == ()
    assert platform.asked == 2  # read again, found forgotten: kept as none, never its text
    assert "7781" not in " ".join(await scope_values(core, CHANNEL))
