"""Recall on a real Redis: the right past messages reach the prompt, nothing irrelevant
does, and forgotten or expired text is never recalled."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_core.bootstrap import Core
from memory_core.clock import ManualClock
from memory_core.models import DaySummary, IncomingMessage
from memory_core.recall.documents import ScopeIndex
from memory_core.recall.index import RecallIndex
from memory_core.service.forget_request import ForgetRequest
from tests.fakes.openai_server import FakeOpenAI, embed_text
from tests.helpers import START, CoreFactory, conversation, feed

OLD = [
    (
        "Maria",
        "I found a lovely cafe called Blue Heron near the river, the cardamom buns are great",
    ),
    ("Tom", "Nice, we should go there after the Friday standup"),
    ("Maria", "Yes!"),
]


def recalled(system: str) -> str:
    """The recall section of a system prompt (summaries elsewhere may quote messages too)."""
    return system.split("## Recalled from earlier", 1)[1] if "## Recalled" in system else ""


async def _history(make_core: CoreFactory, **kw: object):  # type: ignore[no-untyped-def]
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, **kw)
    for i, (who, text) in enumerate(OLD):
        clock.set(START + timedelta(minutes=i))
        await core.intake.accept(IncomingMessage(scope="team", text=text, author=who))
    # Weeks of unrelated chatter push the cafe far out of the window.
    await feed(
        core, clock, "console:team", conversation(START + timedelta(days=1), days=20, per_day=30)
    )
    clock.set(START + timedelta(days=22))
    return core, clock


async def test_a_question_recalls_the_old_message_with_its_date(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.replier.build_prompt(
        IncomingMessage(
            scope="team", text="What was the name of the cafe Maria mentioned?", author="Tom"
        )
    )
    system = prompt.messages[0]["content"]
    assert "Blue Heron" in system
    assert "[2025-08-11]\nMaria: I found a lovely cafe" in system
    assert prompt.sections.get("recall", 0) > 0
    assert prompt.tokens <= core.settings.memory.budget_tokens


async def test_a_short_answer_comes_with_the_question_it_answers(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="team", text="Did we go after the Friday standup?", author="Tom")
    )
    system = prompt.messages[0]["content"]
    assert "after the Friday standup" in system
    assert "Maria: Yes!" in system  # the short reply right after it, for context


async def test_nothing_irrelevant_is_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="team", text="Any thoughts on quantum chromodynamics?", author="Tom")
    )
    assert "recall" not in prompt.sections


async def test_forgotten_text_is_never_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    question = IncomingMessage(scope="team", text="Which cafe near the river?", author="Tom")
    assert "Blue Heron" in json.dumps((await core.replier.build_prompt(question)).messages)
    await core.admin.text.forget_text("team", "Blue Heron")
    assert "Blue Heron" not in json.dumps((await core.replier.build_prompt(question)).messages)


async def test_other_scopes_are_not_recalled(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="other", text="What was the name of the cafe?", author="Tom")
    )
    assert "Blue Heron" not in json.dumps(prompt.messages)


async def test_a_question_about_a_day_recalls_that_day(make_core: CoreFactory) -> None:
    core, _ = await _history(make_core)
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="team", text="What did Maria talk about on August 11?", author="T")
    )
    assert "Blue Heron" in prompt.messages[0]["content"]


async def test_japanese_recall(make_core: CoreFactory) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    await core.intake.accept(
        IncomingMessage(
            scope="jp", text="来月の社員旅行は箱根の温泉旅館に決まりました", author="さくら"
        )
    )
    await feed(
        core, clock, "console:jp", conversation(START + timedelta(days=1), days=10, per_day=30)
    )
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="jp", text="社員旅行はどこに行くんだっけ？", author="たろう")
    )
    assert "箱根の温泉旅館" in prompt.messages[0]["content"]


async def test_days_past_retention_are_recalled_from_their_day_record(
    make_core: CoreFactory,
) -> None:
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"retention_days": 2})
    for i, (who, text) in enumerate(OLD):
        clock.set(START + timedelta(minutes=i))
        await core.intake.accept(IncomingMessage(scope="team", text=text, author=who))
    for day in range(1, 6):  # the fleet rolls over every night; raw messages expire
        clock.set(START + timedelta(days=day, hours=1))
        await core.intake.accept(IncomingMessage(scope="team", text=f"day {day} chat", author="X"))
        await core.scheduler.sweep()
    assert all(
        "Blue Heron" not in e.text for e in await core.repo.reads.all_entries("console:team")
    )
    episodes = await core.repo.reads.episodes("console:team")
    assert episodes[0].day == "2025-08-11" and "Blue Heron" in episodes[0].summary
    prompt = await core.replier.build_prompt(
        IncomingMessage(scope="team", text="Which cafe did Maria find near the river?", author="T")
    )
    assert "(summary of the day)" in prompt.messages[0]["content"]
    assert "Blue Heron" in prompt.messages[0]["content"]


async def test_embeddings_find_by_meaning_and_are_stored_for_the_fleet(
    make_core: CoreFactory, fake_llm: FakeOpenAI
) -> None:
    """With an embedding model, a message that shares no word with the question is still
    recalled (the fake model gives "feline" and "cat" one meaning); vectors live in Redis so
    another process reuses them; forget removes them."""
    clock = ManualClock(START)
    settings = {"llm": {"embedding_model": "fake-embed"}}
    core = await make_core(clock=clock, **settings)
    await core.intake.accept(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )
    await feed(
        core, clock, "console:pets", conversation(START + timedelta(days=1), days=8, per_day=30)
    )
    question = IncomingMessage(scope="pets", text="Any feline news?", author="Q")
    # The first search finds no vector yet: it embeds only the question and leaves the
    # messages to a background task, so the reply never waits for them.
    await core.replier.build_prompt(question)
    assert core.recall is not None
    await core.recall.drain()
    prompt = await core.replier.build_prompt(question)
    assert "Mel: We adopted a cat named Bailey" in recalled(prompt.messages[0]["content"])
    assert fake_llm.count("embed") >= 3  # the question, the messages, the question
    k = core.store.keys.scope("console:pets")
    assert await core.store.client.hlen(k.vectors) == await core.repo.reads.log_length(
        "console:pets"
    )
    # A second process reuses the stored vectors: only the question is embedded.
    other = await make_core(clock=clock, **settings)
    before = fake_llm.count("embed")
    again = await other.replier.build_prompt(question)
    assert "Mel: We adopted a cat named Bailey" in recalled(again.messages[0]["content"])
    assert fake_llm.count("embed") == before + 1
    await core.admin.text.forget_text("pets", "Bailey")
    assert not [
        v
        for v in await core.store.client.hkeys(k.vectors)
        if v not in {e.id for e in await core.repo.reads.all_entries("console:pets")}
    ]
    # With the embedding model down, recall falls back to words and replies still work.
    fake_llm.down = True
    assert (await core.replier.build_prompt(question)).tokens > 0


class FakeEmbedder:
    """Deterministic vectors without a model (the fake server's meaning: "feline" is "cat"),
    counting what it is asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [embed_text(t, dims=1024) for t in texts]


def _recall_of(core: Core, embedder: FakeEmbedder | None = None) -> RecallIndex:
    """A RecallIndex of its own on the core's Redis: a process of the fleet, or a restart."""
    return RecallIndex(core.store.client, core.store.keys, embedder=embedder)


def _indexed(recall: RecallIndex, scope: str) -> list[Any]:
    """The documents the index holds for ``scope`` (read after a sync)."""
    return list(recall._indexes[scope].docs)


def _record_days(recall: RecallIndex, scope: str) -> list[str]:
    """The days of the day records in the index (a record sits at its day's midday UTC)."""
    return [
        datetime.fromtimestamp(d.ms / 1000, tz=UTC).date().isoformat()
        for d in _indexed(recall, scope)
        if d.kind == "day"
    ]


async def _vector_ids(core: Core, scope: str) -> set[str]:
    client: Any = core.store.client  # decodes replies: names are str
    return set(await client.hkeys(core.store.keys.scope(scope).vectors))


async def _log_ids(core: Core, scope: str) -> set[str]:
    return {e.id for e in await core.repo.reads.all_entries(scope)}


async def test_concurrent_searches_in_one_scope_index_each_message_once(
    make_core: CoreFactory,
) -> None:
    """Replies in one scope search at once; each must not append what the other appends."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:race"
    recall = _recall_of(core)
    await feed(core, clock, scope, conversation(START, days=1, per_day=5))
    # A cold index, built by many searches at once.
    await asyncio.gather(*(recall.search(scope, "coffee budget") for _ in range(20)))
    assert await recall.warm(scope) == 5
    # A warm index, brought up to date by many searches at once (each reads where the
    # index ends, then waits on Redis: all of them read the same place).
    await feed(core, clock, scope, conversation(START, days=1, per_day=3, seed=2))
    await asyncio.gather(*(recall.search(scope, "coffee budget") for _ in range(20)))
    ids = [d.id for d in _indexed(recall, scope)]
    assert len(ids) == len(set(ids)) == 8
    assert set(ids) == await _log_ids(core, scope)


async def test_a_full_list_of_day_records_still_brings_new_ones(make_core: CoreFactory) -> None:
    """The day records list keeps weeks_max * 7 records, trimmed from the oldest; once it is
    full, each new day still reaches recall, and a record that left the list leaves recall."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"weeks_max": 1})  # 7 records
    scope = "console:diary"
    recall = _recall_of(core)
    for day in range(10):
        clock.set(START + timedelta(days=day))
        await core.intake.accept(
            IncomingMessage(scope="diary", text=f"Day {day}: we planned the garden.", author="A")
        )
        clock.set(START + timedelta(days=day + 1, minutes=-30))
        await core.scheduler.sweep(force=True)
        await recall.warm(scope)  # the index follows the list day by day
    listed = [d.day for d in await core.repo.reads.episodes(scope)]
    assert len(listed) == 7 and listed[-1] == "2025-08-20"
    assert _record_days(recall, scope) == listed
    # A restart sees the same.
    fresh = _recall_of(core)
    await fresh.warm(scope)
    assert _record_days(fresh, scope) == listed


def _texts(hits: list[Any]) -> str:
    return " | ".join(d.text for h in hits for d in h.docs)


async def test_a_day_record_trimmed_off_the_list_is_no_longer_recalled(
    make_core: CoreFactory,
) -> None:
    """Only day records are left of a scope (its messages expired); the list is full, so a
    new record pushes the oldest out, as close_day does: the new one is recalled, the old
    one not."""
    core = await make_core(offline=True)
    scope = "console:old"
    client: Any = core.store.client
    key = core.store.keys.scope(scope).episodes

    def record(day: str, text: str) -> str:
        return DaySummary(day=day, summary=text, topic=text).to_json()

    await client.rpush(
        key,
        record("2025-01-01", "We chose the Blue Heron cafe for offsites."),
        record("2025-01-02", "Budget review done."),
    )
    recall = _recall_of(core)
    question = "Which cafe for offsites?"
    assert "Blue Heron" in _texts(await recall.search(scope, question))
    await client.rpush(key, record("2025-01-03", "Offsites move to the Red Fox cafe."))
    await client.ltrim(key, -2, -1)
    recalled_now = _texts(await recall.search(scope, question))
    assert "Red Fox" in recalled_now and "Blue Heron" not in recalled_now


async def test_all_stored_vectors_are_used_after_a_restart(make_core: CoreFactory) -> None:
    """More than one search's worth (512) of messages have vectors in Redis: a new process
    loads them all, the oldest too, and embeds only the question."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:pets"
    first = _recall_of(core, FakeEmbedder())
    await core.intake.accept(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )
    # Two halves, each searched: every message gets its vector, stored for the fleet.
    await feed(core, clock, scope, conversation(START + timedelta(hours=1), days=1, per_day=350))
    await first.search(scope, "Any feline?")
    await first.drain()
    await feed(core, clock, scope, conversation(START + timedelta(days=1), days=1, per_day=350))
    await first.search(scope, "Any feline?")
    await first.drain()
    assert await _vector_ids(core, scope) == await _log_ids(core, scope)
    embedder = FakeEmbedder()
    restarted = _recall_of(core, embedder)
    hits = await restarted.search(scope, "Any feline?")
    assert any("adopted a cat named Bailey" in d.text for h in hits for d in h.docs)
    assert embedder.texts == ["Any feline?"]  # every message's vector came from Redis


async def test_retention_trims_vectors_with_their_messages(make_core: CoreFactory) -> None:
    """Retention drops raw messages at rollover (close_day) and in a scope that closes no
    more days (the trim step); their vectors go with them, in the same atomic step."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, memory={"retention_days": 2})
    scope = "console:keep"
    recall = _recall_of(core, FakeEmbedder())
    for day in range(4):
        await feed(core, clock, scope, conversation(START + timedelta(days=day), days=1, per_day=4))
        await recall.search(scope, "any news about the garden?")
        await recall.drain()
        assert await _vector_ids(core, scope) == await _log_ids(core, scope)
        clock.set(START + timedelta(days=day + 1, hours=-8))
        before = await _log_ids(core, scope)
        await core.scheduler.sweep(force=True)  # closes the day; trims past retention
        kept = await _log_ids(core, scope)
        # Every vector left is a kept message's; when some were trimmed, the first kept one
        # loses its vector too (it was embedded with the one before it as context).
        first_kept = min(kept, key=lambda i: int(i.split("-")[0]))
        expected = kept - {first_kept} if kept != before else kept
        assert await _vector_ids(core, scope) == expected
    left = sorted(await _log_ids(core, scope), key=lambda i: int(i.split("-")[0]))
    assert 0 < len(left) < 16  # retention did trim, at rollover
    # The trim maintenance runs on its own when a scope closes no more days (_step).
    newest_ms = int(left[-1].split("-")[0])
    assert await core.repo.writes.trim_log_before(scope, str(newest_ms)) == len(left) - 1
    assert await _log_ids(core, scope) == {left[-1]}
    assert not await _vector_ids(core, scope)  # its context was trimmed: made again
    await recall.search(scope, "any news about the garden?")
    await recall.drain()
    assert await _vector_ids(core, scope) == {left[-1]}


async def test_a_search_while_a_forget_is_pending_does_not_keep_the_forgotten(
    make_core: CoreFactory,
) -> None:
    """A forget written down but not yet carried out (its process crashed): a search then
    indexes the message still there; once maintenance finishes the forget, it is gone from
    recall too, though the epoch did not move again."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:team"
    recall = _recall_of(core)
    await feed(core, clock, scope, conversation(START, days=1, per_day=10))
    clock.set(START + timedelta(hours=13))
    await core.intake.accept(
        IncomingMessage(scope="team", text="The cafe near the river is Blue Heron", author="M")
    )
    question = "Which cafe near the river?"
    await core.repo.writes.begin_forget(
        scope, ForgetRequest(kind="text", text="Blue Heron").to_json()
    )
    assert any("Blue Heron" in d.text for h in await recall.search(scope, question) for d in h.docs)
    assert await core.admin.requests.resume(scope) == 1
    hits = await recall.search(scope, question)
    assert not any("Blue Heron" in d.text for h in hits for d in h.docs)


async def test_a_vector_made_while_its_message_is_forgotten_is_not_stored(
    make_core: CoreFactory,
) -> None:
    """A message is embedded while a forget deletes it: the vector must not outlive it."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:pets"
    await feed(core, clock, scope, conversation(START, days=1, per_day=5))
    await core.intake.accept(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )

    class ForgetsMeanwhile(FakeEmbedder):
        async def __call__(self, texts: list[str]) -> list[list[float]]:
            if any("Bailey" in t for t in texts):
                await core.admin.text.forget_text("pets", "Bailey")
            return await super().__call__(texts)

    await _recall_of(core, ForgetsMeanwhile()).embed_backlog(scope)
    assert await _vector_ids(core, scope) == await _log_ids(core, scope)
    assert len(await _log_ids(core, scope)) == 5


async def test_messages_are_embedded_once_in_the_background_never_on_the_reply_path(
    make_core: CoreFactory,
) -> None:
    """A search embeds only its question; the messages get their vectors in a background
    task, stored in Redis once: later searches, and a new process, embed only questions."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:pets"
    await feed(core, clock, scope, conversation(START, days=1, per_day=40))
    clock.advance(timedelta(hours=2))  # a new exchange: embedded on its own
    await core.intake.accept(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )
    embedder = FakeEmbedder()
    recall = _recall_of(core, embedder)
    await recall.search(scope, "Any feline?")
    assert embedder.texts == ["Any feline?"]  # the reply waited for its question only
    await recall.drain()
    # Each message once, as "who: what" after the turn it answers (its context).
    said = [text.rsplit("\n", 1)[-1].split(": ", 1)[1] for text in embedder.texts[1:]]
    assert sorted(said) == sorted(e.text for e in await core.repo.reads.all_entries(scope))
    assert await _vector_ids(core, scope) == await _log_ids(core, scope)
    embedder.texts.clear()
    hits = await recall.search(scope, "Any feline?")
    await recall.drain()
    assert any("adopted a cat named Bailey" in d.text for h in hits for d in h.docs)
    assert embedder.texts == ["Any feline?"]
    restarted = FakeEmbedder()
    await _recall_of(core, restarted).search(scope, "Any feline?")
    assert restarted.texts == ["Any feline?"]


async def test_a_live_message_is_embedded_in_the_background_after_it_is_stored(
    make_core: CoreFactory,
) -> None:
    """With background work on (a running bot), storing a message starts its embedding:
    by the next reply its vector is in Redis, made once."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True, background=True)
    assert core.recall is not None
    embedder = FakeEmbedder()
    core.recall.embedder = embedder
    scope = "console:pets"
    await core.intake.accept(
        IncomingMessage(scope="pets", text="We adopted a cat named Bailey", author="Mel")
    )
    await core.drain()
    assert embedder.texts == ["Mel: We adopted a cat named Bailey"]
    assert await _vector_ids(core, scope) == await _log_ids(core, scope)


async def test_the_local_model_is_the_default_embedder_offline(make_core: CoreFactory) -> None:
    """No embedding model configured and no key: recall still searches by meaning, with the
    offline multilingual model; "off" keeps it to words."""
    from memory_core.recall.embedding import LocalEmbedder

    core = await make_core(offline=True, memory={"recall_embedder": "local"})
    assert core.recall is not None
    assert isinstance(core.recall.embedder, LocalEmbedder)
    lexical = await make_core(offline=True)
    assert lexical.recall is not None and lexical.recall.embedder is None


async def test_a_forget_also_drops_the_vector_that_used_its_message_as_context(
    make_core: CoreFactory,
) -> None:
    """A message is embedded with the turn before it; forgetting that turn removes the next
    message's vector too (it said something of the forgotten one), and the background makes
    it again from what is left."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:pets"
    await core.intake.accept(
        IncomingMessage(scope="pets", text="Our new cat is called Bailey", author="Mel")
    )
    clock.advance(timedelta(minutes=1))
    await core.intake.accept(IncomingMessage(scope="pets", text="So cute!", author="Tom"))
    embedder = FakeEmbedder()
    recall = _recall_of(core, embedder)
    await recall.embed_backlog(scope)
    assert any("Bailey" in t and "So cute!" in t for t in embedder.texts)
    await core.admin.text.forget_text("pets", "Bailey")
    assert await _vector_ids(core, scope) == set()  # the answer's vector went with it
    embedder.texts.clear()
    await recall.embed_backlog(scope)
    assert embedder.texts == ["Tom: So cute!"]
    assert await _vector_ids(core, scope) == await _log_ids(core, scope)


async def test_the_index_is_rebuilt_only_when_something_left_the_log(
    make_core: CoreFactory,
) -> None:
    """A tier edit moves the epoch but removes no message: the index stands (a rebuild is
    seconds of CPU at 100k messages, in every process). A forget that deletes a message
    rebuilds it, and what it deleted is not recalled."""
    clock = ManualClock(START)
    core = await make_core(clock=clock, offline=True)
    scope = "console:team"
    recall = _recall_of(core)
    await feed(core, clock, scope, conversation(START, days=1, per_day=10))
    await core.intake.accept(
        IncomingMessage(scope="team", text="The cafe near the river is Blue Heron", author="M")
    )
    await recall.warm(scope)
    built = recall._indexes[scope]
    await core.admin.edit_tier("team", "overview", "We meet on Fridays.")
    hits = await recall.search(scope, "Which cafe near the river?")
    assert recall._indexes[scope] is built  # not rebuilt
    assert any("Blue Heron" in d.text for h in hits for d in h.docs)
    await core.admin.text.forget_text("team", "Blue Heron")
    hits = await recall.search(scope, "Which cafe near the river?")
    assert recall._indexes[scope] is not built
    assert not any("Blue Heron" in d.text for h in hits for d in h.docs)


def _objects_held(root: object) -> int:
    """How many Python objects ``root`` holds, following containers (numpy arrays, typed
    arrays and blobs count as one each, whatever their length)."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        todo.extend(gc.get_referents(obj))
    return len(seen)


async def test_a_big_index_holds_no_object_per_message(make_core: CoreFactory) -> None:
    """A scope's index keeps its documents by column (typed arrays, one text blob), not as
    an object per message: the collector has nothing of it to walk (a NamedTuple per
    message once cost every full collection 70-100 ms at 100k, the event loop held), and a
    message costs its bytes, not an object's headers. Reference counting frees it whole."""
    core = await make_core(offline=True)
    scope = "console:big"
    keys = core.store.keys.scope(scope)
    pipe = core.store.client.pipeline(transaction=False)
    for i in range(5000):  # more than one XRANGE batch: the sliced build in a worker thread
        text = f"message {i % 50}"
        pipe.xadd(keys.log, {"r": "user", "a": f"u{i % 3}", "t": text, "ts": str(i + 1)})
    await pipe.execute()
    recall = _recall_of(core)
    await recall.search(scope, "message")
    index = recall._indexes[scope]
    assert len(index.docs) == 5000
    assert index.docs[4999].text == "message 49" and index.docs[4999].author == "u1"
    assert _objects_held(index) < 500
    assert gc.isenabled()
    alive = weakref.ref(index)
    recall.forget(scope)
    del index
    # Freed by reference counting. (The build's worker thread lets go of its arguments just
    # after the build returns: give it a moment, not a collection.)
    for _ in range(200):
        if alive() is None:
            break
        await asyncio.sleep(0.01)
    assert alive() is None


async def _fill_log(core: Core, scope: str, n: int, topic: str) -> None:
    keys = core.store.keys.scope(scope)
    pipe = core.store.client.pipeline(transaction=False)
    for i in range(n):
        text = f"{topic} note {i % 40} about the {i % 7} plan"
        pipe.xadd(keys.log, {"r": "user", "a": f"u{i % 3}", "t": text, "ts": str(i + 1)})
    await pipe.execute()


async def test_the_cache_stays_under_its_bytes_evicting_the_least_recently_searched(
    make_core: CoreFactory,
) -> None:
    """Eight scopes searched in turn fill a cache that holds about three: the least recently
    searched go (counted), the cached bytes never pass the limit, and an evicted scope is
    built again by its next question, which finds what it always found."""
    core = await make_core(offline=True)
    scopes = [f"console:many{n}" for n in range(8)]
    for n, scope in enumerate(scopes):
        await _fill_log(core, scope, 1500, f"topic{n}")
    probe = _recall_of(core)
    await probe.search(scopes[0], "topic0 plan")
    one_scope = probe.cache_stats.bytes
    assert one_scope > 1500 * 40  # (it counts its texts, postings and columns)
    limit = int(3.5 * one_scope)
    recall = RecallIndex(core.store.client, core.store.keys, cache_bytes=limit)
    for scope in scopes:
        await recall.search(scope, "note plan")
        assert recall.sync.cache.cached_bytes <= limit
        assert recall.cache_stats.bytes == sum(i.nbytes() for i in recall._indexes.values())
    assert list(recall._indexes) == scopes[-3:]
    stats = recall.cache_stats
    assert (stats.evictions, stats.builds, stats.rebuilds_after_eviction) == (5, 8, 0)
    assert stats.scopes == 3 and stats.bytes <= limit
    hits = await recall.search(scopes[0], "topic0 note 7")
    assert hits and all("topic0" in doc.text for hit in hits for doc in hit.docs)
    assert "topic0 note 7 about the 0 plan" in {doc.text for hit in hits for doc in hit.docs}
    stats = recall.cache_stats
    assert (stats.builds, stats.rebuilds_after_eviction, stats.evictions) == (9, 1, 6)
    assert list(recall._indexes) == [*scopes[-2:], scopes[0]]
    assert stats.bytes <= limit and stats.last_build_seconds > 0


def _message_texts(index: ScopeIndex) -> list[str]:
    return [doc.text for doc in (index.docs[row] for row in range(len(index.docs))) if doc.id]


async def test_a_scope_bigger_than_the_cache_indexes_its_newest_messages(
    make_core: CoreFactory,
) -> None:
    """A scope too big for the whole cache is indexed over its newest messages that fit:
    the cache's bytes stay under the limit, the newest are found;
    grown past the limit, it is built again over the newest; a forget elsewhere that
    leaves every message in place does not rebuild it."""
    core = await make_core(offline=True)
    huge = "console:huge"
    await _fill_log(core, "console:small", 50, "small")
    await _fill_log(core, huge, 3000, "huge")
    probe = _recall_of(core)
    await probe.search(huge, "huge note")
    whole = probe.cache_stats.bytes
    limit = whole // 3
    recall = RecallIndex(core.store.client, core.store.keys, cache_bytes=limit)
    await recall.search("console:small", "small note")
    await recall.search(huge, "huge note 3")
    assert recall.sync.cache.cached_bytes <= limit
    index = recall._indexes[huge]
    assert 0 < index.messages < 3000 and index.skipped == 3000 - index.messages
    assert index.nbytes() <= limit
    said = [entry.text for entry in await core.repo.reads.all_entries(huge)]
    assert _message_texts(index) == said[-index.messages :]  # the newest, in order

    # More said: the index grows past the limit, and is built again over the newest.
    await _fill_log(core, huge, 3000, "later")
    for _ in range(2):
        hits = await recall.search(huge, "later note 7")
    index = recall._indexes[huge]
    assert index.nbytes() <= limit and index.skipped == 6000 - index.messages
    said = [entry.text for entry in await core.repo.reads.all_entries(huge)]
    assert _message_texts(index) == said[-index.messages :]
    assert hits and any("later note 7" in doc.text for hit in hits for doc in hit.docs)
    builds = recall.cache_stats.builds

    # The epoch moves (a forget that deleted nothing of it): the window stands.
    await core.repo.writes.bump_epoch(huge)
    await recall.search(huge, "later note 8")
    assert recall.cache_stats.builds == builds


async def test_retention_before_a_window_does_not_rebuild_it(make_core: CoreFactory) -> None:
    """A scope indexed over its newest messages only: retention trimming messages older than
    the window (the nightly trim of a big channel) leaves the index as it is, through a later
    epoch move too; a trim that reaches into the window builds it again, without them."""
    core = await make_core(offline=True)
    huge = "console:huge"
    await _fill_log(core, huge, 3000, "huge")
    probe = _recall_of(core)
    await probe.search(huge, "huge note")
    recall = RecallIndex(
        core.store.client, core.store.keys, cache_bytes=probe.cache_stats.bytes // 3
    )
    await recall.search(huge, "huge note 3")
    index = recall._indexes[huge]
    builds, window = recall.cache_stats.builds, index.messages
    ids = [entry.id for entry in await core.repo.reads.all_entries(huge)]
    assert 0 < window < 2000

    assert await core.repo.writes.trim_log_before(huge, ids[1000]) == 1000  # before the window
    await recall.search(huge, "huge note 4")
    assert recall.cache_stats.builds == builds and recall._indexes[huge] is index
    assert index.messages == window and index.skipped == 2000 - window
    await core.repo.writes.bump_epoch(huge)  # (a forget that deleted none of the messages)
    await recall.search(huge, "huge note 5")
    assert recall.cache_stats.builds == builds and recall._indexes[huge] is index

    into = len(ids) - window + 10  # the window's ten oldest go
    assert await core.repo.writes.trim_log_before(huge, ids[into]) == into - 1000
    hits = await recall.search(huge, "huge note 6")
    assert recall.cache_stats.builds == builds + 1
    rebuilt = recall._indexes[huge]
    kept = {doc.id for doc in (rebuilt.docs[row] for row in range(len(rebuilt.docs))) if doc.id}
    assert kept and kept <= set(ids[into:])
    assert hits and {i for hit in hits for i in hit.ids} <= set(ids[into:])


async def test_a_reply_waits_for_an_index_being_built_at_most_recall_wait_s(
    make_core: CoreFactory,
) -> None:
    """A channel of 6,000 messages whose index is not built yet (the bot just started): a
    reply waits for it at most ``memory.recall_wait_s`` (here 1 ms: no build of 6,000
    messages is done by then) and is made without recalled messages; the build goes on in
    the background, and the next question finds it built and recalls. The rebuild after a
    forget is not waited for either. A dry run (``ask --dry-run``, the evaluation) waits
    for it whole."""
    core = await make_core(offline=True)
    recall = core.recall
    assert recall is not None
    said = IncomingMessage(scope="big", text="the launch code word is pelican", author="Carol")
    await core.intake.accept(said)
    await _fill_log(core, "console:big", 6000, "chatter")
    ask = IncomingMessage(scope="big", text="what is the launch code word?", author="Dan")

    async def reply(wait_s: float) -> str:
        core.settings.memory.recall_wait_s = wait_s
        answer = await core.replier.reply(ask, store=False)
        assert answer.kind == "offline"
        return answer.text

    assert "pelican" not in await reply(0.001)
    await core.drain()  # (the build it left behind, finished)
    assert recall.cache_stats.builds == 1
    assert "pelican" in await reply(60)
    assert recall.cache_stats.builds == 1  # (the build left behind served it)

    await core.admin.text.forget_text("big", "chatter note 7 about the 0 plan")
    assert "pelican" not in await reply(0.001)
    await core.drain()
    assert recall.cache_stats.builds == 2
    assert "pelican" in await reply(60)
    assert recall.cache_stats.builds == 2

    await core.admin.text.forget_text("big", "chatter note 8 about the 1 plan")
    prompt = await core.replier.build_prompt(ask)  # waits for the rebuild
    assert "pelican" in recalled(prompt.messages[0]["content"])
    assert recall.cache_stats.builds == 3


async def test_a_thread_s_reply_keeps_its_own_recall_while_its_channel_s_index_is_built(
    make_core: CoreFactory,
) -> None:
    """A reply in a thread waits ``memory.recall_wait_s`` for its channel's index (being
    built: here its lock is held, as a build holds it) and is made with what the thread
    itself recalls; the channel's search goes on and is done once the build lets go."""
    core = await make_core(offline=True)
    recall = core.recall
    assert recall is not None
    channel, thread = "discord:1:2", "discord:1:2:3"
    await core.intake.accept(
        IncomingMessage(scope=channel, text="the launch code word is pelican", author="Carol")
    )
    await core.intake.accept(
        IncomingMessage(scope=thread, text="the thread's code word is heron", author="Ben")
    )
    ask = IncomingMessage(scope=thread, text="what code word did we pick?", author="Dan")
    core.settings.memory.recall_wait_s = 0.5
    async with recall.sync.lock(channel):  # (the channel's index being built)
        answer = await core.replier.reply(ask, store=False)
        assert "heron" in answer.text and "pelican" not in answer.text
        assert len(recall._late) == 1  # the channel's search, waiting for the build
    await recall.drain()
    assert not recall._late and channel in recall._indexes
    answer = await core.replier.reply(ask, store=False)
    assert "heron" in answer.text and "pelican" in answer.text


async def test_a_windowed_index_loads_the_stored_vectors_of_its_own_messages(
    make_core: CoreFactory,
) -> None:
    """With recall by meaning, a scope too big for the cache holds its newest messages with
    their stored vectors (read by id, none embedded again), under the limit, and finds the
    newest by meaning."""
    core = await make_core(offline=True)
    scope = "console:meaning"
    await _fill_log(core, scope, 1200, "cat")
    embedder = FakeEmbedder()
    first = _recall_of(core, embedder)
    assert await first.embed_backlog(scope) == 1200
    await first.search(scope, "cat note")
    whole = first.cache_stats.bytes
    limit = whole // 3
    later = FakeEmbedder()
    recall = RecallIndex(core.store.client, core.store.keys, embedder=later, cache_bytes=limit)
    hits = await recall.search(scope, "feline note 39")
    index = recall._indexes[scope]
    assert 0 < index.messages < 1200 and index.skipped == 1200 - index.messages
    assert index.unembedded == [] and index.vectors is not None
    assert index.nbytes() <= limit
    assert later.texts == ["feline note 39"]  # the question only: no message embedded again
    newest = {entry.id for entry in (await core.repo.reads.all_entries(scope))[-index.messages :]}
    assert hits and {doc_id for hit in hits for doc_id in hit.ids} <= newest
