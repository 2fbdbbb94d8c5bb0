"""The scope tree on a real Redis (and a three-node cluster): a server holds channels, a
channel holds threads, a person speaks across the server. Forgets, settings, budgets and
audiences follow it; ``/memory why`` never shows what a forget took; fact ids never come
back."""

from __future__ import annotations

from bots.commands import Actor, execute, parse_command
from memory_core.bootstrap import Core
from memory_core.models import IncomingMessage, Reply
from memory_core.scopes import Audience
from memorybot_testkit.converse import converse
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.reply_sink import FakeSink
from tests.helpers import CoreFactory, all_keys, forgotten

TEAM = "slack:T1"
GENERAL = "slack:T1:C1"
THREAD = "slack:T1:C1:1772442000.000100"
THREAD_2 = "slack:T1:C1:1772442100.000200"
RANDOM = "slack:T1:C2"
RANDOM_THREAD = "slack:T1:C2:1772442200.000300"
DEV = "slack:T1:C3"
DM = "slack:T1:D7"
OTHER_TEAM = "slack:T9:C1"
BOB = Actor(user_id="U2", name="Bob", is_admin=False)
ADA = Actor(user_id="U1", name="Ada", is_admin=True)


def said(
    scope: str,
    text: str,
    by: Actor = BOB,
    *,
    audience: Audience = Audience.SERVER,
    addressed: bool = False,
) -> IncomingMessage:
    return IncomingMessage(
        scope=scope,
        text=text,
        author=by.name,
        author_id=by.user_id,
        audience=audience,
        addressed=addressed,
    )


async def tell(core: Core, scope: str, text: str, by: Actor = BOB, **kw: object) -> None:
    await core.intake.accept(said(scope, text, by, **kw))  # type: ignore[arg-type]


async def ask(core: Core, scope: str, text: str, by: Actor = BOB, **kw: object) -> Reply:
    reply = await converse(core, said(scope, text, by, addressed=True, **kw))  # type: ignore[arg-type]
    assert reply is not None
    return reply


async def command(core: Core, scope: str, text: str, by: Actor = ADA) -> str:
    result = await execute(core.admin, scope=scope, command=parse_command(text), actor=by)
    return result.text()


async def texts(core: Core, scope: str) -> list[str]:
    return [e.text for e in await core.repo.reads.all_entries(scope)]


async def everything_stored(core: Core) -> str:
    """Every value in Redis, as one string (a forgotten text must be in none of it)."""
    client = core.store.client
    out: list[str] = []
    for key in await all_keys(core):
        kind = await client.type(key)
        if kind == "stream":
            out += [str(f) for _, f in await client.xrange(key)]
        elif kind == "hash":
            out += [str(v) for v in (await client.hgetall(key)).values()]
        elif kind == "list":
            out += await client.lrange(key, 0, -1)
        elif kind == "string":
            out.append(str(await client.get(key)))
        elif kind in ("set",):
            out += list(await client.smembers(key))
        elif kind == "zset":
            out += list(await client.zrange(key, 0, -1))
    return "\n".join(out)


async def test_forget_all_in_a_channel_reaches_its_threads(make_core: CoreFactory) -> None:
    core = await make_core(offline=True)
    await tell(core, GENERAL, "the deploy key is GREEN-WOMBAT")
    await tell(core, THREAD, "my home address is 12 Elm Street")
    await tell(core, THREAD_2, "second thread line")
    await tell(core, RANDOM, "the other channel stays")
    assert await core.repo.reads.threads_of(GENERAL) == [THREAD_2, THREAD]

    title = await command(core, GENERAL, "forget all confirm")
    assert "and its threads (2)" in title
    for scope in (GENERAL, THREAD, THREAD_2):
        assert await forgotten(core, scope), scope
    assert "12 Elm Street" not in await everything_stored(core)
    assert await texts(core, RANDOM) == ["the other channel stays"]
    assert await core.repo.reads.threads_of(GENERAL) == []
    # The next thread message puts the thread back under its channel.
    await tell(core, THREAD, "after the forget")
    assert await core.repo.reads.threads_of(GENERAL) == [THREAD]


