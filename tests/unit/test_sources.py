"""Which recalled message an answer drew on (the source line), decided without a model:
pure word overlap beyond the question's words, above a threshold."""

from __future__ import annotations

import pytest

from memory_core.recall.documents import Doc
from memory_core.service.sources import used_source


def doc(text: str, ident: str, kind: str = "message") -> Doc:
    return Doc(id=ident, ms=0, author="someone", text=text, kind=kind, n_terms=0)


LAUNCH = doc("the launch moved to Friday March 3 after the vendor delay", "1-0")
LUNCH = doc("lunch is at the ramen place on Tuesdays", "2-0")
DAY = doc("the launch moved to Friday March 3", "", kind="day")


@pytest.mark.parametrize(
    ("answer", "question", "recalled", "expected"),
    [
        (
            "It is on Friday, March 3, because of the vendor.",
            "when is the launch?",
            (LUNCH, LAUNCH),
            "1-0",
        ),
        ("I don't know when the launch is.", "when is the launch?", (LAUNCH,), None),  # echo only
        ("Ramen on Tuesdays.", "where is lunch?", (LAUNCH, LUNCH), "2-0"),
        ("Friday, March 3.", "when is the launch?", (DAY,), None),  # a day record is no message
        ("Something else entirely.", "anything?", (), None),
    ],
)
def test_the_source_is_the_recalled_message_the_answer_used(
    answer: str, question: str, recalled: tuple[Doc, ...], expected: str | None
) -> None:
    found = used_source(answer, question, [("", doc) for doc in recalled])
    assert (found[1].id if found else None) == expected
