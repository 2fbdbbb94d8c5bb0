"""Reading a place's past, for learning it: from the platforms' APIs (a channel's history
and a thread's first message, :mod:`bots.learn.slack_history` at Slack's pace,
:mod:`bots.learn.slack_pacing`, and :mod:`bots.learn.discord_history`; what was missed while
the bot was away, :mod:`bots.learn.slack_catch_up` and :mod:`bots.learn.discord_catch_up`)
and from the export files an admin has: a Slack workspace export
(:mod:`bots.learn.slack_export`) and DiscordChatExporter's JSON
(:mod:`bots.learn.discord_export`). Each reader turns its source into
:class:`memory_core.service.past.PastSource` s, one per conversation, that the learner
reads; a bad file is refused (``LearnRefused``, naming the file, the field and what is
wrong) before anything of it is handed over."""

from bots.learn.discord_export import DiscordExportSource, discord_export_sources
from bots.learn.paging import PAGE_SIZE
from bots.learn.slack_export import SlackExportSource, slack_export_sources

__all__ = [
    "PAGE_SIZE",
    "DiscordExportSource",
    "SlackExportSource",
    "discord_export_sources",
    "slack_export_sources",
]
