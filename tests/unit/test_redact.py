from memory_core.redact import REDACTED, contains, redact


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
