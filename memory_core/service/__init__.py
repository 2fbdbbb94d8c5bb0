"""The use cases, over the layers below: one message path for every front door
(``Conversation``: the message into memory through ``Intake``, the answer written by
``Replier``, maintenance handed to ``MaintenanceScheduler``), the ``/memory``
operations (``MemoryAdmin``), exports and imports, and replays of a conversation file."""

from __future__ import annotations

from memory_core.service.admin import MemberPlace, MemberView, MemoryAdmin, ScopeView
from memory_core.service.conversation import Conversation, Turn
from memory_core.service.exports import parse_export
from memory_core.service.forget_request import ForgetReport, ForgetRequest
from memory_core.service.intake import Intake
from memory_core.service.replies import Replier
from memory_core.service.scheduling import MaintenanceScheduler
from memory_core.service.streaming import KeptAnswer, ReplySink

__all__ = [
    "Conversation",
    "ForgetReport",
    "ForgetRequest",
    "Intake",
    "KeptAnswer",
    "MaintenanceScheduler",
    "MemberPlace",
    "MemberView",
    "MemoryAdmin",
    "Replier",
    "ReplySink",
    "ScopeView",
    "Turn",
    "parse_export",
]
