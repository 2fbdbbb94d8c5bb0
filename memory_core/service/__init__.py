"""The use cases, over the layers below: one message path for every front door
(``Conversation``), the pipeline (ingest, reply, background maintenance), the ``/memory``
operations (``MemoryAdmin``), exports and imports, and replays of a conversation file."""

from __future__ import annotations

from memory_core.service.admin import MemberPlace, MemberView, MemoryAdmin, ScopeView
from memory_core.service.conversation import Conversation, Turn
from memory_core.service.exports import parse_export
from memory_core.service.forget_request import ForgetReport, ForgetRequest
from memory_core.service.pipeline import MemoryPipeline
from memory_core.service.streaming import ReplySink

__all__ = [
    "Conversation",
    "ForgetReport",
    "ForgetRequest",
    "MemberPlace",
    "MemberView",
    "MemoryAdmin",
    "MemoryPipeline",
    "ReplySink",
    "ScopeView",
    "Turn",
    "parse_export",
]