async def test_forget_me_in_a_channel_reaches_the_threads_where_i_spoke(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await tell(core, GENERAL, "hi all")
    await tell(core, THREAD, "my home address is 12 Elm Street")
    answer = await ask(core, THREAD, "remind me where I live?")
    assert answer.kind == "llm" and answer.stored_id
    await tell(core, THREAD, "Ada was here too", by=ADA)
    await tell(core, RANDOM_THREAD, "Bob in another channel's thread")

    shown = await command(core, GENERAL, "forget me", by=BOB)
    assert "Forgot you (Bob) in 2 places" in shown
    assert await texts(core, GENERAL) == []
    # His lines and the bot's answer to him go; Ada's line in the thread stays.
    assert await texts(core, THREAD) == ["Ada was here too"]
    assert "12 Elm Street" not in await everything_stored(core)
    # forget me in one channel does not reach another channel's threads.
    assert await texts(core, RANDOM_THREAD) == ["Bob in another channel's thread"]


async def test_forget_me_everywhere_reaches_every_place_and_nothing_of_anyone_else(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True)
    bob_places = (GENERAL, RANDOM, DEV, THREAD, RANDOM_THREAD)
    for scope in bob_places:
        await tell(core, scope, f"Bob's secret in {scope}")
        await tell(core, scope, f"Ada's line in {scope}", by=ADA)
    await tell(core, DM, "Bob's secret in his DM", audience=Audience.DM)
    await tell(core, OTHER_TEAM, "Bob in another workspace")
    await core.admin.remember_me(GENERAL, "I am vegetarian", user_id=BOB.user_id, name="Bob")

    shown = await command(core, RANDOM, "forget me everywhere", by=BOB)
    assert "in 6 places" in shown
    for scope in (*bob_places, DM):
        assert f"Ada's line in {scope}" in await texts(core, scope) or scope == DM
        assert not any("Bob's" in t for t in await texts(core, scope)), scope
    assert await core.repo.reads.facts("slack:T1:user:U2") == []
    stored = await everything_stored(core)
    assert "Bob's secret" not in stored and "vegetarian" not in stored
    # Another workspace is another boundary: untouched.
    assert await texts(core, OTHER_TEAM) == ["Bob in another workspace"]
    # The tree no longer says where Bob spoke.
    assert await core.repo.reads.spoken_in([GENERAL, RANDOM, DEV, DM], BOB.user_id) == {}


async def test_forget_me_everywhere_on_discord_reaches_the_dm_and_the_person(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True)
    bob = Actor(user_id="7", name="Bob", is_admin=False)
    await tell(core, "discord:1:2", "Bob's secret in general", by=bob)
    await tell(core, "discord:1:2:3", "Bob's secret in a thread", by=bob)
    await tell(core, "discord:dm:7", "Bob's secret in his DM", by=bob, audience=Audience.DM)
    await tell(core, "discord:dm:8", "someone else's DM", by=Actor("8", "Cy", False))
    await core.admin.remember_me("discord:1:2", "I live in Oslo", user_id="7", name="Bob")
    report = await core.admin.person.forget_user_everywhere("discord:1:2", user_id="7", name="Bob")
    assert set(report.places) == {"discord:1:2", "discord:1:2:3", "discord:dm:7"}
    stored = await everything_stored(core)
    assert "Bob's secret" not in stored and "Oslo" not in stored
    assert await texts(core, "discord:dm:8") == ["someone else's DM"]


async def test_forget_text_and_forget_fact_in_a_channel_reach_its_threads(
    make_core: CoreFactory,
) -> None:
    core = await make_core(offline=True)
    await tell(core, THREAD, "the vault code is 4417-B")
    await tell(core, GENERAL, "nothing to see")
    fact = await core.admin.remember(THREAD, "the vault code is 4417-B", by="Ada")
    channel_fact = await core.admin.remember(GENERAL, "standup at ten", by="Ada")
    assert fact.id != channel_fact.id  # one counter for the channel and its threads
    shown = await command(core, GENERAL, "show facts")
    assert f"`{fact.id}`" in shown and "Facts learned in its threads" in shown
    assert "forgot" in (await command(core, GENERAL, f"forget fact {fact.id}")).lower()
    assert await core.repo.reads.facts(THREAD) == []

    await tell(core, THREAD, "again the vault code is 4417-B")
    assert "2 messages" in await command(core, GENERAL, "forget 4417-B")
    assert "4417-B" not in await everything_stored(core)


async def test_a_thread_takes_its_channels_settings_unless_it_sets_its_own(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await command(core, GENERAL, "config mode all")
    await command(core, GENERAL, "config timezone Asia/Tokyo")
    await command(core, GENERAL, "config language ja")
    # Not addressed, but the channel answers everything: so does its thread.
    reply = await converse(core, said(THREAD, "a thread message"))
    assert reply is not None
    state = await core.repo.reads.state(THREAD)
    assert (state.mode, state.tz, state.lang) == ("all", "Asia/Tokyo", "ja")
    shown = await command(core, THREAD, "show")
    assert "Asia/Tokyo" in shown
    # A thread may set its own (where the platform lets /memory run in it: Discord).
    await command(core, THREAD, "config mode off")
    assert await converse(core, said(THREAD, "quiet here")) is None
    assert await converse(core, said(THREAD_2, "other thread")) is not None

    # Paused in the channel: its threads store nothing either.
    await command(core, GENERAL, "pause")
    await tell(core, THREAD_2, "not remembered while paused")
    assert "not remembered while paused" not in await texts(core, THREAD_2)
    await command(core, GENERAL, "resume")
    await tell(core, THREAD_2, "remembered again")
    assert "remembered again" in await texts(core, THREAD_2)


async def test_a_channels_budget_covers_its_threads(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await command(core, GENERAL, "config daily_tokens 10")
    assert (await ask(core, THREAD, "first question in a thread")).kind == "llm"
    # The channel's limit is reached by its thread's spend: another thread waits too.
    notice = await ask(core, THREAD_2, "a second thread")
    assert notice.kind == "budget" and "this channel's daily token budget" in notice.text
    assert (await ask(core, GENERAL, "in the channel itself")).kind == "budget"
    assert fake_llm.count("reply") == 1
    # Another channel has its own budget.
    assert (await ask(core, RANDOM, "elsewhere")).kind == "llm"


async def test_a_members_channel_budget_holds_in_its_threads(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    await command(core, GENERAL, "config user_daily_tokens 10")
    assert (await ask(core, GENERAL, "hello from the channel")).kind == "llm"
    notice = await ask(core, THREAD, "and now from a thread")
    assert notice.kind == "budget" and "your daily token budget" in notice.text
    # Another member is not stopped by Bob's spend.
    assert (await ask(core, THREAD, "Ada asks", by=ADA)).kind == "llm"


async def test_a_threads_own_budget_holds_beside_its_channels(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    thread = "discord:1:2:3"
    await command(core, thread, "config daily_tokens 10")
    assert (await ask(core, thread, "one")).kind == "llm"
    assert (await ask(core, thread, "two")).kind == "budget"
    # The channel and its other threads are not held by one thread's own limit.
    assert (await ask(core, "discord:1:2:4", "three")).kind == "llm"
    assert (await ask(core, "discord:1:2", "four")).kind == "llm"


async def test_a_shared_channel_is_its_own_audience(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """A Slack Connect channel: what Bob pinned about himself internally does not reach a
    prompt where the other organisation reads, and what he pins there stays there."""
    core = await make_core()
    await core.admin.remember_me(GENERAL, "my salary is 91000", user_id="U2", name="Bob")
    await ask(core, GENERAL, "what do you know about me?")
    assert "91000" in fake_llm.of("reply")[-1].prompt_text
    await ask(core, RANDOM, "and here?", audience=Audience.SHARED)
    assert "91000" not in fake_llm.of("reply")[-1].prompt_text
    # Pinned in the shared channel: kept there, never with the person across the host.
    result = await execute(
        core.admin,
        scope=RANDOM,
        command=parse_command("remember me I speak Finnish"),
        actor=BOB,
    )
    assert "follows you" not in result.text()
    assert all("Finnish" not in f.text for f in await core.repo.reads.facts("slack:T1:user:U2"))
    assert any("Finnish" in f.text for f in await core.repo.reads.facts(RANDOM))
    await ask(core, GENERAL, "anything new about me?")
    assert "Finnish" not in fake_llm.of("reply")[-1].prompt_text


async def test_a_forget_leaves_no_why_record_quoting_it_and_ids_never_come_back(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    core = await make_core()
    pinned = await core.admin.remember_me(
        GENERAL, "I am allergic to kiwi", user_id="U2", name="Bob"
    )
    turn = await core.conversation.receive(said(RANDOM, "what should I not eat?", addressed=True))
    assert turn is not None
    assert await core.conversation.answer(turn, FakeSink(), stream_interval_s=None)
    why = await command(core, RANDOM, "why", by=BOB)
    assert "allergic to kiwi" in why
    # Bob forgets himself in #general: his person facts go. #random's record (24 h) must
    # not show the pinned fact again.
    await command(core, GENERAL, "forget me", by=BOB)
    assert "kiwi" not in await command(core, RANDOM, "why", by=BOB)
    assert "kiwi" not in await everything_stored(core)
    # His next fact gets a new id: the record's old id never names it.
    newer = await core.admin.remember_me(GENERAL, "I like tea", user_id="U2", name="Bob")
    assert newer.id != pinned.id
    assert "I like tea" not in await command(core, RANDOM, "why", by=BOB)
