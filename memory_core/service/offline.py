"""The offline reply (no LLM configured): say so, say whether the message was remembered
(not while memory is paused), and answer as well as memory alone can: the few messages most
relevant to the question, each with its date, time and author, or plainly that nothing
remembered here looks related.

Relevance is recall's (:mod:`memory_core.recall.ranking`, BM25 words and meaning): the hits
the reply's memory read already found (no second search), over the whole scope, the working
window included (a thread also searches its channel). With recall off, the window alone is
ranked the same way. A hit is shown only when it answers on its own scale, not merely as the
best of a poor lot (see :func:`is_relevant`), and only the hits close to the best one; they
are shown best first, each with the question it answers or the answer to it (in time order).
What is shown is what ``/memory why`` lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from config.prompts import PromptSet, load_prompts
from memory_core import calendar
from memory_core.models import LogEntry
from memory_core.prompt.assembly import AssemblyInput, Prompt, PromptUse
from memory_core.prompt.recalled import render_recalled
from memory_core.recall.documents import Doc, Hit, ScopeIndex, index_entries
from memory_core.recall.ranking import rank
from memory_core.text.normalise import normalise
from memory_core.text.tokens import TokenCounter

SHOWN_HITS = 3  # the few most relevant: a reply, not a search page
SHOWN_LINES = 6  # with their context turns
LINE_TOKENS = 60  # a long message is cut to its beginning
# A hit answers on its own when the message matches at least this share of what the
# question's own words could score (about half of its telling words: one common word of
# several is not enough), or its meaning is this close (unrelated sentences sit around
# 0.1-0.3, see ranking.SEM_BASE and ranking.VECTOR_MIN, the prompt's much looser bar; 0.5 is
# set above them, not yet measured on a labelled set).
WORDS_MIN = 0.45
MEANING_MIN = 0.5
# Of the hits that answer, those within this share of the best one's score.
NEAR_BEST = 0.5


def is_relevant(hit: Hit) -> bool:
    """Whether a hit answers the question by itself, whatever else the scope holds."""
    return hit.words >= WORDS_MIN or hit.meaning >= MEANING_MIN


def select_relevant(
    hits: Sequence[Hit], *, exclude_id: str = "", lines: int = SHOWN_LINES
) -> list[tuple[str, Doc]]:
    """The (where it was said, document) pairs to show for ``hits`` (best first, as recall
    returns them): the relevant hits near the best, at most :data:`SHOWN_HITS` and
    ``lines`` documents, best hit first and each hit's documents in time order; a message
    shown once (by id where it was said, and by author and words: the same thing said twice
    is shown once, the first found), never the question itself (``exclude_id``)."""
    relevant = [hit for hit in hits if is_relevant(hit)]
    if not relevant:
        return []
    best = max(hit.score for hit in relevant)
    chosen: list[tuple[str, Doc]] = []
    seen: set[tuple[str, ...]] = set()
    taken = 0
    for hit in relevant:
        if taken >= SHOWN_HITS or hit.score < NEAR_BEST * best:
            continue
        docs = []
        for doc in exchange(hit):
            keys = {
                ("id", hit.scope, doc.id, doc.day),
                ("words", doc.kind, doc.author, _words(doc.text)),
            }
            if (not hit.scope and doc.id and doc.id == exclude_id) or keys & seen:
                continue
            seen |= keys
            docs.append((hit.scope, doc))
        docs = docs[: lines - len(chosen)]
        if docs:
            chosen.extend(docs)
            taken += 1
        if len(chosen) >= lines:
            break
    return chosen


def _words(text: str) -> str:
    """A message's words as compared for "said twice": case and spacing aside."""
    return " ".join(normalise(text).casefold().split())


def exchange(hit: Hit) -> list[Doc]:
    """Of a hit's documents, the one that matched and what makes a question and its answer
    with it: the question just before it, or the answer just after it when it is a question
    (recall's other context turns help a model, but read as noise here)."""
    docs = hit.docs
    at = min(hit.at, len(docs) - 1)
    match = docs[at]
    shown = [match]
    if at > 0 and _asks(docs[at - 1]):
        shown.insert(0, docs[at - 1])
    if at + 1 < len(docs) and _asks(match):
        shown.append(docs[at + 1])
    return shown


def _asks(doc: Doc) -> bool:
    return doc.kind == "message" and doc.text.rstrip().endswith(("?", "？"))


def window_hits(data: AssemblyInput) -> list[Hit]:
    """With recall off: the working window ranked as recall ranks a scope."""
    entries: list[LogEntry] = sorted(
        (entry for entry in data.recent if entry.id != data.exclude_id), key=lambda e: e.id
    )
    if not entries:
        return []
    index: ScopeIndex = index_entries(entries)
    return rank(index, data.new_text, exclude_ids=set(), limit=SHOWN_HITS * 4, tz=data.tz)


def offline_reply(
    data: AssemblyInput,
    prompt: Prompt,
    counter: TokenCounter,
    *,
    max_chars: int,
    searched: bool = True,
    remembered: bool | None = None,
) -> tuple[str, Prompt]:
    """The offline reply to ``data.new_text`` from the memory read for it (``data``: its
    recall hits; ``searched`` False, recall is off: its window), within ``max_chars``; and
    ``prompt``
    narrowed to what that text shows (its recalled messages: what ``/memory why`` lists).
    ``remembered``: whether the message answered was stored (``IngestResult.stored``:
    False while memory is paused here); None: as the scope's state says (paused here or in
    its channel: not remembered)."""
    prompts = load_prompts(prompt.language)
    if remembered is None:
        remembered = not data.state.paused  # a thread's state carries its channel's pause
    intro = prompts.offline_reply if remembered else prompts.say("offline_paused")
    hits = list(data.recalled) if searched else window_hits(data)
    pairs = select_relevant(hits, exclude_id=data.exclude_id)
    lines = [_line(doc, data.tz, counter) for _, doc in pairs]
    # Within the size limit: the least relevant lines go first (each line is short).
    while lines and len(_text(prompts, intro, lines, data)) > max_chars:
        lines.pop()
    pairs = pairs[: len(lines)]
    text = _text(prompts, intro, lines, data)
    used = PromptUse(
        recalled=tuple(doc for _, doc in pairs),
        recalled_from=tuple(where for where, _ in pairs),
        epoch=prompt.used.epoch,
        sources=prompt.used.sources,
        tz=prompt.used.tz,
    )
    sections = {"recall": counter.count(text)} if pairs else {}
    return text, replace(prompt, sections=sections, used=used)


def _line(doc: Doc, tz: str, counter: TokenCounter) -> str:
    local = calendar.from_ms(doc.ms).astimezone(calendar.zone(tz))
    when = doc.day if doc.kind == "day" else local.strftime("%Y-%m-%d %H:%M")
    return f"[{when}] {counter.truncate(render_recalled(doc), LINE_TOKENS)}"


def _text(prompts: PromptSet, intro: str, lines: list[str], data: AssemblyInput) -> str:
    if lines:
        return f"{intro}\n\n{prompts.offline_found}\n" + "\n".join(lines)
    others = any(entry.id != data.exclude_id for entry in data.recent)
    return f"{intro}\n\n{prompts.offline_unrelated if others else prompts.offline_nothing}"
