"""What a platform does to a stored message: deletes it, edits it, and (the bot's own
background work) adds its images' captions. Each is a forget request
(:class:`~memory_core.service.forget_requests.ForgetRequests`), so an edit or a caption never
brings back forgotten memory, and a crash half-way is finished by maintenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memory_core import calendar
from memory_core.models import Attachment
from memory_core.scopes import Scope, parse_scope
from memory_core.service.forget_request import ForgetRequest
from memory_core.service.forget_requests import ForgetRequests, stored_ms
from memory_core.text.attachments import caption_in, stored_text, with_captions
from memory_core.tiers.redact import removed_spans


class MessageChanges:
    """A platform message deleted or edited, and captions added to a stored one."""

    def __init__(self, requests: ForgetRequests) -> None:
        self.requests = requests
        self.repo = requests.repo
        self.settings = requests.settings

    async def forget_message(
        self, scope: str, platform_id: str, *, when: datetime | None = None
    ) -> int:
        """A message deleted on its platform: delete it here too, with the facts made of it
        and the summary sentences that repeat it. Returns how many raw messages went.
        ``when``: the message's original send time, so its entry is found without reading
        the whole log."""
        scope = parse_scope(scope)
        if not platform_id:
            return 0
        # Never stored again, by any writer (a learn that read it, a redelivery), whether
        # memory holds it now or not.
        await self.requests.ledger.forget_messages(scope, [platform_id], self.requests.now_ms())
        from_ms = calendar.to_ms(when) if when is not None else 0
        doomed = await self.requests.message_entries(scope, platform_id, from_ms)
        parent = Scope.of(scope).parent
        if not doomed and parent is not None:
            # Posted in a thread, kept in its channel: the bot's answer to a channel message
            # (Slack answers in a thread under the question; memory keeps it by the question).
            scope = parent.key
            doomed = await self.requests.message_entries(scope, platform_id, from_ms)
        if not doomed:
            return 0
        # Its specific words (a number, a name of a thing) too, which a summary or a day's
        # decisions repeat without quoting the message: as an edit removing it all.
        needles = {n: None for e in doomed for n in removed_spans(e.text, "")}
        request = ForgetRequest(
            kind="message",
            platform_id=platform_id,
            entry_ids=tuple(e.id for e in doomed),
            quotes=tuple(e.text for e in doomed),
            needles=tuple(needles),
            ts_ms=min(stored_ms(e) for e in doomed),  # a resumed forget finds it fast
        )
        return (await self.requests.forget_one(scope, request, found=doomed)).messages

    async def edit_message(
        self,
        scope: str,
        platform_id: str,
        text: str,
        *,
        when: datetime | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> bool:
        """A message edited on its platform: its new text replaces the stored one (one copy,
        same author and original time), summary sentences with the text the edit removed
        are dropped, and facts drawn from the message go (the next summary of the new text
        learns them again if they still hold). The same text again (platforms send updates
        for embeds and link previews) changes nothing; an edit down to no text is a delete.
        Returns whether memory changed. ``when``: as for :meth:`forget_message`.
        ``attachments``: the message's files, which an edit keeps (rendered as when stored)."""
        scope = parse_scope(scope)
        if not platform_id:
            return False
        # A thread's first message read from the platform (memory lacking it) is read again.
        await self.repo.starters.drop(scope, platform_id)
        cap = self.settings.memory.max_message_chars
        if not stored_text(text, cap, attachments)[0]:
            return bool(await self.forget_message(scope, platform_id, when=when))
        from_ms = calendar.to_ms(when) if when is not None else 0
        stored = await self.requests.message_entries(scope, platform_id, from_ms)
        if not stored:
            return False
        first = stored[0]
        # A file the edit keeps keeps the caption it was given (the platform does not know it).
        kept = [
            replace(a, caption=a.caption or caption_in(first.text, a) or "") for a in attachments
        ]
        new_text, _ = stored_text(text, cap, kept)
        if [e.text for e in stored] == [new_text]:
            return False
        needles = {n: None for e in stored for n in removed_spans(e.text, new_text)}
        request = ForgetRequest(
            kind="edit",
            text=new_text,
            platform_id=platform_id,
            needles=tuple(needles),
            entry_ids=tuple(e.id for e in stored),
            ts_ms=stored_ms(first),
            author=first.author,
            author_id=first.author_id,
            role=first.role,
            public=first.public,
        )
        await self.requests.forget_one(scope, request, found=stored)
        return True

    # -- captions (background work: it must not bring back what was forgotten) ---------
    async def uncaptioned(
        self,
        scope: str,
        platform_id: str,
        attachments: Sequence[Attachment],
        *,
        when: datetime | None = None,
    ) -> tuple[list[Attachment], int]:
        """Of a stored message's ``attachments``, those its stored text lists without a
        caption (none when the message is gone or every file has one already: a caption
        is made once), and the scope's epoch, read first: the caption is written only if
        nothing was forgotten since (:meth:`add_captions`)."""
        scope = parse_scope(scope)
        epoch = (await self.repo.reads.state(scope)).epoch  # before the message it decides on
        stored = await self.requests.message_entries(
            scope, platform_id, calendar.to_ms(when) if when is not None else 0
        )
        if not platform_id or not stored:
            return [], epoch
        return [a for a in attachments if caption_in(stored[0].text, a) == ""], epoch

    async def add_captions(
        self,
        scope: str,
        platform_id: str,
        captioned: Sequence[Attachment],
        *,
        epoch: int,
        when: datetime | None = None,
    ) -> bool:
        """Store images' captions in their message's text (as an edit that removes nothing,
        so recall, summaries, the budget, exports and forget see them as the message's
        words). Nothing is written if the message is gone or lost the files meanwhile, or
        anything was forgotten in the scope since ``epoch`` (read by :meth:`uncaptioned`,
        before the model described the images; or a forget is pending): a caption never
        brings back forgotten memory. Whether it was stored."""
        scope = parse_scope(scope)
        if not platform_id:
            return False
        from_ms = calendar.to_ms(when) if when is not None else 0
        stored = await self.requests.message_entries(scope, platform_id, from_ms)
        if len(stored) != 1:
            return False  # gone (forgotten, deleted), or copies an interrupted edit left
        [entry] = stored
        new_text = with_captions(entry.text, captioned, self.settings.memory.max_message_chars)
        if new_text == entry.text:
            return False
        request = ForgetRequest(
            kind="edit",
            text=new_text,
            platform_id=platform_id,
            entry_ids=(entry.id,),
            ts_ms=stored_ms(entry),
            author=entry.author,
            author_id=entry.author_id,
            role=entry.role,
            public=entry.public,
        )
        if not await self.repo.writes.begin_forget_at(scope, request.to_json(), epoch=epoch):
            return False
        await self.requests.apply_edit(scope, request)
        await self.repo.writes.end_forget(scope, request.to_json())
        await self.requests.persist()
        return True
