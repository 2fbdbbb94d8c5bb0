"""A local fake of Slack for end-to-end tests: Web API, Socket Mode and response_url.

The real ``slack_bolt.async_app.AsyncApp`` and ``slack_sdk`` clients talk to this server over
HTTP/WebSocket on 127.0.0.1, so the e2e tests exercise the real request encoding, retry
handlers, Socket Mode client and Bolt middleware without reaching the internet.

Pointing Bolt at it::

    fake = FakeSlack(bot_token="xoxb-test", app_token="xapp-test")
    await fake.start()
    client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
    app = AsyncApp(client=client, signing_secret="secret")  # HTTP mode
    # Socket Mode: the handler calls apps.connections.open through app.client, i.e. the fake.
    handler = AsyncSocketModeHandler(app, fake.app_token)
    await handler.connect_async()

What the fake understands of each request mirrors how slack_sdk 3.x encodes it: the token in an
``Authorization: Bearer`` header, arguments as query string (``params=``), JSON body (``json=``,
used for anything carrying blocks) or form body (``data=``); all three are merged.

Where things are (``FakeSlack`` is put together from one mixin per concern):

* ``server.py``: the aiohttp app and its routes, token and scope checks, dispatch to the Web API
  methods (``_builtin_handler`` lists them), unknown methods and paths, waiting on records;
* ``methods.py``: the Web API methods (auth, chat.*, users.info, conversations.*, views.*...);
  ``streams.py``: streamed messages (chat.startStream / appendStream / stopStream);
  ``files.py``: uploads, downloads and ``response_url`` posts; ``assistant.py``: the
  assistant panel (its events, assistant.threads.*, message metadata);
* ``limits.py``: Slack's rate limits, on by default (each method's tier, a message a second
  in a channel), and how a test asks for more;
* ``events.py``: the events and payloads Slack sends an app; ``socket.py``: Socket Mode;
  ``signing.py``: signed delivery over HTTP;
* ``state.py``: the workspace (users, channels, history, installs, failure injection);
* ``models.py``: scopes, limits and the records; ``blocks.py``: Block Kit and view validation.
"""

from __future__ import annotations

from .assistant import AssistantThread
from .blocks import event_subscription
from .models import (
    EVENT_SCOPES,
    ApiCall,
    FakeChannel,
    FakeUser,
    FileUpload,
    HistoryTier,
    HttpLogEntry,
    MethodHandler,
    RecordedMessage,
    ResponseUrlPost,
    SocketAck,
    SocketEnvelope,
)
from .server import FakeSlack
from .signing import (
    SignedDelivery,
    event_body,
    interactive_form_body,
    send_signed,
    serve_web_app,
    signed_headers,
    slash_command_form_body,
)
from .streams import FakeStream

__all__ = [
    "EVENT_SCOPES",
    "ApiCall",
    "AssistantThread",
    "FakeChannel",
    "FakeSlack",
    "FakeStream",
    "FakeUser",
    "FileUpload",
    "HistoryTier",
    "HttpLogEntry",
    "MethodHandler",
    "RecordedMessage",
    "ResponseUrlPost",
    "SignedDelivery",
    "SocketAck",
    "SocketEnvelope",
    "event_body",
    "event_subscription",
    "interactive_form_body",
    "send_signed",
    "serve_web_app",
    "signed_headers",
    "slash_command_form_body",
]
