from memory_core.tiers.redact import REDACTED, contains, redact, removed_spans


def test_drops_whole_sentences_that_mention_the_text() -> None:
    text = "Alice likes tea. Bob's password is hunter2! They met on Friday."
    out = redact(text, ["hunter2"])
    assert "hunter2" not in out
    assert "password" not in out
    assert "Alice likes tea." in out and "They met on Friday." in out


def test_case_and_width_insensitive() -> None:
    assert not contains(redact("Secret Ｐｌａｎ X is on.", ["plan x"]), "plan x")
    assert contains("ＡＢＣ", "abc")


def test_japanese_sentences() -> None:
    out = redact("アリスは紅茶が好き。ボブの暗証番号は1234です。", ["1234"])
    assert "1234" not in out and "アリスは紅茶が好き。" in out


def test_text_spanning_sentences_is_blanked() -> None:
    out = redact("the code is ab. cd then", ["ab. cd"])
    assert "ab. cd" not in out
    assert REDACTED in out or out == ""


def test_untouched_when_absent() -> None:
    assert redact("nothing here", ["zzz"]) == "nothing here"


# -- removed_spans: what an edit took out, as needles for redact ------------------------------


def test_a_pasted_phone_number_edited_out_is_a_needle() -> None:
    assert removed_spans("call me on 555-0142 tomorrow", "call me tomorrow") == ["555-0142"]


def test_a_replaced_password_is_a_needle_without_its_punctuation() -> None:
    spans = removed_spans("my password is hunter2.", "my password is [removed].")
    assert spans == ["hunter2"]
    assert redact("Bob said his password is hunter2. Alice likes tea.", spans) == (
        "Alice likes tea."
    )


def test_a_short_common_word_is_never_a_needle() -> None:
    # Redacting "tea" would drop every sentence about tea (and "team", "steam").
    assert removed_spans("Alice likes tea", "Alice likes coffee") == []
    assert removed_spans("meet on Tuesday", "meet on Friday") == []
    assert removed_spans("it is 5 pm", "it is 6 pm") == []
    assert removed_spans("@memorybot see #general-2025", "see") == []  # names, not secrets


def test_a_deleted_message_yields_its_specific_words() -> None:
    spans = removed_spans("@memorybot my number is 555-0142, ok?", "")
    assert spans == ["@memorybot my number is 555-0142, ok", "555-0142"]


def test_identical_or_added_text_removes_nothing() -> None:
    assert removed_spans("same text here", "same text here") == []
    assert removed_spans("hello", "hello and welcome 555-0142") == []
    assert removed_spans("", "") == []


def test_a_word_that_moved_is_not_removed() -> None:
    assert removed_spans("token 4f9a2b then bye", "bye then token 4f9a2b") == []


def test_a_long_removed_phrase_is_a_needle_with_its_distinctive_words() -> None:
    old = "standup at ten, and by the way I secretly hate the roadmap"
    spans = removed_spans(old, "standup at ten")
    assert "and by the way I secretly hate the roadmap" in spans
    assert "secretly" in spans and "the" not in spans and "way" not in spans


def test_edits_compare_case_and_width_insensitively() -> None:
    assert removed_spans("Code ＡＢＣ-1234 here", "code abc-1234 here") == []
    # No spaces in Japanese: each character is compared, so only the number is a needle.
    assert removed_spans("アリスの番号は090-1234-5678です", "アリスの番号は秘密です") == [
        "090-1234-5678"
    ]


def test_an_abbreviation_does_not_leave_half_a_sentence_behind() -> None:
    text = "Dr. Smith's pin is 4431. Alice likes tea."
    assert redact(text, ["4431"]) == "Alice likes tea."


def test_a_dropped_sentence_takes_its_separator_and_leaves_the_other_lines() -> None:
    text = "Alice likes tea.\nBob's pin is 4431. Carol too.\nDan likes coffee."
    assert redact(text, ["4431"]) == "Alice likes tea.\nCarol too.\nDan likes coffee."
    assert redact("アリスは紅茶。ボブは4431!キャロルも。", ["4431"]) == "アリスは紅茶。キャロルも。"


def test_a_sentence_about_a_lower_case_name_is_apart_from_the_one_before() -> None:
    """Chat names are often lower case ("al"): a summary sentence that starts with one still
    starts a sentence, or forgetting al would take Alice's sentence with it."""
    text = "Alice likes hojicha tea very much. al said his number is 555 0100. Bob agreed."
    assert redact(text, ["555 0100"]) == "Alice likes hojicha tea very much. Bob agreed."
