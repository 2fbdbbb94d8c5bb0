"""A forget request is written down (``to_json``) before any of it is done and read back
(``from_json``) to finish it after a crash: what is read back is exactly what was written."""

from __future__ import annotations

import json

import pytest

from memory_core.service.forget_request import ForgetRequest

EVERY_FIELD = ForgetRequest(
    kind="edit",
    text="the new text",
    user_id="U1",
    name="Alice",
    platform_id="m1",
    entry_ids=("1-0", "2-0"),
    quotes=("the old text",),
    needles=("hunter2",),
    ts_ms=1_700_000_000_000,
    author="Alice",
    author_id="U1",
    role="assistant",
    public=True,
)


@pytest.mark.parametrize("request_", [EVERY_FIELD, ForgetRequest(kind="all")], ids=["full", "all"])
def test_a_request_reads_back_as_written(request_: ForgetRequest) -> None:
    assert ForgetRequest.from_json(request_.to_json()) == request_


def test_a_request_missing_a_field_is_not_filled_in() -> None:
    """Only to_json writes requests, with every field: one without ``kind`` is not a
    request to read with a guessed kind."""
    data = json.loads(EVERY_FIELD.to_json())
    del data["kind"]
    with pytest.raises(KeyError):
        ForgetRequest.from_json(json.dumps(data))
