"""Learning a place's past, on the core: read (resumable, nothing learned yet, the cost
estimated), then stored oldest first before the place's own memory, once; what was
forgotten is never learned again. (The platforms' sources: tests/e2e, against the fakes.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

from bots.commands import parse_command
from bots.learn_command import ChannelLearns
from config.prompts import load_prompts
from memory_core.clock import ManualClock
from memory_core.models import IncomingMessage
from memory_core.service.past import LearnRefused
from tests.helpers import START, CoreFactory, ListSource, manual_maintenance, past_chat

CHANNEL = "discord:1:2"
THREAD = "discord:1:2:30"
NOW = START + timedelta(days=20)


async def _ids_in_order(core, scope: str) -> list[str]:  # type: ignore[no-untyped-def]
    entries = await core.repo.reads.all_entries(scope)
    return [e.id for e in entries]


async def test_a_new_place_learns_its_past_with_threads_once(make_core: CoreFactory) -> None:
    clock = ManualClock(NOW)
    core = await make_core(clock=clock, offline=True)
    past = past_chat(CHANNEL, START, days=10, per_day=20)
    past += past_chat(THREAD, START + timedelta(days=3), days=2, per_day=5, prefix="t")
    source = ListSource(CHANNEL, past, page=40)

    read = await core.learner.read(source, days=30)
    assert (read.status, read.new, read.known, read.read) == ("read", 210, 0, 210)
    assert read.span_days == 10 and read.estimate_tokens > sum(len(m.text) // 8 for m in past)
    assert await core.repo.reads.all_entries(CHANNEL) == []  # nothing learned before it is stored

    done = await core.learner.store_read(CHANNEL)
    assert (done.status, done.stored) == ("done", 210)
    entries = await core.repo.reads.all_entries(CHANNEL)
    assert [e.text for e in entries] == [m.text for m in sorted(past[:200], key=lambda m: m.ts)]
    assert [e.ts for e in entries] == sorted(e.ts for e in entries)
    assert len(await core.repo.reads.all_entries(THREAD)) == 10
    assert THREAD in await core.repo.reads.threads_of(CHANNEL)
    # Every past day has its record, in order (the days tier keeps its newest); the weeks
    # before this one are consolidated.
    records = [d.day for d in await core.repo.reads.episodes(CHANNEL)]
    assert records == [f"2025-08-{11 + n}" for n in range(10)]
    days_max = core.settings.memory.days_max
    assert [d.day for d in await core.repo.reads.days(CHANNEL)] == records[-days_max:]
    assert [w.week for w in await core.repo.reads.weeks(CHANNEL)] == ["2025-08-11", "2025-08-18"]
    state = await core.repo.reads.state(CHANNEL)
    assert state.long and state.mid and state.day == "2025-08-31"  # (refreshed with the past)

    # Read again: everything is known, nothing is stored twice.
    again = await core.learner.read(ListSource(CHANNEL, past), days=30)
    assert (again.new, again.known) == (0, 210)
    await core.learner.store_read(CHANNEL)
    assert len(await core.repo.reads.all_entries(CHANNEL)) == 200


async def test_a_longer_learn_later_stores_every_earlier_message(make_core: CoreFactory) -> None:
    """A learn reads whole days: begun mid-morning, its first day's early messages are read
    too, so a later learn reaching further back finds that day complete and stores all
    that is older, none of it refused as said on a day already closed."""
    clock = ManualClock(NOW + timedelta(hours=2))  # 11:00: 09:00-11:00 is the day's morning
    core = await make_core(clock=clock, offline=True)
    past = past_chat(CHANNEL, START, days=20, per_day=6)
    first = await core.learner.read(ListSource(CHANNEL, past), days=15)
    fifteen_days_back = [m for m in past if m.ts.date() >= (NOW - timedelta(days=15)).date()]
    assert first.new == len(fifteen_days_back) and fifteen_days_back[0].ts.hour == 9
    await core.learner.store_read(CHANNEL)

    second = await core.learner.read(ListSource(CHANNEL, past), days=30)
    assert (second.new, second.known) == (len(past) - first.new, first.new)
    done = await core.learner.store_read(CHANNEL)
    assert (done.stored, done.not_stored) == (len(past) - first.new, 0)
    entries = await core.repo.reads.all_entries(CHANNEL)
    assert [e.text for e in entries] == [m.text for m in past]


async def test_the_past_goes_before_a_place_s_own_memory(make_core: CoreFactory) -> None:
    """A place that has remembered for days: its past is put before its first message, its
    own days untouched; what was said on its own days and missed is stored in its day."""
    clock = ManualClock(START + timedelta(days=10))
    core = await make_core(clock=clock, offline=True)
    manual_maintenance(core)
    for n in range(6):  # live on 2025-08-21 and 22
        clock.set(START + timedelta(days=10 + n // 3, hours=n))
        await core.intake.accept(
            IncomingMessage(scope=CHANNEL, text=f"live {n}", author="Al", platform_id=f"live{n}")
        )
    clock.set(START + timedelta(days=12, hours=1))
    await core.maintenance.maintain(CHANNEL)
    own_days = [d.day for d in await core.repo.reads.days(CHANNEL)]
    assert own_days == ["2025-08-21", "2025-08-22"]

    past = past_chat(CHANNEL, START, days=12, per_day=4)  # up to 2025-08-22, overlapping
    read = await core.learner.read(ListSource(CHANNEL, past), days=30)
    done = await core.learner.store_read(CHANNEL)
    assert read.new == 48
    assert done.stored == 40 and done.not_stored == 8  # the 8 of its own, closed days
    texts = [e.text for e in await core.repo.reads.all_entries(CHANNEL)]
    assert texts[:40] == [m.text for m in past[:40]]
    assert texts[40:] == [f"live {n}" for n in range(6)]
    records = [d.day for d in await core.repo.reads.episodes(CHANNEL)]
    assert records == [f"2025-08-{11 + n}" for n in range(10)] + own_days
    # The day being remembered now goes on after the past: its summary starts after it.
    clock.set(START + timedelta(days=13, hours=1))
    await core.intake.accept(IncomingMessage(scope=CHANNEL, text="today", author="Al"))
    assert (await core.repo.reads.all_entries(CHANNEL))[-1].text == "today"


async def test_a_learn_cut_short_resumes_where_it_stopped(make_core: CoreFactory) -> None:
    core = await make_core(clock=ManualClock(NOW), offline=True)
    past = past_chat(CHANNEL, START, days=5, per_day=30)
    with pytest.raises(ConnectionError):
        await core.learner.read(ListSource(CHANNEL, past, page=25, stop_after=3), days=30)
    halfway = await core.learner.status(CHANNEL)
    assert (halfway.status, halfway.new) == ("reading", 75)
    resumed = ListSource(CHANNEL, past, page=25)
    read = await core.learner.read(resumed, days=30)
    assert read.new == 150 and resumed.pages_given == 3  # the rest, not the first pages again
    await core.learner.store_read(CHANNEL)
    assert len(await core.repo.reads.all_entries(CHANNEL)) == 150


async def test_what_was_forgotten_is_never_learned_again(make_core: CoreFactory) -> None:
    clock = ManualClock(NOW)
    core = await make_core(clock=clock, offline=True)
    past = past_chat(CHANNEL, START, days=3, per_day=10)
    await core.learner.read(ListSource(CHANNEL, past[:10]), days=30)
    await core.learner.store_read(CHANNEL)
    secret = past[3]
    await core.admin.text.forget_text(CHANNEL, secret.text)  # one message, by its text
    person = past[15].author_id  # someone who spoke on the second day
    await core.admin.person.forget_user(CHANNEL, user_id=person)

    read = await core.learner.read(ListSource(CHANNEL, past), days=30)
    await core.learner.store_read(CHANNEL)
    texts = {e.text for e in await core.repo.reads.all_entries(CHANNEL)}
    assert secret.text not in texts
    assert not any(m.text in texts for m in past if m.author_id == person)
    # (The ten stored before are known by their ids, forgotten ones too: not read again.)
    theirs_later = [m for m in past[10:] if m.author_id == person]
    assert theirs_later and (read.known, read.forgotten) == (10, len(theirs_later))

    await core.admin.place.forget_all(CHANNEL)
    after_all = await core.learner.read(ListSource(CHANNEL, past), days=30)
    assert (after_all.new, after_all.forgotten) == (0, 30)


async def test_a_forget_drops_what_was_read_and_a_learn_can_be_cancelled(
    make_core: CoreFactory,
) -> None:
    core = await make_core(clock=ManualClock(NOW), offline=True)
    past = past_chat(CHANNEL, START, days=2, per_day=10)
    await core.learner.read(ListSource(CHANNEL, past), days=30)
    assert await core.repo.learning.staged_count(CHANNEL) == 20
    await core.admin.text.forget_text(CHANNEL, "nothing like this was said")
    assert await core.repo.learning.staged_count(CHANNEL) == 0  # no text outlives a forget
    with pytest.raises(LearnRefused, match="learn reads the past first"):
        await core.learner.store_read(CHANNEL)

    await core.learner.read(ListSource(CHANNEL, past), days=30)
    assert await core.learner.cancel(CHANNEL)
    assert (await core.learner.status(CHANNEL)).status == "cancelled"
    assert await core.repo.learning.staged_count(CHANNEL) == 0
    assert not await core.learner.cancel(CHANNEL)


async def test_the_learn_command_reads_says_what_it_found_and_learns_on_confirm(
    make_core: CoreFactory,
) -> None:
    """/memory learn as every door runs it (bots.learn_command), told in English."""
    core = await make_core(clock=ManualClock(NOW), offline=True)
    learns = ChannelLearns(core.learner, core.settings.learn)
    said: list[str] = []

    async def tell(text: str) -> None:
        said.append(text)

    past = past_chat(CHANNEL, START, days=4, per_day=5)
    p = load_prompts("en")

    async def source() -> ListSource:
        return ListSource(CHANNEL, past)

    async def run(words: str) -> str:
        answer = await learns.handle(
            parse_command(words),
            place=CHANNEL,
            source=source,
            tell=tell,
            p=p,
        )
        if job := learns.running.get(CHANNEL):
            await job
        return answer

    assert "at most 365 days" in await run("learn 400")
    assert (await run("learn 30")).startswith("Reading the last 30 days of discord:1:2")
    assert said[-1].startswith("Found 20 new messages in discord:1:2 over 4 days")
    assert "/memory learn confirm" in said[-1]
    assert await core.repo.reads.all_entries(CHANNEL) == []
    assert (await run("learn confirm")).startswith("Learning 20 messages")
    assert said[-1].startswith("Learned 20 messages of discord:1:2: 4 day records")
    assert len(await core.repo.reads.all_entries(CHANNEL)) == 20
    assert "done" in await run("learn status")
    await run("learn 30")
    assert said[-1].startswith("Nothing new to learn in discord:1:2: 20 messages already")
    assert "No learn here yet" not in await run("learn cancel")


async def test_storing_cut_short_after_the_past_was_put_in_place_finishes_once(
    make_core: CoreFactory,
) -> None:
    """The process dies between putting the past before the log and summarising its days:
    run again, nothing is put twice and every day gets its record."""
    core = await make_core(clock=ManualClock(NOW), offline=True)
    past = past_chat(CHANNEL, START, days=3, per_day=10)
    await core.learner.read(ListSource(CHANNEL, past), days=30)
    summarise = core.learner.past_days.summarise

    async def dies(*args: object, **kwargs: object) -> object:
        raise ConnectionError("the process died here")

    core.learner.past_days.summarise = dies  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await core.learner.store_read(CHANNEL)
    assert len(await core.repo.reads.all_entries(CHANNEL)) == 30
    assert await core.repo.reads.episodes(CHANNEL) == []
    assert (await core.learner.status(CHANNEL)).status == "storing"

    core.learner.past_days.summarise = summarise  # type: ignore[method-assign]
    done = await core.learner.store_read(CHANNEL)
    assert done.status == "done"
    assert [e.text for e in await core.repo.reads.all_entries(CHANNEL)] == [m.text for m in past]
    assert [d.day for d in await core.repo.reads.episodes(CHANNEL)] == [
        "2025-08-11",
        "2025-08-12",
        "2025-08-13",
    ]


async def test_a_person_forgotten_everywhere_is_not_learned_in_a_channel_they_never_spoke_in(
    make_core: CoreFactory,
) -> None:
    """ "Forget me everywhere" in one channel of a server: learning another channel of the
    server (where memory never heard them) leaves out what they said before it."""
    core = await make_core(clock=ManualClock(NOW), offline=True)
    elsewhere = "discord:1:9"
    await core.intake.accept(
        IncomingMessage(scope=elsewhere, text="hi all", author="Carol", author_id="UCarol")
    )
    await core.admin.person.forget_user_everywhere(elsewhere, user_id="UCarol")
    past = past_chat(CHANNEL, START, days=2, per_day=15)
    carols = [m for m in past if m.author_id == "UCarol"]
    read = await core.learner.read(ListSource(CHANNEL, past), days=30)
    await core.learner.store_read(CHANNEL)
    assert carols and read.forgotten == len(carols)
    kept = {e.author_id for e in await core.repo.reads.all_entries(CHANNEL)}
    assert "UCarol" not in kept and kept
