"""Learning a channel's past from the export files an admin has: a Slack workspace export
(:mod:`bots.learn.slack_export`) and DiscordChatExporter's JSON
(:mod:`bots.learn.discord_export`). Each reader turns an export into
:class:`memory_core.service.past.PastSource` s, one per conversation, that the learner
reads as it reads a platform's history; a bad file is refused (``LearnRefused``, naming the
file, the field and what is wrong) before anything of it is handed over."""

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
